# pragma version 0.4.3
"""
@title WETH
@notice Wrapped ether (18 decimals): deposit/withdraw against native ETH, plus a
        dev-only mint for the minter (the deployer) so the world can be seeded cheaply.
"""

event Transfer:
    sender: indexed(address)
    receiver: indexed(address)
    value: uint256

event Approval:
    owner: indexed(address)
    spender: indexed(address)
    value: uint256

event Deposit:
    owner: indexed(address)
    value: uint256

event Withdrawal:
    owner: indexed(address)
    value: uint256

name: public(String[32])
symbol: public(String[16])
decimals: public(uint8)
totalSupply: public(uint256)
balanceOf: public(HashMap[address, uint256])
allowance: public(HashMap[address, HashMap[address, uint256]])
minter: public(address)


@deploy
def __init__():
    self.name = "Wrapped Ether"
    self.symbol = "WETH"
    self.decimals = 18
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
@payable
def deposit():
    self.balanceOf[msg.sender] += msg.value
    self.totalSupply += msg.value
    log Deposit(owner=msg.sender, value=msg.value)
    log Transfer(sender=empty(address), receiver=msg.sender, value=msg.value)


@external
def withdraw(wad: uint256):
    assert self.balanceOf[msg.sender] >= wad, "insufficient balance"
    self.balanceOf[msg.sender] -= wad
    self.totalSupply -= wad
    log Withdrawal(owner=msg.sender, value=wad)
    log Transfer(sender=msg.sender, receiver=empty(address), value=wad)
    send(msg.sender, wad)


@external
def mint(to: address, amount: uint256):
    assert msg.sender == self.minter, "only minter"
    assert to != empty(address), "zero address"
    self.totalSupply += amount
    self.balanceOf[to] += amount
    log Transfer(sender=empty(address), receiver=to, value=amount)
