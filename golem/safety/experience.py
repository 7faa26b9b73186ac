"""A strategy judged by what it achieved: at each delta cycle the window's records say whether gas and inference
exceed what its trades returned, whether the pool is too thin for its trades, whether the cage keeps refusing it.
A critical finding the owner has not acknowledged restricts the golem (nothing that opens exposure; no paid model)
until it stops binding or `golem strategy-check --ack`. Thresholds: docs/design/safety.md#unviable-from-experience.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from golem.models.config import ViabilitySection
from golem.models.enums import ActionStatus
from golem.models.record import DecisionCycleRecord

log = logging.getLogger("golem.safety.experience")

Kind = Literal["costs_exceed_returns", "thin_liquidity", "repeated_refusals"]
# What our cage and Uniswap V2 say when a swap is too big for the pool: the cage's price-impact limit (a refusal or
# a clip) and the pair's own reverts.
_NUMBERS = re.compile(r"\$?\d[\d,]*(\.\d+)?")
THIN_MARKERS = ("max_price_impact_bps", "price impact", "INSUFFICIENT_OUTPUT_AMOUNT", "INSUFFICIENT_LIQUIDITY")


class Finding(BaseModel):
    kind: Kind
    severity: Literal["critical", "warning"]
    message: str
    fix: str
    figures: dict[str, float] = Field(default_factory=dict)

    def __str__(self) -> str:
        return f"[{self.severity}] {self.kind}: {self.message} Fix: {self.fix}"


class Assessment(BaseModel):
    """One delta cycle's judgement of the window [first_tick, last_tick]."""

    tick: int  # the cycle's tick
    first_tick: int | None = None
    last_tick: int | None = None
    ticks: int = 0
    findings: list[Finding] = Field(default_factory=list)

    @property
    def critical(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "critical"]

    @property
    def status(self) -> str:
        return "STRATEGY_UNVIABLE" if self.critical else ("warnings" if self.findings else "ok")


def _thin(text: str | None) -> bool:
    return text is not None and any(m in text for m in THIN_MARKERS)


def assess(records: Iterable[DecisionCycleRecord], cfg: ViabilitySection, *, tick: int,
           settled: Mapping[int, float] | None = None) -> Assessment:
    """The window's findings. `settled`: tick → the hindsight-settled pnl of its actions (the ledger's), used in
    place of the tick's immediate pnl where present. Pure."""
    recs = sorted(records, key=lambda r: r.tick)
    out = Assessment(tick=tick, ticks=len(recs), first_tick=recs[0].tick if recs else None,
                     last_tick=recs[-1].tick if recs else None)
    settled = settled or {}
    inference = sum(r.inference_cost for r in recs)
    trades, gross, trade_gas = 0, 0.0, 0.0
    proposals = refused = 0
    reasons: Counter[str] = Counter()
    swaps = thin = 0
    for r in recs:
        earning = [a for a in r.actions if a.status == ActionStatus.EXECUTED and not a.protective]
        if earning and r.outcome is not None and r.outcome.pnl_impact is not None:
            gas = sum(a.gas_cost for a in earning)
            pnl = settled.get(r.tick, r.outcome.pnl_impact)  # both net of the tick's gas
            trades += 1
            trade_gas += gas
            gross += pnl + sum(a.gas_cost for a in r.actions)
        for a in r.actions:
            proposals += 1
            if a.status == ActionStatus.BLOCKED:
                refused += 1
                reasons[_NUMBERS.sub("…", a.block_reason or "?")[:120]] += 1  # same refusal, other figures
            if a.tool_name == "swap":
                swaps += 1
                thin += _thin(a.block_reason) or _thin(a.clipped)
    cost = trade_gas + inference
    if trades >= cfg.min_trades and cost >= cfg.min_cost_usd and cost > max(gross, 0.0):
        out.findings.append(Finding(
            kind="costs_exceed_returns", severity="critical",
            message=(f"gas and inference (${cost:,.2f}: gas ${trade_gas:,.2f}, inference ${inference:,.2f}) exceed "
                     f"what its {trades} trades returned before costs (${gross:,.2f}) over ticks "
                     f"{out.first_tick}–{out.last_tick}"),
            fix="trade less often or in larger steps, raise the rules' thresholds, or use a cheaper model tier",
            figures={"cost_usd": round(cost, 4), "gas_usd": round(trade_gas, 4), "inference_usd": round(inference, 4),
                     "gross_return_usd": round(gross, 4), "trades": float(trades)}))
    if thin >= cfg.thin_liquidity_events:
        share = thin / swaps if swaps else 0.0
        out.findings.append(Finding(
            kind="thin_liquidity", severity="critical" if share >= 0.5 else "warning",
            message=(f"{thin} of {swaps} swaps were clipped or refused for price impact or reverted for the pool's "
                     f"depth over ticks {out.first_tick}–{out.last_tick}: the pool is too thin for these trades"),
            fix="trade smaller amounts, a deeper pool, or widen [policy] max_price_impact_bps knowingly",
            figures={"thin": float(thin), "swaps": float(swaps), "share": round(share, 4)}))
    if refused >= cfg.refusals and proposals and refused / proposals >= cfg.refusal_share:
        top, n = reasons.most_common(1)[0]
        out.findings.append(Finding(
            kind="repeated_refusals", severity="warning",
            message=(f"the cage refused {refused} of {proposals} proposals over ticks {out.first_tick}–"
                     f"{out.last_tick} (most often, {n}×: {top})"),
            fix="align STRATEGY.md's rules with [policy] limits, or change the limits",
            figures={"refused": float(refused), "proposals": float(proposals)}))
    return out


