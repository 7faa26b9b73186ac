"""The backtest report: figures computed from the per-row marks, rendered as JSON, markdown and a PNG.

Pure apart from write_report (files) and the PNG (matplotlib, imported only there). Regime breakdowns give the
metric per regime with Cohen's d and bootstrap 95 % CIs (docs/design/backtest.md#regime-tagged-evaluation).
"""

from __future__ import annotations

import json
import math
import random
import statistics
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, Field

from golem.backtest.models import TickMark, RunInfo
from golem.safety.attribution import Attribution, Holdings, Interval, Source, attribute

# Path labels → the detector's regimes that count as right (golem/cognition/regime.py outputs trending_up,
# trending_down, range_bound, volatile, unknown; "unknown" is always a miss).
REGIME_MATCH: dict[str, set[str]] = {
    "calm": {"range_bound"},
    "trending_up": {"trending_up"},
    "trending_down": {"trending_down"},
    "volatile": {"volatile"},
    "crash": {"trending_down", "volatile"},
}
DETECTED = ("range_bound", "trending_up", "trending_down", "volatile", "unknown")
WARMUP_TICKS = 20  # the regime detector's 20-period SMA needs 20 prices
COHEN_D_VALIDATED = 0.2  # d > 0.2 with a CI excluding zero is a real difference
BOOTSTRAP_SAMPLES = 1000  # ours: enough for a stable 95% interval, fast on a few hundred rows
BOOTSTRAP_SEED = 6  # fixed: the same marks give the same report


class EffectSize(BaseModel):
    a: str
    b: str
    d: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    n_a: int = 0
    n_b: int = 0
    validated: bool = False  # |d| > 0.2 and the 95% CI excludes zero (Revision 6)


class Figures(BaseModel):
    """The headline figures, for the whole path or one regime's rows."""

    rows: int = 0
    ticks: int = 0
    start_equity_usd: float | None = None
    end_equity_usd: float | None = None
    total_return: float | None = None
    max_drawdown: float = 0.0  # fraction of the running peak
    sharpe_per_tick: float | None = None
    sortino_per_tick: float | None = None
    # ranks runs that lose money the right way round (docs/design/judging.md#risk-adjusted-return)
    sortino_loss_aware_per_tick: float | None = None
    min_health_factor: float | None = None
    # Liquidations are real: the Aave Pool's LiquidationCall events against the golem's account, made by the
    # world's liquidator when the health factor fell under 1.0 at a row's prices.
    liquidations: int = 0
    liquidated_debt_usd: float = 0.0  # debt the liquidator repaid
    liquidation_penalty_usd: float = 0.0  # collateral seized beyond that debt: the bonus the golem paid
    # The figure reports counted before the real liquidator existed: how often the position crossed under HF 1.0 at a row's prices
    # (before the liquidator acted). A crossing the liquidator could not act on (or did) counts here too.
    hf_crossings: int = 0
    rows_liquidatable: int = 0  # rows where HF < 1.0 still held after the row (the liquidator left it unhealthy)
    transactions: int = 0  # executed actions
    gas_usd: float = 0.0
    inference_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    tier_mix: dict[str, float] = Field(default_factory=dict)  # share of ticks per tier
    tier_counts: dict[str, int] = Field(default_factory=dict)
    blocked: dict[str, int] = Field(default_factory=dict)  # gate / budget / policy / other
    protective_blocked: int = 0
    clipped: int = 0  # actions the cage sized down to fit a limit and sent (golem.safety.sizing)
    deferred: int = 0  # actions the gas gate or a threat hold deferred (they wait in GolemState; a later tick may send them)
    threats: dict[str, int] = Field(default_factory=dict)  # detector → actions it fired on (golem.safety.threats)
    max_gas_per_action_usd: float = 0.0  # the most one executed action paid for gas
    urgent_actions: int = 0  # executed actions the gas gate classed urgent or critical
    hf_restored: float = 0.0  # health factor restored by the ticks that raised it (sum of after − before)
    gas_restoring_usd: float = 0.0  # gas paid on those ticks
    gas_per_hf_restored: float | None = None  # $ of gas per 1.0 of health factor restored


