# pragma version 0.4.3
"""
@title Pool
@notice Constant-product (x*y=k) pool of token0 (WETH) and token1 (USDC),
        30 bps fee taken on the input amount.
"""

from ethereum.ercs import IERC20

event Swap:
    sender: indexed(address)
    token_in: indexed(address)
    amount_in: uint256
    amount_out: uint256
    recipient: address

event AddLiquidity:
    provider: indexed(address)
    amount0: uint256
    amount1: uint256
    shares: uint256

event RemoveLiquidity:
    provider: indexed(address)
    amount0: uint256
    amount1: uint256
    shares: uint256

FEE_BPS: constant(uint256) = 30
BPS: constant(uint256) = 10000

token0: public(address)
token1: public(address)
reserve0: public(uint256)
reserve1: public(uint256)
total_shares: public(uint256)
shares: public(HashMap[address, uint256])


@deploy
def __init__(_token0: address, _token1: address):
    assert _token0 != _token1, "identical tokens"
    assert _token0 != empty(address) and _token1 != empty(address), "zero address"
    self.token0 = _token0
    self.token1 = _token1


@internal
@view
def _amount_out(amount_in: uint256, token_in: address) -> uint256:
    reserve_in: uint256 = 0
    reserve_out: uint256 = 0
    if token_in == self.token0:
        reserve_in = self.reserve0
        reserve_out = self.reserve1
    elif token_in == self.token1:
        reserve_in = self.reserve1
        reserve_out = self.reserve0
    else:
        raise "unknown token"
    amount_in_with_fee: uint256 = amount_in * (BPS - FEE_BPS)
    return amount_in_with_fee * reserve_out // (reserve_in * BPS + amount_in_with_fee)


@external
@view
def get_amount_out(amount_in: uint256, token_in: address) -> uint256:
    return self._amount_out(amount_in, token_in)


@external
def swap(token_in: address, amount_in: uint256, min_amount_out: uint256, recipient: address) -> uint256:
    assert amount_in > 0, "zero amount"
    amount_out: uint256 = self._amount_out(amount_in, token_in)
    assert amount_out >= min_amount_out, "slippage"
    assert amount_out > 0, "insufficient output"
    token_out: address = self.token1
    if token_in == self.token0:
        self.reserve0 += amount_in
        self.reserve1 -= amount_out
    else:
        token_out = self.token0
        self.reserve1 += amount_in
        self.reserve0 -= amount_out
    assert extcall IERC20(token_in).transferFrom(msg.sender, self, amount_in), "transfer in failed"
    assert extcall IERC20(token_out).transfer(recipient, amount_out), "transfer out failed"
    log Swap(sender=msg.sender, token_in=token_in, amount_in=amount_in, amount_out=amount_out, recipient=recipient)
    return amount_out


@external
def add_liquidity(amount0: uint256, amount1: uint256, recipient: address) -> uint256:
    assert amount0 > 0 and amount1 > 0, "zero amount"
    minted: uint256 = 0
    if self.total_shares == 0:
        minted = isqrt(amount0 * amount1)
    else:
        minted = min(amount0 * self.total_shares // self.reserve0, amount1 * self.total_shares // self.reserve1)
    assert minted > 0, "zero shares"
    self.reserve0 += amount0
    self.reserve1 += amount1
    self.total_shares += minted
    self.shares[recipient] += minted
    assert extcall IERC20(self.token0).transferFrom(msg.sender, self, amount0), "transfer0 failed"
    assert extcall IERC20(self.token1).transferFrom(msg.sender, self, amount1), "transfer1 failed"
    log AddLiquidity(provider=recipient, amount0=amount0, amount1=amount1, shares=minted)
    return minted


@external
def remove_liquidity(shares: uint256, recipient: address) -> (uint256, uint256):
    assert shares > 0, "zero amount"
    assert self.shares[msg.sender] >= shares, "insufficient shares"
    amount0: uint256 = shares * self.reserve0 // self.total_shares
    amount1: uint256 = shares * self.reserve1 // self.total_shares
    self.shares[msg.sender] -= shares
    self.total_shares -= shares
    self.reserve0 -= amount0
    self.reserve1 -= amount1
    assert extcall IERC20(self.token0).transfer(recipient, amount0), "transfer0 failed"
    assert extcall IERC20(self.token1).transfer(recipient, amount1), "transfer1 failed"
    log RemoveLiquidity(provider=msg.sender, amount0=amount0, amount1=amount1, shares=shares)
    return (amount0, amount1)