class ViabilityState(BaseModel):
    """What the data dir keeps between cycles: the last assessment, and what the owner acknowledged of it."""

    assessment: Assessment | None = None
    strategy_sha: str = ""  # STRATEGY.md the assessment judged; a new file starts over
    acknowledged: list[str] = Field(default_factory=list)  # finding kinds the owner accepted for this strategy
    acknowledged_at: str | None = None
    acknowledged_note: str = ""
    notified: list[str] = Field(default_factory=list)  # critical kinds already sent to the webhook (sent once)

    def binding(self, strategy_sha: str) -> list[Finding]:
        """The critical findings that restrict the golem now: not acknowledged, for the STRATEGY.md in force."""
        if self.assessment is None or strategy_sha != self.strategy_sha:
            return []
        return [f for f in self.assessment.critical if f.kind not in self.acknowledged]

    def restriction(self, strategy_sha: str) -> str | None:
        binding = self.binding(strategy_sha)
        return "; ".join(f"{f.kind}: {f.message}" for f in binding) or None


class ViabilityStore:
    """`<data>/viability.json`, replaced atomically (the delta step writes, the CLI acknowledges, ticks read)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def load(self) -> ViabilityState:
        try:
            return ViabilityState.model_validate_json(self.path.read_text())
        except FileNotFoundError:
            return ViabilityState()
        except ValueError as err:  # a damaged file restricts nothing; the next cycle writes a whole one
            raise ValueError(f"{self.path} is damaged ({err}); delete it, the next delta cycle writes it again") from None

    def save(self, state: ViabilityState) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".viability.")
        with os.fdopen(fd, "w") as f:
            f.write(state.model_dump_json(indent=1))
        os.replace(tmp, self.path)

    def record(self, assessment: Assessment, strategy_sha: str) -> tuple[ViabilityState, list[Finding]]:
        """Keep `assessment`; (the state, the binding findings the operator has not been told of: `notified` them
        once told)."""
        state = self.load()
        if state.strategy_sha != strategy_sha:  # a new STRATEGY.md: what the owner accepted of the old one is gone
            state = ViabilityState()
        state.assessment, state.strategy_sha = assessment, strategy_sha
        # a kind that stopped binding is told again if it comes back
        state.notified = [k for k in state.notified if k in {f.kind for f in assessment.critical}]
        self.save(state)
        return state, [f for f in state.binding(strategy_sha) if f.kind not in state.notified]

    def notified(self, findings: list[Finding]) -> None:
        state = self.load()
        state.notified = sorted({*state.notified, *(f.kind for f in findings)})
        self.save(state)

    def acknowledge(self, now: str, note: str = "") -> list[Finding]:
        """The owner accepts the current findings (all kinds, warnings too); returns what was acknowledged."""
        state = self.load()
        findings = state.assessment.findings if state.assessment is not None else []
        state.acknowledged = sorted({*state.acknowledged, *(f.kind for f in findings)})
        state.acknowledged_at, state.acknowledged_note = now, note
        self.save(state)
        return findings


def summary(state: ViabilityState, strategy_sha: str) -> dict[str, Any]:
    """For status and the cycle's result."""
    a = state.assessment
    if a is None:
        return {}
    return {"tick": a.tick, "status": a.status, "window": [a.first_tick, a.last_tick],
            "findings": [f.model_dump() for f in a.findings], "restricted": state.restriction(strategy_sha),
            "acknowledged": state.acknowledged, "stale": strategy_sha != state.strategy_sha}


def restriction_at(path: Path, strategy_sha: str) -> str | None:
    """What restricts a tick now (None: nothing). A damaged file restricts nothing and says so in the log: the tick
    goes on, the next delta cycle writes the file whole."""
    try:
        return ViabilityStore(path).load().restriction(strategy_sha)
    except ValueError as err:
        log.warning("%s", err)
        return None