class RegimeDetection(BaseModel):
    accuracy: float | None = None  # after the warm-up
    accuracy_all: float | None = None  # every tick, warm-up included
    warmup_ticks: int = WARMUP_TICKS
    scored_ticks: int = 0
    confusion: dict[str, dict[str, int]] = Field(default_factory=dict)  # label → detected → ticks


class Escalation(BaseModel):
    row: int  # where the label changed
    regime_from: str | None
    regime_to: str
    ticks_to_escalate: int | None  # ticks until the first T1/T2 tick; None: none before the next change


class BacktestReport(BaseModel):
    info: RunInfo
    figures: Figures
    t2_share_calm: float | None = None  # share of ticks on calm-labelled rows that went to T2
    escalations: list[Escalation] = Field(default_factory=list)
    blocked_reasons: list[tuple[str, int]] = Field(default_factory=list)  # top reasons, counted
    regime_detection: RegimeDetection | None = None
    regime_source: str = "label"  # label (the path's regime column) or detected (the golem's)
    by_regime: dict[str, Figures] = Field(default_factory=dict)
    effect_sizes: list[EffectSize] = Field(default_factory=list)  # per-row returns, regime against regime
    tick_wall_ms_p50: float | None = None  # timings: differ between runs of the same path
    tick_wall_ms_p90: float | None = None
    # the path's return net of gas split into market beta, strategy / knowledge alpha and noise
    # (golem.safety.attribution); None for marks written before the holdings were marked
    attribution: Attribution | None = None


# ---- figures ---------------------------------------------------------------------------------
def _returns(marks: list[TickMark]) -> list[float]:
    """Per-row equity returns; row i's return is its equity against row i−1's."""
    out = []
    for a, b in zip(marks, marks[1:]):
        out.append((b.equity_usd - a.equity_usd) / a.equity_usd if a.equity_usd else 0.0)
    return out


def _row_returns(marks: list[TickMark]) -> dict[int, float]:
    return {b.row: r for b, r in zip(marks[1:], _returns(marks))}


def max_drawdown(equity: list[float]) -> float:
    peak, worst = -math.inf, 0.0
    for e in equity:
        peak = max(peak, e)
        if peak > 0:
            worst = max(worst, (peak - e) / peak)
    return worst


def sharpe(rets: list[float]) -> float | None:
    if len(rets) < 2:
        return None
    sd = statistics.pstdev(rets)
    return statistics.fmean(rets) / sd if sd > 0 else None


def sortino(rets: list[float]) -> float | None:
    if len(rets) < 2:
        return None
    downside = math.sqrt(statistics.fmean([min(r, 0.0) ** 2 for r in rets]))
    return statistics.fmean(rets) / downside if downside > 0 else None


def sortino_loss_aware(rets: list[float]) -> float | None:
    """Sortino with Israelsen's refinement: with a negative mean the mean is multiplied by the downside deviation
    instead of divided, so a run that loses less with less downside ranks above one that loses more with more
    (the plain ratio ranks it below). docs/design/judging.md#risk-adjusted-return"""
    if len(rets) < 2:
        return None
    downside = math.sqrt(statistics.fmean([min(r, 0.0) ** 2 for r in rets]))
    if downside <= 0:
        return None
    mean = statistics.fmean(rets)
    return mean / downside if mean >= 0 else mean * downside


