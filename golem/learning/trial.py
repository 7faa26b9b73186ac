"""A learned rule's trial: the golem's own recent path replayed with and without the rule, and the verdict.

Pure: `path_rows` turns decision records into the backtest's path rows (`start_position`: what the golem held at
the first), `figures_of` reads a run's figures,
`judge` applies the keep/demote rule, `playbook_pair` writes the two PLAYBOOKs the runs start from. Running the
two backtests is a side effect (workers/trial.py, handed to the delta cycle's trial activity). The rule and
why: docs/design/learning.md.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from golem.backtest.models import PathRow
from golem.backtest.report import Figures
from golem.models.config import GolemConfig, LearningSection
from golem.models.record import DecisionCycleRecord

# The dev world's eth_gasPrice is the row's base fee plus Anvil's 1 gwei tip (README "Backtesting"): the base fee a
# row replays is what the golem read less that tip, so the trial golem reads the price the live one did.
WORLD_TIP_GWEI = 1.0
EPS = 1e-9  # figures equal within float noise are equal

Verdict = Literal["kept", "demoted", "no effect", "no trial"]


class TrialFigures(BaseModel):
    """One arm of a trial (the run with the rule, or without it), net of gas."""

    total_return: float | None = None
    max_drawdown: float = 0.0
    sortino_per_tick: float | None = None
    # what the verdict compares (docs/design/judging.md#risk-adjusted-return); absent in trials stored before it
    sortino_loss_aware_per_tick: float | None = None
    min_health_factor: float | None = None  # None: no debt on any row
    liquidations: int = 0
    transactions: int = 0
    gas_usd: float = 0.0
    actions: list[str] = Field(default_factory=list)  # "row:tool" of every executed action (did the rule change any?)


class TrialResult(BaseModel):
    """A heuristic's measured effect at one delta cycle; stored in heuristics.sqlite's `heuristic_trials`."""

    model_config = ConfigDict(populate_by_name=True)

    heuristic_id: str
    text: str
    tick: int  # the delta cycle that ran it
    occasion: Literal["add", "rejudge"]
    rows: int = 0  # path rows replayed (the last `trial_rows` recorded ticks)
    with_rule: TrialFigures | None = None
    without_rule: TrialFigures | None = None
    verdict: Verdict
    reasons: list[str] = Field(default_factory=list)
    wall_seconds: float = 0.0

    def summary(self) -> str:
        """One line for the CLI and the cycle's result: the verdict, then the figures side by side."""
        w, o = self.with_rule, self.without_rule
        if w is None or o is None:
            return f"{self.verdict}: {'; '.join(self.reasons)}"
        return (f"{self.verdict} on {self.rows} rows — with / without: return {_pct(w.total_return)} / "
                f"{_pct(o.total_return)}, max DD {_pct(w.max_drawdown)} / {_pct(o.max_drawdown)}, Sortino "
                f"{_num(w.sortino_per_tick)} / {_num(o.sortino_per_tick)}, min HF {_num(w.min_health_factor)} / "
                f"{_num(o.min_health_factor)}, gas ${w.gas_usd:.2f} / ${o.gas_usd:.2f}, tx {w.transactions} / "
                f"{o.transactions}" + (f" ({'; '.join(self.reasons)})" if self.reasons else ""))


class StartPosition(BaseModel):
    """What the live golem held when the replayed rows start: its Aave loan (WETH supplied, USDC owed) and wallet.
    The trial's world opens it at row 0 instead of the dev world's loan (golem.world.deploy.GolemPosition)."""

    collateral: float = 0.0
    debt: float = 0.0
    balances: dict[str, float] = Field(default_factory=dict)  # symbol → human units


class TrialRunner(Protocol):
    """Runs a trial's two arms on `rows`: the golem as `config`, each arm starting from one of `playbooks` (with the
    rule, without it) and from `position` (None: the dev world's loan); returns their figures over the rows after
    the first `warmup`. Built in workers/ (workers/trial.py) and handed to the trial step."""

    async def run(self, rows: list[PathRow], config: GolemConfig, strategy_text: str, playbooks: tuple[str, str],
                  out: Path, warmup: int = 0,
                  position: StartPosition | None = None) -> tuple[TrialFigures, TrialFigures]: ...


def _pct(x: float | None, places: int = 2) -> str:
    return "n/a" if x is None else f"{x * 100:+.{places}f}%"


def _num(x: float | None, places: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{places}f}"


def _window(records: Iterable[DecisionCycleRecord], last: int) -> list[DecisionCycleRecord]:
    """The records of the last `last` rows, oldest first: reruns of a tick and records whose block time does not
    advance are left out (a path's time strictly increases)."""
    kept: list[DecisionCycleRecord] = []
    for r in sorted((r for r in records if not r.run_label), key=lambda r: r.tick):
        if kept and r.observation.snapshot.block_timestamp <= kept[-1].observation.snapshot.block_timestamp:
            continue
        kept.append(r)
    return kept[-last:] if last > 0 else []


def path_rows(records: Iterable[DecisionCycleRecord], last: int) -> list[PathRow]:
    """The last `last` recorded ticks as path rows (oldest first): the pool and oracle price, the base fee and the
    block time the golem read. A record holds no market volume, so rows carry none (no noise trades)."""
    rows = []
    for i, r in enumerate(_window(records, last)):
        snap = r.observation.snapshot
        rows.append(PathRow(tick=i, timestamp=snap.block_timestamp, pool_price=snap.pool.price,
                            oracle_price=snap.oracle_price, gas_gwei=max(0.0, snap.gas_price_gwei - WORLD_TIP_GWEI),
                            volume_usd=0.0))
    return rows


