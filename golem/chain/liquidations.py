"""Which liquidations of the golem's position each tick saw (Aave `LiquidationCall` logs), kept on disk.

The observe step scans the Aave Pool's logs from the last scanned block to the block it observes; each new
liquidation is filed under the tick that first saw it. Keyed by (tx hash, log index), so a retried observe
of the same tick finds the same events again (nothing is lost between a scan and the activity's result),
and a later tick never reports them twice.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from web3 import Web3

from golem.chain.contracts import Deployment
from golem.chain.reader import read_liquidations
from golem.models.observation import LiquidationEvent


class LiquidationLog:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._db() as db:
            db.execute("CREATE TABLE IF NOT EXISTS liquidations (tx_hash TEXT, log_index INTEGER, tick INTEGER, "
                       "event TEXT, PRIMARY KEY (tx_hash, log_index))")
            db.execute("CREATE TABLE IF NOT EXISTS cursor (account TEXT PRIMARY KEY, scanned_to INTEGER)")

    def _db(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=30)

    def for_tick(self, w3: Web3, deployment: Deployment, account: str, tick: int, block: int) -> list[LiquidationEvent]:
        """Liquidations of `account` first seen at `tick`, scanning the logs up to `block` (one connection, one
        eth_getLogs over the blocks not scanned yet)."""
        account = Web3.to_checksum_address(account)
        with self._db() as db:
            row = db.execute("SELECT scanned_to FROM cursor WHERE account = ?", (account,)).fetchone()
            start = (row[0] + 1) if row else deployment.deployed_block
            if block >= start:
                found = read_liquidations(w3, deployment, account, start, block)
                db.executemany(
                    "INSERT OR IGNORE INTO liquidations (tx_hash, log_index, tick, event) VALUES (?, ?, ?, ?)",
                    [(e.tx_hash, e.log_index, tick, e.model_dump_json()) for e in found],
                )
                db.execute("INSERT OR REPLACE INTO cursor (account, scanned_to) VALUES (?, ?)", (account, block))
            rows = db.execute("SELECT event FROM liquidations WHERE tick = ?", (tick,)).fetchall()
        return sorted((LiquidationEvent.model_validate_json(r[0]) for r in rows),
                      key=lambda e: (e.block_number, e.log_index))


def force_t2_reason(reorg_forces_t2: bool, reorged: list[int], reorg_at: list[int],
                    liquidations: list[LiquidationEvent]) -> str | None:
    """A reorg or a liquidation of the golem's position forces the tick to T2; None otherwise."""
    reasons = []
    if reorg_forces_t2:
        reasons.append(f"chain reorg re-marked ticks {reorged or reorg_at}")
    for liq in liquidations:
        reasons.append(f"position liquidated in tx {liq.tx_hash}: {liq.debt_covered:,.2f} {liq.debt_asset} repaid by "
                       f"{liq.liquidator}, {liq.collateral_seized:,.4f} {liq.collateral_asset} seized")
    return "; ".join(reasons) or None