def _figures(marks: list[TickMark], rets: list[float], contiguous: bool = True) -> Figures:
    """Figures of a run of rows. A regime's rows are not contiguous: its return and drawdown compound that
    regime's own per-row returns (equity moves between its rows belong to other regimes)."""
    f = Figures(rows=len(marks))
    if not marks:
        return f
    ticks = [m for m in marks if m.tick is not None]
    f.ticks = len(ticks)
    if contiguous:
        f.start_equity_usd, f.end_equity_usd = marks[0].equity_usd, marks[-1].equity_usd
        f.total_return = (marks[-1].equity_usd / marks[0].equity_usd - 1.0) if marks[0].equity_usd else None
        f.max_drawdown = max_drawdown([m.equity_usd for m in marks])
    else:
        path = [1.0]
        for r in rets:
            path.append(path[-1] * (1.0 + r))
        f.total_return = path[-1] - 1.0
        f.max_drawdown = max_drawdown(path)
    f.sharpe_per_tick, f.sortino_per_tick = sharpe(rets), sortino(rets)
    f.sortino_loss_aware_per_tick = sortino_loss_aware(rets)
    # the lowest the position went: after a row, or at a row's prices before the liquidator (and the golem) acted
    hfs = [h for m in marks for h in (m.health_factor, m.row_health_factor) if h is not None]
    f.min_health_factor = min(hfs) if hfs else None
    was = False
    for m in marks:
        if m.underwater and not was:
            f.hf_crossings += 1
        was = m.underwater
    liqs = [liq for m in marks for liq in m.liquidations]
    f.liquidations = len(liqs)
    f.liquidated_debt_usd = sum(liq.debt_covered_usd for liq in liqs)
    f.liquidation_penalty_usd = sum(liq.penalty_usd for liq in liqs)
    f.rows_liquidatable = sum(m.liquidatable for m in marks)
    f.transactions = sum(1 for m in marks for a in m.actions if a.status == "executed")
    f.gas_usd = sum(m.gas_usd for m in marks)
    f.inference_usd = sum(m.inference_usd for m in marks)
    f.input_tokens = sum(m.input_tokens for m in marks)
    f.output_tokens = sum(m.output_tokens for m in marks)
    counts = Counter(m.tier for m in ticks if m.tier)
    f.tier_counts = {t: counts.get(t, 0) for t in ("T0", "T1", "T2")}
    f.tier_mix = {t: (counts.get(t, 0) / len(ticks) if ticks else 0.0) for t in ("T0", "T1", "T2")}
    blocked = Counter(b.category for m in marks for b in m.blocked)
    f.blocked = dict(sorted(blocked.items()))
    f.protective_blocked = sum(1 for m in marks for a in m.actions
                               if a.protective and a.status in ("blocked", "deferred"))
    executed = [a for m in marks for a in m.actions if a.status == "executed"]
    f.clipped = sum(1 for a in executed if a.clipped)
    f.deferred = sum(1 for m in marks for a in m.actions if a.status == "deferred")
    f.threats = dict(sorted(Counter(d for m in marks for a in m.actions for d in a.threats).items()))
    f.max_gas_per_action_usd = max((a.gas_usd for a in executed), default=0.0)
    f.urgent_actions = sum(1 for a in executed if a.urgency in ("urgent", "critical"))
    restoring = [m for m in marks if m.hf_restored]
    f.hf_restored = sum(m.hf_restored or 0.0 for m in restoring)
    f.gas_restoring_usd = sum(m.gas_usd for m in restoring)
    f.gas_per_hf_restored = f.gas_restoring_usd / f.hf_restored if f.hf_restored > 0 else None
    return f


# ---- regime-tagged evaluation ------------------------------------------------------------------
def cohens_d(a: list[float], b: list[float]) -> float | None:
    """(mean a − mean b) / pooled standard deviation; None when either side has < 2 values or no spread."""
    if len(a) < 2 or len(b) < 2:
        return None
    va, vb = statistics.variance(a), statistics.variance(b)
    pooled = math.sqrt(((len(a) - 1) * va + (len(b) - 1) * vb) / (len(a) + len(b) - 2))
    return (statistics.fmean(a) - statistics.fmean(b)) / pooled if pooled > 0 else None


