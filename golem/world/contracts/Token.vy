# pragma version 0.4.3
"""
@title Token
@notice Minimal mintable ERC-20 for the dev world's DAI (the world's USDC is Circle's published
        FiatTokenV2_2, see docs/design/chain.md). Only the minter (the deployer) can mint.
"""

event Transfer:
    sender: indexed(address)
    receiver: indexed(address)
    value: uint256

event Approval:
    owner: indexed(address)
    spender: indexed(address)
    value: uint256

name: public(String[32])
symbol: public(String[16])
decimals: public(uint8)
totalSupply: public(uint256)
balanceOf: public(HashMap[address, uint256])
allowance: public(HashMap[address, HashMap[address, uint256]])
minter: public(address)


@deploy
def __init__(_name: String[32], _symbol: String[16], _decimals: uint8):
    self.name = _name
    self.symbol = _symbol
    self.decimals = _decimals
    self.minter = msg.sender


@internal
def _transfer(sender: address, receiver: address, amount: uint256):
    assert receiver != empty(address), "zero address"
    assert self.balanceOf[sender] >= amount, "insufficient balance"
    self.balanceOf[sender] -= amount
    self.balanceOf[receiver] += amount
    log Transfer(sender=sender, receiver=receiver, value=amount)


@external
def transfer(to: address, amount: uint256) -> bool:
    self._transfer(msg.sender, to, amount)
    return True


@external
def approve(spender: address, amount: uint256) -> bool:
    self.allowance[msg.sender][spender] = amount
    log Approval(owner=msg.sender, spender=spender, value=amount)
    return True


@external
def transferFrom(sender: address, to: address, amount: uint256) -> bool:
    allowed: uint256 = self.allowance[sender][msg.sender]
    if allowed != max_value(uint256):
        assert allowed >= amount, "insufficient allowance"
        self.allowance[sender][msg.sender] = allowed - amount
    self._transfer(sender, to, amount)
    return True


@external
def mint(to: address, amount: uint256):
    assert msg.sender == self.minter, "only minter"
    assert to != empty(address), "zero address"
    self.totalSupply += amount
    self.balanceOf[to] += amount
    log Transfer(sender=empty(address), receiver=to, value=amount)


@view
@external
def isMinter(account: address) -> bool:
    # Circle's USDC asks its minters the same way, so the simulator checks both stables with one call
    return account == self.minter
