"""The backtest's world: a replay driver that sets the dev chain to a recorded row before the golem observes it
(one code path for live and backtest: only the world differs).

Per row: the block time is the row's time, the feed answers `oracle_price` and arbitrage takes the pairs to
`pool_price`, the liquidator backruns the round, and an empty block sets the next base fee to `gas_gwei`.
Confirmation blocks come from infra/block_producer.py at verify's start, never after a wall-clock pause.
Why each step and why it is repeatable: docs/design/backtest.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from web3 import Web3

from golem.backtest.models import PathRow
from golem.chain.contracts import Deployment
from golem.chain.reader import read_snapshot
from golem.models.observation import ChainSnapshot
from golem.world.simulator.liquidator import SimLiquidation
from golem.world.simulator.market import MarketSimulator

BLOCK_INTERVAL_S = 0  # chain seconds between blocks inside a row: every block of a row carries the row's time
# Block numbers that do not depend on timing: the deployment's pipelined sends share Anvil's automined blocks as their
# arrival happens to allow (fewer blocks on a fast machine). The first row starts at ORIGIN_BLOCK, and a row's setup
# (mined by the driver in one block or a few) is padded with empty blocks to one block per transaction it sent.
ORIGIN_BLOCK = 128
EMPTY_BLOCK_BASE_FEE_FACTOR = 0.875  # EIP-1559: an empty parent lowers the base fee by 1/8


class ReplayError(RuntimeError):
    """The chain refused to take a row (a node error or a transaction that reverted)."""


@dataclass(frozen=True)
class AppliedRow:
    row: PathRow
    block_timestamp: int  # the row's time as the chain took it (later when the chain was already past it)
    pool_price: float  # read back after the trades
    oracle_price: float
    # the golem's (every watched borrower's) health factor at the row's prices, before the liquidator acted
    health_factors: dict[str, float | None] = field(default_factory=dict)
    liquidations: tuple[SimLiquidation, ...] = ()  # what the liquidator did on this row
    liquidation_failures: tuple[str, ...] = ()  # a liquidationCall that reverted (the runner logs it)
    start_block: int = 0  # the head before the row: its events come after it


class ReplayDriver:
    """Applies path rows to one deployed dev world. Holds the trader's and the feeds' owner's keys in memory only."""

    def __init__(self, w3: Web3, deployment: Deployment, trader_key: str, oracle_key: str) -> None:
        self.w3 = w3
        self.deployment = deployment
        self.sim = MarketSimulator(w3, deployment, trader_key, oracle_key, "calm")
        # Aave accrues interest per second of block time: every block inside a row carries the row's time whatever the
        # wall clock did and however many blocks the row took (its confirmation blocks included), so the same path
        # accrues the same interest every run
        self._rpc("anvil_setBlockTimestampInterval", [BLOCK_INTERVAL_S])
        head = int(self.w3.eth.block_number)
        self.overflows = int(head > ORIGIN_BLOCK)  # a deployment past ORIGIN_BLOCK: blocks may vary between runs
        self._pad(ORIGIN_BLOCK - head)

    def _pad(self, blocks: int) -> None:
        """Mine `blocks` empty blocks (at the row's time: BLOCK_INTERVAL_S = 0)."""
        if blocks > 0:
            self._rpc("anvil_mine", [hex(blocks)])

    def _rpc(self, method: str, params: list[Any]) -> object:
        answer = self.w3.provider.make_request(method, params)  # type: ignore[arg-type]
        if "error" in answer:
            raise ReplayError(f"{method}: {answer['error'].get('message', answer['error'])}")
        return answer.get("result")

    def apply(self, row: PathRow) -> AppliedRow:
        """Seven JSON-RPC calls a row (docs/design/backtest.md#speed): the state read with automine off; the row's
        sends in one batch with its timestamp, mined in one block (a stable's top-up and the liquidator's round get
        their own); the receipts with the reads after; the pad with automine back on; the base fee; its block."""
        sim = self.sim
        state = sim.begin_row(control=[("evm_setAutomine", [False])])
        start, start_ts, sent_before = state["block_number"], state["timestamp"], sim.sent
        ts = max(int(row.timestamp), start_ts + 1)
        try:
            with sim.one_block(with_first=[("evm_setNextBlockTimestamp", [ts])]):
                step = sim.move_to(row.oracle_price, row.pool_price, row.volume_usd, at=ts, state=state)
        except Exception as err:  # a revert or node error names the step
            self._rpc("evm_setAutomine", [True])
            raise ReplayError(f"row {row.tick}: {err}") from err
        pad = sim.sent - sent_before - sim.mined  # to one block per transaction sent: the most the row could take
        self._control([*([("anvil_mine", [hex(pad)])] if pad > 0 else []), ("evm_setAutomine", [True])])
        base_fee_wei = int(row.gas_gwei * 1e9 / EMPTY_BLOCK_BASE_FEE_FACTOR)
        self._rpc("anvil_setNextBlockBaseFeePerGas", [hex(base_fee_wei)])
        self._rpc("evm_mine", [])
        return AppliedRow(row=row, block_timestamp=ts, pool_price=step.pool_price, oracle_price=step.oracle_price,
                          health_factors=step.health_factors, liquidations=tuple(step.liquidations),
                          liquidation_failures=tuple(step.liquidation_failures), start_block=start)

    def _control(self, calls: list[tuple[str, list[Any]]]) -> None:
        """Calls whose order does not matter, in one JSON-RPC batch."""
        answers = self.w3.provider.make_batch_request(calls)  # type: ignore[attr-defined]
        if not isinstance(answers, list) or any("error" in a for a in answers):
            raise ReplayError(f"{', '.join(m for m, _ in calls)} failed: {answers}")

    def snapshot(self, account: str) -> ChainSnapshot:
        return read_snapshot(self.w3, self.deployment, account)