def effect_size(name_a: str, a: list[float], name_b: str, b: list[float], seed: int = BOOTSTRAP_SEED) -> EffectSize:
    d = cohens_d(a, b)
    out = EffectSize(a=name_a, b=name_b, d=d, n_a=len(a), n_b=len(b))
    if d is None:
        return out
    rng = random.Random(seed)
    boots = []
    for _ in range(BOOTSTRAP_SAMPLES):
        x = cohens_d([rng.choice(a) for _ in a], [rng.choice(b) for _ in b])
        if x is not None:
            boots.append(x)
    if len(boots) >= BOOTSTRAP_SAMPLES // 2:
        boots.sort()
        out.ci_low = boots[int(0.025 * len(boots))]
        out.ci_high = boots[min(len(boots) - 1, int(0.975 * len(boots)))]
        out.validated = abs(d) > COHEN_D_VALIDATED and (out.ci_low > 0 or out.ci_high < 0)
    return out


def regime_detection(marks: list[TickMark], warmup: int = WARMUP_TICKS) -> RegimeDetection | None:
    ticks = [(m, m.label_regime) for m in marks if m.tick is not None and m.label_regime]
    if not ticks:
        return None
    confusion: dict[str, dict[str, int]] = {}
    hits = []
    for m, label in ticks:
        det = m.detected_regime or "unknown"
        confusion.setdefault(label, {d: 0 for d in DETECTED})
        confusion[label][det] = confusion[label].get(det, 0) + 1
        hits.append(det in REGIME_MATCH.get(label, set()))
    scored = hits[warmup:]
    return RegimeDetection(
        accuracy=sum(scored) / len(scored) if scored else None, accuracy_all=sum(hits) / len(hits),
        warmup_ticks=warmup, scored_ticks=len(scored), confusion=confusion,
    )


def escalations(marks: list[TickMark]) -> list[Escalation]:
    """After each change of the path's label: ticks until the golem's first T1/T2 tick (before the next change)."""
    out: list[Escalation] = []
    changes = [(i, label) for i in range(1, len(marks))
               if (label := marks[i].label_regime) and label != marks[i - 1].label_regime]
    for k, (i, label) in enumerate(changes):
        end = changes[k + 1][0] if k + 1 < len(changes) else len(marks)
        n, found = 0, None
        for m in marks[i:end]:
            if m.tick is None:
                continue
            if m.tier in ("T1", "T2"):
                found = n
                break
            n += 1
        out.append(Escalation(row=marks[i].row, regime_from=marks[i - 1].label_regime, regime_to=label,
                              ticks_to_escalate=found))
    return out


def _percentile(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, math.ceil(q * len(xs)) - 1))]


def path_attribution(marks: list[TickMark]) -> Attribution | None:
    """The whole path as one window: each mark is read after its row's tick acted, so the change into a row's
    holdings belongs to that row's actions and gas."""
    if len(marks) < 2 or any(m.exposure is None or m.stable_usd is None for m in marks):
        return None
    states = [Holdings(exposure=m.exposure or 0.0, stable_usd=m.stable_usd or 0.0, price=m.oracle_price or m.pool_price)
              for m in marks]
    intervals = []
    for m in marks[1:]:
        sent = [a for a in m.actions if a.status in ("executed", "failed")]
        source: Source | None = None if not sent else "knowledge" if any(a.learned for a in sent) else "strategy"
        intervals.append(Interval(source=source, gas_usd=m.gas_usd))
    return attribute(states, intervals)


def build_report(info: RunInfo, marks: list[TickMark]) -> BacktestReport:
    rets = _returns(marks)
    by_row = _row_returns(marks)
    labelled = any(m.label_regime for m in marks)

    def key(m: TickMark) -> str | None:
        return m.label_regime if labelled else m.detected_regime

    groups: dict[str, list[TickMark]] = {}
    for m in marks:
        if regime := key(m):
            groups.setdefault(regime, []).append(m)
    by_regime = {g: _figures(ms, [by_row[m.row] for m in ms if m.row in by_row], contiguous=False)
                 for g, ms in sorted(groups.items())}
    names = sorted(groups)
    effects = [
        effect_size(a, [by_row[m.row] for m in groups[a] if m.row in by_row],
                    b, [by_row[m.row] for m in groups[b] if m.row in by_row])
        for i, a in enumerate(names) for b in names[i + 1:]
    ]
    calm = [m for m in marks if m.label_regime == "calm" and m.tick is not None]
    reasons = Counter(b.reason for m in marks for b in m.blocked)
    walls = [m.wall_ms for m in marks if m.wall_ms is not None]
    return BacktestReport(
        info=info, figures=_figures(marks, rets),
        t2_share_calm=(sum(m.tier == "T2" for m in calm) / len(calm)) if calm else None,
        escalations=escalations(marks) if labelled else [],
        blocked_reasons=reasons.most_common(10),
        regime_detection=regime_detection(marks) if labelled else None,
        regime_source="label" if labelled else "detected",
        by_regime=by_regime, effect_sizes=effects,
        tick_wall_ms_p50=_percentile(walls, 0.5), tick_wall_ms_p90=_percentile(walls, 0.9),
        attribution=path_attribution(marks),
    )


