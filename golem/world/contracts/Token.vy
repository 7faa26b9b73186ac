# pragma version 0.4.3
"""
@title Token
@notice Minimal ERC-20 for the dev world (USDC with 6 decimals, DAI with 18).
        Only the minter (the deployer) can mint. EIP-3009 transfers with a signed authorization
        (EIP-712 domain: name, version "2", chain id, this contract), as Circle's USDC has them.
"""

event Transfer:
    sender: indexed(address)
    receiver: indexed(address)
    value: uint256

event Approval:
    owner: indexed(address)
    spender: indexed(address)
    value: uint256

event AuthorizationUsed:
    authorizer: indexed(address)
    nonce: indexed(bytes32)

event AuthorizationCanceled:
    authorizer: indexed(address)
    nonce: indexed(bytes32)

EIP712_DOMAIN_TYPEHASH: constant(bytes32) = keccak256(
    "EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)")
TRANSFER_WITH_AUTHORIZATION_TYPEHASH: constant(bytes32) = keccak256(
    "TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)")
RECEIVE_WITH_AUTHORIZATION_TYPEHASH: constant(bytes32) = keccak256(
    "ReceiveWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)")
CANCEL_AUTHORIZATION_TYPEHASH: constant(bytes32) = keccak256("CancelAuthorization(address authorizer,bytes32 nonce)")
# secp256k1n / 2: a signature with a higher s is the malleable twin of a valid one
HALF_CURVE_ORDER: constant(uint256) = 57896044618658097711785492504343953926418782139537452191302581570759080747168

name: public(String[32])
version: public(String[8])
symbol: public(String[16])
decimals: public(uint8)
totalSupply: public(uint256)
balanceOf: public(HashMap[address, uint256])
allowance: public(HashMap[address, HashMap[address, uint256]])
minter: public(address)
authorizationState: public(HashMap[address, HashMap[bytes32, bool]])  # EIP-3009: nonce used or cancelled


@deploy
def __init__(_name: String[32], _symbol: String[16], _decimals: uint8):
    self.name = _name
    self.version = "2"
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
def DOMAIN_SEPARATOR() -> bytes32:
    return self._domain_separator()


@view
@internal
def _domain_separator() -> bytes32:
    # computed per call, so a fork with another chain id gets its own domain
    return keccak256(abi_encode(EIP712_DOMAIN_TYPEHASH, keccak256(self.name), keccak256(self.version), chain.id, self))


@view
@internal
def _signer(struct_hash: bytes32, v: uint8, r: bytes32, s: bytes32) -> address:
    assert convert(s, uint256) <= HALF_CURVE_ORDER, "EIP3009: invalid signature"
    assert v == 27 or v == 28, "EIP3009: invalid signature"
    digest: bytes32 = keccak256(concat(b"\x19\x01", self._domain_separator(), struct_hash))
    return ecrecover(digest, v, r, s)


@internal
def _use_authorization(typehash: bytes32, sender: address, receiver: address, amount: uint256, valid_after: uint256,
                       valid_before: uint256, nonce: bytes32, v: uint8, r: bytes32, s: bytes32):
    assert block.timestamp > valid_after, "EIP3009: authorization is not yet valid"
    assert block.timestamp < valid_before, "EIP3009: authorization is expired"
    assert not self.authorizationState[sender][nonce], "EIP3009: authorization is used or canceled"
    struct_hash: bytes32 = keccak256(abi_encode(typehash, sender, receiver, amount, valid_after, valid_before, nonce))
    signer: address = self._signer(struct_hash, v, r, s)
    assert signer != empty(address) and signer == sender, "EIP3009: invalid signature"
    self.authorizationState[sender][nonce] = True
    log AuthorizationUsed(authorizer=sender, nonce=nonce)
    self._transfer(sender, receiver, amount)


@external
def transferWithAuthorization(sender: address, receiver: address, amount: uint256, valid_after: uint256,
                              valid_before: uint256, nonce: bytes32, v: uint8, r: bytes32, s: bytes32):
    self._use_authorization(TRANSFER_WITH_AUTHORIZATION_TYPEHASH, sender, receiver, amount, valid_after,
                            valid_before, nonce, v, r, s)


@external
def receiveWithAuthorization(sender: address, receiver: address, amount: uint256, valid_after: uint256,
                             valid_before: uint256, nonce: bytes32, v: uint8, r: bytes32, s: bytes32):
    # only the payee may submit it: a front-runner cannot move the funds to the payee early from the mempool
    assert msg.sender == receiver, "EIP3009: caller must be the payee"
    self._use_authorization(RECEIVE_WITH_AUTHORIZATION_TYPEHASH, sender, receiver, amount, valid_after,
                            valid_before, nonce, v, r, s)


@external
def cancelAuthorization(authorizer: address, nonce: bytes32, v: uint8, r: bytes32, s: bytes32):
    assert not self.authorizationState[authorizer][nonce], "EIP3009: authorization is used or canceled"
    signer: address = self._signer(keccak256(abi_encode(CANCEL_AUTHORIZATION_TYPEHASH, authorizer, nonce)), v, r, s)
    assert signer != empty(address) and signer == authorizer, "EIP3009: invalid signature"
    self.authorizationState[authorizer][nonce] = True
    log AuthorizationCanceled(authorizer=authorizer, nonce=nonce)
