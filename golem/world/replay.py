"""The backtest's world: a replay driver that sets the dev chain to a recorded row before the golem
observes it (ARCHITECTURE "One code path for live and backtest": only the world differs).

Per row, in this order:
  1. the next block's timestamp is the row's time (chain time follows the path, not the wall clock);
  2. the ETH/USD feed answers `oracle_price` (a round is posted when the answer changes or half its heartbeat
     has passed in path time; the stables' feeds post 1.0 on the heartbeat rule); `volume_usd` trades
     round-trip through the WETH/USDC pair; one arbitrage trade through Router02 takes each Uniswap V2 pair
     (WETH/USDC, WETH/DAI) to `pool_price` (feed and pair may diverge: a feed lagging the pair is a scenario);
  3. the simulator's liquidator calls Aave's `liquidationCall` on a watched borrower (the golem) under health
     factor 1.0 at the row's prices, before the golem's tick sees the row (a liquidator backruns the round);
  4. an empty block is mined whose base fee makes the *next* block's base fee `gas_gwei` (EIP-1559: a
     block with no gas used lowers the next base fee by 1/8), so the golem's transaction pays it.

Between rows a `BlockProducer` plays the part of a live chain's block cadence: once a block holding
transactions has stayed the head for a moment it mines one empty block on top, so a golem waiting for
its 2-block confirmation (§S10) gets it at once instead of waiting out the verify timeout.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from web3 import Web3

from golem.backtest.models import PathRow
from golem.chain.contracts import Deployment
from golem.chain.reader import read_snapshot
from golem.models.observation import ChainSnapshot
from golem.world.simulator import MarketSimulator, SimLiquidation

BLOCK_INTERVAL_S = 0  # chain seconds between blocks inside a row: every block of a row carries the row's time
EMPTY_BLOCK_BASE_FEE_FACTOR = 0.875  # EIP-1559: an empty parent lowers the base fee by 1/8
CONFIRM_AFTER_IDLE_S = 1.0  # ours: longer than the gap between one tick's transactions, so they share no
# confirmation block by chance (the run stays repeatable: an empty block between a repay and the swap after it
# lowers the swap's base fee by 1/8), short enough that verify does not wait long. On the real protocols that gap
# is 0.35–0.5 s on a loaded 2-core box (simulating the next action through Aave and Router02), so 0.3 s was not


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


class ReplayDriver:
    """Applies path rows to one deployed dev world. Holds the trader's and the feeds' owner's keys in memory only."""

    def __init__(self, w3: Web3, deployment: Deployment, trader_key: str, oracle_key: str) -> None:
        self.w3 = w3
        self.deployment = deployment
        self.sim = MarketSimulator(w3, deployment, trader_key, oracle_key, "calm")
        # Aave accrues interest per second of block time: every block inside a row carries the row's time whatever the
        # wall clock did and however many blocks the row took (a confirmation block mined a little later under load
        # included), so the same path accrues the same interest every run
        self._rpc("anvil_setBlockTimestampInterval", [BLOCK_INTERVAL_S])

    def _rpc(self, method: str, params: list) -> object:
        answer = self.w3.provider.make_request(method, params)  # type: ignore[arg-type]
        if "error" in answer:
            raise ReplayError(f"{method}: {answer['error'].get('message', answer['error'])}")
        return answer.get("result")

    def apply(self, row: PathRow) -> AppliedRow:
        latest = self.w3.eth.get_block("latest")
        ts = max(int(row.timestamp), int(latest["timestamp"]) + 1)
        self._rpc("evm_setNextBlockTimestamp", [ts])
        try:
            step = self.sim.move_to(row.oracle_price, row.pool_price, row.volume_usd, at=ts)
        except Exception as err:  # a revert or node error names the step
            raise ReplayError(f"row {row.tick}: {err}") from err
        base_fee_wei = int(row.gas_gwei * 1e9 / EMPTY_BLOCK_BASE_FEE_FACTOR)
        self._rpc("anvil_setNextBlockBaseFeePerGas", [hex(base_fee_wei)])
        self._rpc("evm_mine", [])
        return AppliedRow(row=row, block_timestamp=ts, pool_price=step.pool_price, oracle_price=step.oracle_price,
                          health_factors=step.health_factors, liquidations=tuple(step.liquidations),
                          liquidation_failures=tuple(step.liquidation_failures))

    def snapshot(self, account: str) -> ChainSnapshot:
        return read_snapshot(self.w3, self.deployment, account)


class BlockProducer:
    """Mines one empty block on top of a head that holds transactions once it has been idle for a moment."""

    def __init__(self, w3: Web3, idle_s: float = CONFIRM_AFTER_IDLE_S, poll_s: float = 0.05) -> None:
        self.w3 = w3
        self.idle_s = idle_s
        self.poll_s = poll_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.mined = 0

    def _loop(self) -> None:
        seen, since = None, time.monotonic()
        while not self._stop.wait(self.poll_s):
            try:
                head = self.w3.eth.get_block("latest")
                if head["hash"] != seen:
                    seen, since = head["hash"], time.monotonic()
                    continue
                if head["transactions"] and time.monotonic() - since >= self.idle_s:
                    # keep the head's base fee: an empty confirmation block is not a gas-market event
                    self.w3.provider.make_request("anvil_setNextBlockBaseFeePerGas", [hex(int(head["baseFeePerGas"]))])
                    self.w3.provider.make_request("evm_mine", [])
                    self.mined += 1
            except Exception:  # the node going away ends the run elsewhere; the producer just idles
                continue

    def __enter__(self) -> "BlockProducer":
        self._thread = threading.Thread(target=self._loop, name="block-producer", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