# ---- rendering -------------------------------------------------------------------------------------
def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x * 100:+.2f}%"


def _num(x: float | None, fmt: str = "{:.3f}") -> str:
    return "—" if x is None else fmt.format(x)


def _mix(f: Figures) -> str:
    return " / ".join(f"{f.tier_mix.get(t, 0) * 100:.0f}" for t in ("T0", "T1", "T2"))


HEADLINE: list[tuple[str, Callable[[Figures], str]]] = [
    ("return", lambda f: _pct(f.total_return)),
    ("max drawdown", lambda f: f"{f.max_drawdown * 100:.2f}%"),
    ("Sharpe / tick", lambda f: _num(f.sharpe_per_tick)),
    ("Sortino / tick", lambda f: _num(f.sortino_per_tick)),
    ("Sortino / tick, loss-aware", lambda f: _num(f.sortino_loss_aware_per_tick, "{:.4g}")),
    ("min HF", lambda f: _num(f.min_health_factor)),
    ("liquidations (LiquidationCall events)", lambda f: str(f.liquidations)),
    ("liquidated debt $ / bonus paid $", lambda f: f"{f.liquidated_debt_usd:.2f} / {f.liquidation_penalty_usd:.2f}"),
    ("HF < 1 crossings at row prices", lambda f: str(f.hf_crossings)),
    ("transactions", lambda f: str(f.transactions)),
    ("gas $", lambda f: f"{f.gas_usd:.2f}"),
    ("inference $", lambda f: f"{f.inference_usd:.4f}"),
    ("tier mix T0/T1/T2 %", _mix),
    ("blocked (gate/budget/policy)", lambda f: "/".join(str(f.blocked.get(c, 0)) for c in ("gate", "budget", "policy"))),
    ("protective blocked", lambda f: str(f.protective_blocked)),
    ("clipped (sent at the size the cage allowed)", lambda f: str(f.clipped)),
    ("deferred (the gas gate, a threat hold)", lambda f: str(f.deferred)),
    ("threat detectors fired (actions)", lambda f: ", ".join(f"{d} {n}" for d, n in f.threats.items()) or "none"),
    ("max gas per action $", lambda f: f"{f.max_gas_per_action_usd:.2f}"),
    ("urgent / critical actions sent", lambda f: str(f.urgent_actions)),
    ("gas $ per 1.0 HF restored", lambda f: _num(f.gas_per_hf_restored, "{:.2f}") + f" ({f.hf_restored:.3f} HF restored)"),
]


