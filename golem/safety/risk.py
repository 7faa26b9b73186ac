"""What the risk layer learns from the golem's own outcomes.

`RiskStore` (SQLite, `risk.sqlite`) keeps the net-value marks and one row per verified action outcome; `RiskSnapshot`
is the summary the tool_call check reads (drawdown, Kelly statistics, per-tool failure rates, consecutive losses,
today's gas, the usual gas per action). Time is the tick's, never the machine's: callers pass `now`, so a
backtest's partition and spike baseline follow the path. See docs/design/safety.md#what-the-risk-layer-learns.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from golem.chain.tools.schemas import LP_POSITION_KIND, STABLE_TOKENS
from golem.models.observation import ChainSnapshot
from golem.models.tick import GasLedger
from golem.safety.gas import DAY_S, utc_day_bounds, utc_day_of
from golem.storage import immediate_tx, init_db

_SCHEMA = """
CREATE TABLE IF NOT EXISTS nav_marks (
    golem_id TEXT NOT NULL, tick INTEGER NOT NULL, at REAL NOT NULL, nav_usd REAL NOT NULL,
    PRIMARY KEY (golem_id, tick)
);
CREATE TABLE IF NOT EXISTS outcomes (
    golem_id TEXT NOT NULL, tick INTEGER NOT NULL, action_index INTEGER NOT NULL,
    tool TEXT NOT NULL, opens_exposure INTEGER NOT NULL, verified INTEGER NOT NULL,
    value_usd REAL NOT NULL, pnl_usd REAL NOT NULL, gas_usd REAL NOT NULL, at REAL NOT NULL,
    PRIMARY KEY (golem_id, tick, action_index)
);
"""


class ToolStats(BaseModel):
    n: int = 0
    failures: int = 0

    @property
    def failure_rate(self) -> float:
        return self.failures / self.n if self.n else 0.0


class RiskSnapshot(BaseModel):
    nav_usd: float = 0.0
    high_water_usd: float = 0.0
    bets: int = 0  # exposure-increasing outcomes with a value
    win_rate: float | None = None
    payoff_ratio: float | None = None  # mean win return / mean loss return
    consecutive_losses: int = 0
    tools: dict[str, ToolStats] = Field(default_factory=dict)
    gas_day: str = ""  # the UTC day of the tick's clock: the gas partition's day (golem.safety.gas)
    gas_spent_today_usd: float = 0.0
    # The gas gate's spike baseline: mean gas per action over the 24 h before the tick (≥ 3 actions). A trailing
    # window, not the partition's day, so the baseline does not vanish at midnight (ours).
    typical_action_gas_usd: float | None = None

    @property
    def drawdown_pct(self) -> float:
        if self.high_water_usd <= 0:
            return 0.0
        return max(0.0, (self.high_water_usd - self.nav_usd) / self.high_water_usd * 100.0)


def net_value_usd(snap: ChainSnapshot) -> float:
    """Wallet tokens + collateral − debt + the pool claim at the oracle price (pool price if the oracle reads 0); native ETH is
    the gas float and is left out."""
    eth = snap.oracle_price if snap.oracle_price > 0 else snap.pool.price
    wallet = sum(v * (1.0 if s in STABLE_TOKENS else eth) for s, v in snap.balances.items())
    lend = [p for p in snap.positions if p.kind == "lending"]
    # the pool position's claim: WETH side (collateral) at the oracle, USDC side = WETH side × pool price
    lp = sum(p.collateral for p in snap.positions if p.kind == LP_POSITION_KIND) * (eth + snap.pool.price)
    return wallet + sum(p.collateral for p in lend) * eth - sum(p.debt for p in lend) + lp


def kelly_fraction(win_rate: float, payoff_ratio: float) -> float:
    """f* = p − (1 − p) / b (Kelly 1956); ≤ 0 means no edge."""
    if payoff_ratio <= 0:
        return -1.0
    return win_rate - (1.0 - win_rate) / payoff_ratio


class RiskStore:
    def __init__(self, path: str | Path, *, clock: Callable[[], float] = time.time) -> None:
        self.path = init_db(Path(path), _SCHEMA)
        self._clock = clock

    def _now(self, now: float | None) -> float:
        return self._clock() if now is None else now

    def mark_nav(self, golem_id: str, tick: int, nav_usd: float, *, now: float | None = None) -> None:
        with immediate_tx(self.path) as db:
            db.execute("INSERT OR REPLACE INTO nav_marks VALUES (?, ?, ?, ?)",
                       (golem_id, tick, self._now(now), nav_usd))

    def record_outcome(
        self, golem_id: str, tick: int, action_index: int, tool: str, *, opens_exposure: bool, verified: bool,
        value_usd: float, pnl_usd: float, gas_usd: float, now: float | None = None,
    ) -> None:
        """Keyed by (golem, tick, action): a retried verify overwrites instead of double-counting."""
        with immediate_tx(self.path) as db:
            db.execute(
                "INSERT OR REPLACE INTO outcomes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (golem_id, tick, action_index, tool, int(opens_exposure), int(verified), value_usd, pnl_usd, gas_usd,
                 self._now(now)),
            )  # fmt: skip

    def gas_spent_on_day(self, golem_id: str, now: float | None = None) -> tuple[str, float, int]:
        """(UTC day, gas USD, actions) of the partition's day holding `now`."""
        now = self._now(now)
        start, end = utc_day_bounds(now)
        with immediate_tx(self.path) as db:
            gas, n = db.execute(
                "SELECT SUM(gas_usd), COUNT(*) FROM outcomes WHERE golem_id = ? AND at >= ? AND at < ?",
                (golem_id, start, end),
            ).fetchone()
        return utc_day_of(now), gas or 0.0, n or 0

    def gas_ledger(self, golem_id: str, now: float | None = None) -> GasLedger:
        """The partition's day holding `now`, its gas USD and all the golem's gas USD, in one read."""
        now = self._now(now)
        start, end = utc_day_bounds(now)
        with immediate_tx(self.path) as db:
            today, total = db.execute(
                "SELECT SUM(CASE WHEN at >= ? AND at < ? THEN gas_usd END), SUM(gas_usd) FROM outcomes "
                "WHERE golem_id = ?", (start, end, golem_id),
            ).fetchone()
        return GasLedger(day=utc_day_of(now), today_usd=today or 0.0, total_usd=total or 0.0)

    def snapshot(self, golem_id: str, nav_usd: float, *, window: int = 50, now: float | None = None) -> RiskSnapshot:
        now = self._now(now)
        day, gas_today, _ = self.gas_spent_on_day(golem_id, now)
        with immediate_tx(self.path) as db:
            hwm = db.execute("SELECT MAX(nav_usd) FROM nav_marks WHERE golem_id = ?", (golem_id,)).fetchone()[0]
            rows = db.execute(
                "SELECT tool, opens_exposure, verified, value_usd, pnl_usd, gas_usd, at FROM outcomes "
                "WHERE golem_id = ? ORDER BY tick DESC, action_index DESC LIMIT ?",
                (golem_id, window),
            ).fetchall()
            gas = db.execute(
                "SELECT SUM(gas_usd), COUNT(*) FROM outcomes WHERE golem_id = ? AND at > ? AND at <= ?",
                (golem_id, now - DAY_S, now),
            ).fetchone()
        snap = summarize(rows, nav_usd, max(hwm or 0.0, nav_usd), gas[0] or 0.0, gas[1] or 0)
        return snap.model_copy(update={"gas_day": day, "gas_spent_today_usd": gas_today})


