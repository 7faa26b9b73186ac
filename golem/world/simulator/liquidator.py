"""The liquidator: reads Aave's health factor of every watched borrower (the golem's account and everyone seen
in the Pool's Borrow events) and calls `liquidationCall` on each one under 1.0; the protocol's close factor
and bonus apply, and the LiquidationCall event is the record."""

from __future__ import annotations

from typing import Any

from eth_abi import decode as abi_decode
from eth_utils import keccak, to_checksum_address
from hexbytes import HexBytes
from pydantic import BaseModel
from web3 import Web3

from golem.chain.contracts import FEED_DECIMALS, HEALTH_FACTOR_DECIMALS, TOKEN_DECIMALS
from golem.chain.reader import LIQUIDATION_CALL_TOPIC, _Read, _eth_call, _quantity, _uint256
from golem.world.deploy import TxFailed
from golem.world.simulator.trader import MAX_UINT256, Trader


GAS_LIQUIDATION = 1_500_000  # Aave V3 liquidationCall takes ~300–450k; headroom for interest accrual paths

BORROW_TOPIC = "0x" + keccak(text="Borrow(address,address,address,uint256,uint8,uint256,uint16)").hex()
WAD = 10**HEALTH_FACTOR_DECIMALS


class SimLiquidation(BaseModel):
    """One `liquidationCall` the simulator's liquidator made, as the Pool's LiquidationCall event records it."""

    user: str
    collateral_asset: str  # symbol (WETH, USDC, DAI)
    debt_asset: str
    debt_covered: float  # debt asset units repaid by the liquidator
    collateral_seized: float  # collateral units the liquidator received, the liquidation bonus included
    health_factor: float  # the user's health factor when the liquidator checked it
    tx_hash: str
    block_number: int


class Liquidator(Trader):
    """The trader as liquidator: watches borrowers and liquidates those under health factor 1.0."""

    _aave: Any
    liquidate: bool
    symbols: list[str]
    watched: list[str]

    def watch(self, account: str | None) -> None:
        """Add a borrower the liquidator checks every step."""
        if account and Web3.is_address(account):
            acct = to_checksum_address(account)
            if acct not in self.watched and acct != self._trader.address:
                self.watched.append(acct)

    def _liquidate(self, health: dict[str, int]) -> tuple[list[SimLiquidation], list[str]]:
        """liquidationCall on every watched borrower under HF 1: the largest debt against the largest collateral,
        debtToCover = type(uint256).max (the Pool applies its close factor), receiveAToken false."""
        unhealthy = [u for u, hf in health.items() if hf < WAD]
        if not unhealthy or not self.liquidate:
            return [], []
        a, t = self.deployment.addresses, self._trader.address
        reserve_syms = [s for s in self.symbols if f"A_{s}" in a and f"VDEBT_{s}" in a and f"FEED_{s}" in a]
        reads = [
            _Read("trader nonce", "eth_getTransactionCount", [t, "pending"]),
            _Read("oracle nonce", "eth_getTransactionCount", [self._oracle.address, "pending"]),
            _Read(f"eth_getBalance({t})", "eth_getBalance", [t, "latest"]),
        ]
        reads += [_eth_call(f"{s}.balanceOf({t})", a[s], "balanceOf(address)", t) for s in reserve_syms]
        reads += [_eth_call(f"FEED_{s}.latestAnswer()", a[f"FEED_{s}"], "latestAnswer()") for s in reserve_syms]
        for u in unhealthy:
            reads += [_eth_call(f"A_{s}.balanceOf({u})", a[f"A_{s}"], "balanceOf(address)", u) for s in reserve_syms]
            reads += [_eth_call(f"VDEBT_{s}.balanceOf({u})", a[f"VDEBT_{s}"], "balanceOf(address)", u) for s in reserve_syms]
        res = self._batch(reads)
        self._trader.refresh(None, _quantity(reads[0], res[0]))
        if self._oracle is not self._trader:
            self._oracle.refresh(None, _quantity(reads[1], res[1]))
        n = len(reserve_syms)
        state: dict[str, Any] = {"eth": _quantity(reads[2], res[2]),
                 "balances": {s: _uint256(reads[3 + i], res[3 + i]) for i, s in enumerate(reserve_syms)}}
        usd = {s: _uint256(reads[3 + n + i], res[3 + n + i]) / 10**FEED_DECIMALS for i, s in enumerate(reserve_syms)}
        sent: list[tuple[str, HexBytes, float]] = []
        funding: list[tuple[str, HexBytes]] = []
        for j, u in enumerate(unhealthy):
            base = 3 + 2 * n + 2 * n * j
            coll = {s: _uint256(reads[base + i], res[base + i]) for i, s in enumerate(reserve_syms)}
            debt = {s: _uint256(reads[base + n + i], res[base + n + i]) for i, s in enumerate(reserve_syms)}

            def value(s: str, amounts: dict[str, int]) -> float:
                return float(amounts[s] / 10 ** TOKEN_DECIMALS[s] * usd[s])

            debt_sym = max(reserve_syms, key=lambda s: value(s, debt))
            coll_sym = max(reserve_syms, key=lambda s: value(s, coll))
            if debt[debt_sym] == 0 or coll[coll_sym] == 0:
                continue
            # the close factor caps the cover at the whole debt; a little more for interest accrued by the block
            need = debt[debt_sym] + debt[debt_sym] // 100 + 1
            have = self._fund(debt_sym, need, state["balances"][debt_sym], state, f"liquidate {u}", funding)
            state["balances"][debt_sym] = max(0, state["balances"][debt_sym] - have)
            tx = self._trader.call_fn(self._aave, "liquidationCall", a[coll_sym], a[debt_sym], u, MAX_UINT256, False,
                                      gas=GAS_LIQUIDATION)
            sent.append((u, tx, health[u] / WAD))
        done, failures = [], []
        self._settle(funding)
        symbols = {a[s].lower(): s for s in self.symbols}
        for u, tx, hf in sent:
            try:
                [receipt] = self._settle([(f"liquidationCall({u})", tx)])
            except TxFailed as err:
                failures.append(str(err))
                continue
            for lg in receipt["logs"]:
                topics = [HexBytes(x) for x in lg["topics"]]
                if len(topics) == 4 and "0x" + topics[0].hex().removeprefix("0x") == LIQUIDATION_CALL_TOPIC:
                    covered, seized, _liq, _recv = abi_decode(["uint256", "uint256", "address", "bool"], bytes(lg["data"]))
                    coll_sym = symbols.get("0x" + topics[1][-20:].hex().removeprefix("0x"), "?")
                    debt_sym = symbols.get("0x" + topics[2][-20:].hex().removeprefix("0x"), "?")
                    done.append(SimLiquidation(
                        user=to_checksum_address(topics[3][-20:]), collateral_asset=coll_sym, debt_asset=debt_sym,
                        debt_covered=covered / 10 ** TOKEN_DECIMALS.get(debt_sym, 18),
                        collateral_seized=seized / 10 ** TOKEN_DECIMALS.get(coll_sym, 18), health_factor=hf,
                        tx_hash="0x" + HexBytes(receipt["transactionHash"]).hex().removeprefix("0x"),
                        block_number=int(receipt["blockNumber"]),
                    ))  # fmt: skip
        return done, failures