def render_table(report: BacktestReport) -> str:
    f = report.figures
    lines = [f"## {report.info.name}: {Path(report.info.path).name}, {f.rows} rows, {f.ticks} ticks",
             "", "| figure | value |", "|---|---|"]
    lines += [f"| {name} | {fn(f)} |" for name, fn in HEADLINE]
    lines.append(f"| T2 share on calm rows | {_num(report.t2_share_calm, '{:.1%}')} |")
    lines.append(f"| tokens in/out | {f.input_tokens}/{f.output_tokens} |")
    lines.append(f"| wall per tick p50/p90 ms | {_num(report.tick_wall_ms_p50, '{:.0f}')}/"
                 f"{_num(report.tick_wall_ms_p90, '{:.0f}')} |")
    g = report.info.gas_limits
    if g:
        lines.append(f"| gas partition / slice / ceilings | ${g.get('budget_usd', 0):.2f}/day, ${g.get('slice_usd', 0):.2f} "
                     f"ring-fenced; urgent ≤ ${g.get('per_action_usd', 0):.2f} and {g.get('share_of_protected', 0):.1%} "
                     f"of value protected per action, critical ≤ ${g.get('per_day_usd', 0):.2f}/day |")
    a = report.attribution
    if a is not None:
        lines.append(f"| return attribution $ (market / strategy / knowledge / noise = total) | {a.market_beta:+.2f} / "
                     f"{a.strategy_alpha:+.2f} / {a.knowledge_alpha:+.2f} / {a.noise:+.2f} = {a.total:+.2f}"
                     + (f"; dominant loss: {a.dominant.replace('_', ' ')} → {a.responsible_loop}" if a.dominant else "")
                     + " |")
    rd = report.regime_detection
    if rd is not None:
        lines.append(f"| regime accuracy (after {rd.warmup_ticks}-tick warm-up / all) | "
                     f"{_num(rd.accuracy, '{:.1%}')} / {_num(rd.accuracy_all, '{:.1%}')} |")
    if report.by_regime:
        lines += ["", f"By regime ({report.regime_source}):", "",
                  "| regime | rows | return | max DD | min HF | T0/T1/T2 % | tx | gas $ | blocked |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for regime, rf in report.by_regime.items():
            lines.append(f"| {regime} | {rf.rows} | {_pct(rf.total_return)} | {rf.max_drawdown * 100:.2f}% | "
                         f"{_num(rf.min_health_factor)} | {_mix(rf)} | {rf.transactions} | {rf.gas_usd:.2f} | "
                         f"{sum(rf.blocked.values())} |")
    if report.escalations:
        lat = ", ".join(f"row {e.row} {e.regime_from}→{e.regime_to}: "
                        f"{'never' if e.ticks_to_escalate is None else e.ticks_to_escalate}" for e in report.escalations)
        lines += ["", f"Escalation latency (ticks to the first T1/T2 after a regime change): {lat}"]
    return "\n".join(lines)


def _markdown(report: BacktestReport) -> str:
    out = [render_table(report)]
    rd = report.regime_detection
    if rd is not None:
        out += ["", "Regime detection (rows: the path's label; columns: what the golem detected):", "",
                "| label | " + " | ".join(DETECTED) + " |", "|---" * (len(DETECTED) + 1) + "|"]
        out += [f"| {lab} | " + " | ".join(str(row.get(d, 0)) for d in DETECTED) + " |"
                for lab, row in sorted(rd.confusion.items())]
    if report.effect_sizes:
        out += ["", "Per-row returns, regime against regime (Cohen's d, bootstrap 95% CI; Revision 6):", "",
                "| a | b | d | 95% CI | validated |", "|---|---|---|---|---|"]
        out += [f"| {e.a} | {e.b} | {_num(e.d, '{:+.2f}')} | {_num(e.ci_low, '{:+.2f}')} … {_num(e.ci_high, '{:+.2f}')} "
                f"| {'yes' if e.validated else 'no'} |" for e in report.effect_sizes]
    if report.blocked_reasons:
        out += ["", "Blocked or deferred actions, by reason:", ""]
        out += [f"- {n}× {reason}" for reason, n in report.blocked_reasons]
    out += ["", "![report](report.png)"]
    return "\n".join(out)


# ---- comparison ---------------------------------------------------------------------------------------
class ComparisonTable(BaseModel):
    base: str
    runs: list[str]
    rows: list[tuple[str, list[str]]]  # figure → a cell per run (with the delta against the base)
    effect_sizes: list[EffectSize] = Field(default_factory=list)  # the base's per-row returns against each run's


def compare_reports(reports: list[BacktestReport], base: str | None = None,
                    marks: dict[str, list[TickMark]] | None = None) -> ComparisonTable:
    base = base or ("golem" if any(r.info.name == "golem" for r in reports) else reports[-1].info.name)
    b = next(r for r in reports if r.info.name == base)
    numeric: dict[str, Callable[[BacktestReport], float | None]] = {
        "return %": lambda r: (r.figures.total_return or 0.0) * 100,
        "max drawdown %": lambda r: r.figures.max_drawdown * 100,
        "Sharpe / tick": lambda r: r.figures.sharpe_per_tick,
        "min HF": lambda r: r.figures.min_health_factor,
        "liquidations": lambda r: r.figures.liquidations,
        "liquidation bonus paid $": lambda r: r.figures.liquidation_penalty_usd,
        "HF < 1 crossings": lambda r: r.figures.hf_crossings,
        "transactions": lambda r: r.figures.transactions,
        "gas $": lambda r: r.figures.gas_usd,
        "inference $": lambda r: r.figures.inference_usd,
        "T0 %": lambda r: r.figures.tier_mix.get("T0", 0) * 100 if r.figures.ticks else None,
        "T2 %": lambda r: r.figures.tier_mix.get("T2", 0) * 100 if r.figures.ticks else None,
        "blocked": lambda r: sum(r.figures.blocked.values()),
        "protective blocked": lambda r: r.figures.protective_blocked,
        "clipped": lambda r: r.figures.clipped,
        "deferred": lambda r: r.figures.deferred,
        "max gas per action $": lambda r: r.figures.max_gas_per_action_usd,
        "gas $ per HF restored": lambda r: r.figures.gas_per_hf_restored,
    }
    rows = []
    for name, fn in numeric.items():
        cells = []
        for r in reports:
            v, bv = fn(r), fn(b)
            if v is None:
                cells.append("—")
            elif r is b or bv is None:
                cells.append(f"{v:.3f}" if isinstance(v, float) else str(v))
            else:
                cells.append((f"{v:.3f}" if isinstance(v, float) else str(v)) + f" ({v - bv:+.3g})")
        rows.append((name, cells))
    effects = []
    if marks and base in marks:
        br = _row_returns(marks[base])
        for r in reports:
            if r.info.name == base or r.info.name not in marks:
                continue
            other = _row_returns(marks[r.info.name])
            common = sorted(set(br) & set(other))
            effects.append(effect_size(base, [br[i] for i in common], r.info.name, [other[i] for i in common]))
    return ComparisonTable(base=base, runs=[r.info.name for r in reports], rows=rows, effect_sizes=effects)


def render_comparison(table: ComparisonTable) -> str:
    lines = ["| figure | " + " | ".join(table.runs) + " |", "|---" * (len(table.runs) + 1) + "|"]
    lines += [f"| {name} | " + " | ".join(cells) + " |" for name, cells in table.rows]
    lines.append(f"\n(deltas in brackets against {table.base})")
    for e in table.effect_sizes:
        lines.append(f"per-row returns {e.a} vs {e.b}: Cohen's d {_num(e.d, '{:+.3f}')} "
                     f"[{_num(e.ci_low, '{:+.3f}')}, {_num(e.ci_high, '{:+.3f}')}]"
                     f"{' (validated)' if e.validated else ''}")
    return "\n".join(lines)


# ---- files --------------------------------------------------------------------------------------------
def write_report(report: BacktestReport, marks: list[TickMark], out_dir: Path) -> dict[str, Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / "report.json", "md": out_dir / "report.md", "png": out_dir / "report.png"}
    paths["json"].write_text(json.dumps({"report": report.model_dump(mode="json"),
                                         "marks": [m.model_dump(mode="json") for m in marks]}, indent=1))
    paths["md"].write_text(_markdown(report) + "\n")
    render_png(report, marks, paths["png"])
    return paths


TIER_COLOURS = {"T0": "#c8c8c8", "T1": "#f0a830", "T2": "#d62728"}
REGIME_COLOURS = {"calm": "#9ecae1", "trending_up": "#74c476", "trending_down": "#fd8d3c", "volatile": "#9e9ac8",
                  "crash": "#de2d26", "range_bound": "#9ecae1", "unknown": "#ffffff"}


def render_png(report: BacktestReport, marks: list[TickMark], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    x = [m.row for m in marks]
    fig, axes = plt.subplots(5, 1, figsize=(12, 10), sharex=True,
                             gridspec_kw={"height_ratios": [3, 1.6, 1.6, 0.7, 1.1]})
    ax_p, ax_hf, ax_eq, ax_tier, ax_gas = axes
    f = report.figures
    fig.suptitle(f"{report.info.name} on {Path(report.info.path).name}: return {_pct(f.total_return)}, "
                 f"max DD {f.max_drawdown * 100:.1f}%, min HF {_num(f.min_health_factor, '{:.2f}')}, "
                 f"liquidations {f.liquidations}, tx {f.transactions}, gas ${f.gas_usd:.2f}, "
                 f"blocked {sum(f.blocked.values())} (protective {f.protective_blocked})", fontsize=10)
    ax_p.plot(x, [m.pool_price for m in marks], label="pool", color="#1f77b4", lw=1.2)
    ax_p.plot(x, [m.oracle_price for m in marks], label="oracle", color="#ff7f0e", lw=1.0, ls="--")
    for m in marks:
        for a in m.actions:
            if a.status == "executed":
                marker, colour = ("v", "#d62728") if a.tool in ("swap", "withdraw", "borrow") else ("^", "#2ca02c")
            elif a.status in ("blocked", "deferred"):
                marker, colour = "x", "black"
            else:
                continue
            ax_p.scatter([m.row], [m.pool_price], marker=marker, color=colour, s=36, zorder=3)
    liquidated = [m for m in marks if m.liquidations]  # the Pool's LiquidationCall events against the golem
    ax_p.scatter([m.row for m in liquidated], [m.oracle_price for m in liquidated], marker="*", color="#8b0000", s=140,
                 zorder=4)
    ax_p.set_ylabel("USDC / WETH")
    ax_p.legend(handles=[*ax_p.get_lines(), Line2D([], [], marker="^", color="#2ca02c", ls="", label="repay/supply"),
                         Line2D([], [], marker="v", color="#d62728", ls="", label="swap/withdraw"),
                         Line2D([], [], marker="x", color="black", ls="", label="blocked"),
                         Line2D([], [], marker="*", color="#8b0000", ls="", label="liquidated")],
                loc="best", fontsize=8)
    ax_hf.plot(x, [m.health_factor if m.health_factor is not None else float("nan") for m in marks], color="#2ca02c")
    ax_hf.scatter([m.row for m in liquidated], [m.row_health_factor for m in liquidated], marker="*", color="#8b0000",
                  s=90, zorder=4)  # where the liquidator found it
    ax_hf.axhline(1.0, color="#d62728", lw=0.8)
    ax_hf.axhline(1.6, color="#999999", lw=0.6, ls=":")
    ax_hf.set_ylabel("health factor")
    ax_eq.plot(x, [m.equity_usd for m in marks], color="#444444")
    ax_eq.set_ylabel("equity $")
    for m in marks:
        if m.tier:
            ax_tier.axvspan(m.row - 0.5, m.row + 0.5, ymin=0.5, ymax=1.0, color=TIER_COLOURS.get(m.tier, "white"), lw=0)
        if m.label_regime:
            ax_tier.axvspan(m.row - 0.5, m.row + 0.5, ymin=0.0, ymax=0.45, color=REGIME_COLOURS.get(m.label_regime),
                            lw=0)
    ax_tier.set_yticks([0.22, 0.75], ["regime", "tier"])
    handles = [Patch(color=c, label=t) for t, c in TIER_COLOURS.items()]
    handles += [Patch(color=REGIME_COLOURS[r], label=r) for r in sorted({m.label_regime for m in marks if m.label_regime})]
    ax_tier.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7)
    ax_gas.plot(x, [m.gas_gwei for m in marks], color="#8c564b")
    ax_gas.set_ylabel("gas gwei")
    ax_gas.set_xlabel("row")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