def start_position(records: Iterable[DecisionCycleRecord], last: int) -> StartPosition | None:
    """What the golem held as the first of `path_rows(records, last)` was read (before that tick acted): its Aave
    lending position and wallet. None without records."""
    window = _window(records, last)
    if not window:
        return None
    snap = window[0].observation.snapshot
    loans = [p for p in snap.positions if p.kind == "lending"]
    return StartPosition(collateral=sum(p.collateral for p in loans), debt=sum(p.debt for p in loans),
                         balances={k.upper(): v for k, v in snap.balances.items()})


def figures_of(figures: Figures, actions: list[str]) -> TrialFigures:
    return TrialFigures(total_return=figures.total_return, max_drawdown=figures.max_drawdown,
                        sortino_per_tick=figures.sortino_per_tick,
                        sortino_loss_aware_per_tick=figures.sortino_loss_aware_per_tick,
                        min_health_factor=figures.min_health_factor,
                        liquidations=figures.liquidations, transactions=figures.transactions,
                        gas_usd=round(figures.gas_usd, 6), actions=actions)


def _sortino(f: TrialFigures, aware: bool = True) -> float:
    """Loss-aware Sortino per tick (the plain ratio ranks a run that loses less with less downside below one that
    loses more: docs/design/judging.md#risk-adjusted-return), the plain one for trials stored before it; the cases
    left undefined ordered: no downside at all ranks by the sign of the return (a run that never lost beats every
    run that did), too few rows is neutral."""
    if aware and f.sortino_loss_aware_per_tick is not None:
        return f.sortino_loss_aware_per_tick
    if f.sortino_per_tick is not None:
        return f.sortino_per_tick
    r = f.total_return or 0.0
    return math.inf if r > EPS else (-math.inf if r < -EPS else 0.0)


def _hf(f: TrialFigures) -> float:
    return math.inf if f.min_health_factor is None else f.min_health_factor  # no debt: nothing to liquidate


def judge(with_rule: TrialFigures, without_rule: TrialFigures, limits: LearningSection,
          floor: float | None = None) -> tuple[Verdict, list[str]]:
    """Keep a rule only if the run with it is better risk-adjusted, net of gas, than the run without it:

    - it changed an action (else `no effect`: nothing measured);
    - kept when no more liquidations, max drawdown not worse (± drawdown_tolerance), min HF not lower
      (± health_factor_tolerance) and loss-aware Sortino per tick better by more than sortino_margin;
    - or kept when it held the position at or above the strategy's MUST health-factor `floor` where the run
      without it fell below, with no more liquidations (keeping the loan alive outranks the gas it cost);
    - demoted otherwise, with every reason that failed."""
    if (with_rule.actions == without_rule.actions and abs((with_rule.total_return or 0.0) -
                                                          (without_rule.total_return or 0.0)) < EPS):
        return "no effect", ["the rule changed no action on these rows"]
    fails: list[str] = []
    if with_rule.liquidations > without_rule.liquidations:
        fails.append(f"liquidated {with_rule.liquidations}× vs {without_rule.liquidations}× without")
    rescued = (floor is not None and _hf(without_rule) < floor - EPS and _hf(with_rule) >= floor - EPS)
    if rescued and not fails:
        return "kept", [f"held min HF {_num(with_rule.min_health_factor)} ≥ the MUST floor {floor:g} where it fell to "
                        f"{_num(without_rule.min_health_factor)} without"]
    if with_rule.max_drawdown > without_rule.max_drawdown + limits.drawdown_tolerance + EPS:
        fails.append(f"max drawdown {_pct(with_rule.max_drawdown, 3)} vs {_pct(without_rule.max_drawdown, 3)} without")
    if _hf(with_rule) < _hf(without_rule) - limits.health_factor_tolerance - EPS:
        fails.append(f"min HF {_num(with_rule.min_health_factor, 4)} vs {_num(without_rule.min_health_factor, 4)} without")
    aware = None not in (with_rule.sortino_loss_aware_per_tick, without_rule.sortino_loss_aware_per_tick)
    if not _sortino(with_rule, aware) > _sortino(without_rule, aware) + limits.sortino_margin + EPS:
        name, w, o = (("loss-aware Sortino", f"{with_rule.sortino_loss_aware_per_tick:.4g}",
                       f"{without_rule.sortino_loss_aware_per_tick:.4g}") if aware else
                      ("Sortino", _num(with_rule.sortino_per_tick, 5), _num(without_rule.sortino_per_tick, 5)))
        fails.append(f"{name} {w} not better than {o}"
                     f" without" + (f" by more than {limits.sortino_margin:g}" if limits.sortino_margin else ""))
    return ("demoted", fails) if fails else ("kept", [])


def playbook_pair(playbook_text: str, heuristic_id: str, line: str) -> tuple[str, str]:
    """(with, without): the golem's PLAYBOOK.md as it stands, with the rule's bullet and without it. Everything
    else in it stays, so the two runs differ by the one rule."""
    lines = [ln for ln in playbook_text.splitlines() if heuristic_id not in ln]
    if not lines or not lines[0].startswith("<!-- golem PLAYBOOK revision:"):
        lines = ["<!-- golem PLAYBOOK revision: 1 -->", "# PLAYBOOK", "", "## Global", "", *lines]
    without = "\n".join(lines).rstrip("\n") + "\n"
    return without + line + "\n", without
