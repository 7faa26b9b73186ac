"""Hindsight settlement on real Temporal + Anvil, through the backtest: an owner's sell into a falling market costs
its fee at the tick (an immediate "negative"), but settled k ticks later it paid; at the delta cycle the settle step
judges it so, the Curator ADDs the learned sell (the owner's rule, fired 10 % earlier, scoped to the regime), it
reaches PLAYBOOK.md and fires on a later row where the owner's rule would not (docs/design/learning.md)."""

from __future__ import annotations

import asyncio
import shutil
import tomllib
from pathlib import Path

import pytest
import tomli_w

from golem.backtest.path import load_path
from golem.grimoire.playbook.heuristics import HeuristicStore
from golem.learning.ledger import LearningLedger
from golem.life.cycle_store import CycleStore
from golem.models.enums import ActionStatus
from infra.backtest import BacktestOptions, _backtest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
T0 = 1_767_225_600  # 2026-01-01T00:00:00Z
SELL = "WHEN price_change_bps <= -100 THEN swap 5% WETH to USDC"
STRATEGY = f"""# Strategy: sell a slice into a fall

## Settings
- collateral: WETH
- debt: USDC

## Rules
- {SELL}

## Constraints
- MUST keep health_factor >= 1.3
- MUST NOT swap more than 30% WETH
- MUST NOT borrow
"""
DELTA = 24  # the delta cycle runs at tick 24
SETTLE = 2


def _csv(path: Path, prices: list[float]) -> Path:
    lines = ["tick,timestamp,pool_price,oracle_price,gas_gwei,volume_usd"]
    # base fee 0 (the world adds a 1 gwei tip): 30 routine sells stay inside the day's gas budget
    lines += [f"{i},{T0 + 60 * i},{p:.4f},{p:.4f},0.0,5000" for i, p in enumerate(prices)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_settled_sells_teach_the_curator_the_sell_and_it_fires_later(tmp_path):
    home = tmp_path / "home"
    shutil.copytree(REPO / "examples" / "golem-home", home)
    (home / "STRATEGY.md").write_text(STRATEGY)
    raw = tomllib.loads((home / "golem.toml").read_text())
    raw.setdefault("clock", {})["delta_theta_ticks"] = DELTA
    # every row decides (no System 1 reuse); the trial (two child backtests per rule) is its own test
    raw.setdefault("gating", {})["mode"] = "always"
    raw.setdefault("learning", {}).update(trial=False, settle_ticks=SETTLE)
    (home / "golem.toml").write_text(tomli_w.dumps(raw))
    # 4 flat rows, 24 rows falling 1.2 % each (the owner's −100 bps sell fires on every one), then rows falling
    # 0.95 %: only a sell that fires earlier than −100 bps acts there
    prices = [2000.0] * 4
    for _ in range(DELTA):
        prices.append(prices[-1] * (1 - 0.012))
    for _ in range(6):
        prices.append(prices[-1] * (1 - 0.0095))
    csv = _csv(tmp_path / "fall.csv", prices)
    [run] = asyncio.run(_backtest(BacktestOptions(path=csv, home=home, out=tmp_path / "out", progress=False),
                                  load_path(csv)))
    data = run.out_dir / "data"
    ledger = LearningLedger(data / "grimoire" / "learning.sqlite")
    sells = [o for o in ledger.outcomes() if o.tick < DELTA and any(r["text"] == SELL for r in o.rules)]
    assert len(sells) >= 5, [(o.tick, o.verdict) for o in ledger.outcomes()]
    # at the tick every sell cost its fee; settled two rows later, into the fall, it paid
    assert all(o.verdict == "negative" and o.pnl < 0 for o in sells), [(o.tick, o.verdict, o.pnl) for o in sells]
    settled = [o for o in sells if o.settled_verdict is not None]
    assert {o.settled_cycle for o in settled} == {DELTA} and all(o.tick + SETTLE <= DELTA for o in settled)
    assert all(o.settled_verdict == "positive" and o.settled_pnl > 0 for o in settled), settled
    assert all(o.settled_tick == o.tick + SETTLE for o in settled)
    cycle = ledger.cycle(DELTA)
    adds = [op for op in cycle["operations"] if op["op"] == "ADD"]
    assert adds, cycle
    (add,) = adds
    assert add["text"].startswith("WHEN price_change_bps <= -90 AND regime == ") and add["text"].endswith(
        "THEN swap 5% WETH to USDC"), add
    store = HeuristicStore(data / "grimoire" / "heuristics.sqlite")
    learned = store.get(add["entry_id"])
    assert learned is not None and learned.status == "active"
    # in PLAYBOOK.md, and on a later row of the −0.95 % fall it sold where the owner's rule did not fire
    assert learned.id in (data / "PLAYBOOK.md").read_text()
    cycles = CycleStore(data)
    later = [cycles.load(r["tick"]) for r in cycles.recent(100) if r["tick"] > DELTA]
    fired = [r for r in later if r.deliberation and any(a.entry_id == learned.id and a.origin == "learned"
                                                         for a in r.deliberation.rules_applied)]
    assert fired, [(r.tick, r.regime.value, r.deliberation.decision if r.deliberation else None) for r in later]
    assert any(a.tool_name == "swap" and a.status is ActionStatus.EXECUTED for r in fired for a in r.actions), [
        (r.tick, [(a.tool_name, a.status.value, a.block_reason) for a in r.actions]) for r in fired]