def summarize(rows: list[tuple[Any, ...]], nav: float, hwm: float, gas_24h: float, actions_24h: int) -> RiskSnapshot:
    """Rows newest first: (tool, opens_exposure, verified, value_usd, pnl_usd, gas_usd, at). The gas of the
    trailing 24 h gives the spike baseline; the partition's day is filled in by the store."""
    tools: dict[str, ToolStats] = {}
    wins: list[float] = []
    losses: list[float] = []
    streak, streak_open = 0, True
    for tool, opens, verified, value, pnl, _gas, _at in rows:
        st = tools.setdefault(tool, ToolStats())
        st.n += 1
        st.failures += 0 if verified else 1
        lost = (not verified) or pnl < 0
        if streak_open:
            if lost and opens:
                streak += 1
            elif opens:
                streak_open = False
        if opens and value > 0 and verified:
            r = pnl / value
            (wins if r > 0 else losses).append(r)
    bets = len(wins) + len(losses)
    win_rate = len(wins) / bets if bets else None
    payoff = None
    if wins and losses:
        payoff = (sum(wins) / len(wins)) / abs(sum(losses) / len(losses))
    elif wins:
        payoff = float("inf")
    elif losses:
        payoff = 0.0
    return RiskSnapshot(
        nav_usd=nav, high_water_usd=hwm, bets=bets, win_rate=win_rate, payoff_ratio=payoff,
        consecutive_losses=streak, tools=tools,
        typical_action_gas_usd=(gas_24h / actions_24h) if actions_24h >= 3 else None,
    )  # fmt: skip
