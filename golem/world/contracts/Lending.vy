# pragma version 0.4.3
"""
@title Lending
@notice Single-market lending: supply WETH as collateral, borrow USDC against it.
        Collateral is valued with the Oracle; a position is healthy while
        collateral_value * LT / debt >= 1 (health factor, scaled 1e18).
"""

from ethereum.ercs import IERC20
from ethereum.ercs import IERC20Detailed

interface IOracle:
    def price() -> uint256: view

event Supply:
    user: indexed(address)
    amount: uint256

event Withdraw:
    user: indexed(address)
    amount: uint256

event Borrow:
    user: indexed(address)
    amount: uint256

event Repay:
    user: indexed(address)
    amount: uint256

PRICE_SCALE: constant(uint256) = 10 ** 18
HF_ONE: constant(uint256) = 10 ** 18
BPS: constant(uint256) = 10000

collateral_token: public(address)
debt_token: public(address)
oracle: public(address)
liquidation_threshold_bps: public(uint256)
collateral_of: public(HashMap[address, uint256])
debt_of: public(HashMap[address, uint256])
collateral_scale: uint256
debt_scale: uint256


@deploy
def __init__(_collateral_token: address, _debt_token: address, _oracle: address):
    self.collateral_token = _collateral_token
    self.debt_token = _debt_token
    self.oracle = _oracle
    self.liquidation_threshold_bps = 8000
    self.collateral_scale = 10 ** convert(staticcall IERC20Detailed(_collateral_token).decimals(), uint256)
    self.debt_scale = 10 ** convert(staticcall IERC20Detailed(_debt_token).decimals(), uint256)


@internal
@view
def _health_factor(collateral: uint256, debt: uint256) -> uint256:
    if debt == 0:
        return max_value(uint256)
    price: uint256 = staticcall IOracle(self.oracle).price()
    # collateral value in debt-token base units
    value: uint256 = collateral * price // PRICE_SCALE * self.debt_scale // self.collateral_scale
    return value * self.liquidation_threshold_bps * HF_ONE // (BPS * debt)


@external
@view
def health_factor(user: address) -> uint256:
    return self._health_factor(self.collateral_of[user], self.debt_of[user])


@external
def supply(amount: uint256):
    assert amount > 0, "zero amount"
    self.collateral_of[msg.sender] += amount
    assert extcall IERC20(self.collateral_token).transferFrom(msg.sender, self, amount), "transfer failed"
    log Supply(user=msg.sender, amount=amount)


@external
def withdraw(amount: uint256):
    assert amount > 0, "zero amount"
    collateral: uint256 = self.collateral_of[msg.sender]
    assert collateral >= amount, "insufficient collateral"
    collateral -= amount
    assert self._health_factor(collateral, self.debt_of[msg.sender]) >= HF_ONE, "unhealthy"
    self.collateral_of[msg.sender] = collateral
    assert extcall IERC20(self.collateral_token).transfer(msg.sender, amount), "transfer failed"
    log Withdraw(user=msg.sender, amount=amount)


@external
def borrow(amount: uint256):
    assert amount > 0, "zero amount"
    debt: uint256 = self.debt_of[msg.sender] + amount
    assert self._health_factor(self.collateral_of[msg.sender], debt) >= HF_ONE, "unhealthy"
    assert staticcall IERC20(self.debt_token).balanceOf(self) >= amount, "insufficient liquidity"
    self.debt_of[msg.sender] = debt
    assert extcall IERC20(self.debt_token).transfer(msg.sender, amount), "transfer failed"
    log Borrow(user=msg.sender, amount=amount)


@external
def repay(amount: uint256):
    assert amount > 0, "zero amount"
    paid: uint256 = min(amount, self.debt_of[msg.sender])
    assert paid > 0, "no debt"
    self.debt_of[msg.sender] -= paid
    assert extcall IERC20(self.debt_token).transferFrom(msg.sender, self, paid), "transfer failed"
    log Repay(user=msg.sender, amount=paid)
