"""Step 6 VALIDATE as the `tool_call` hook: telemetry → safety → risk → permits, the first block wins.

telemetry meters the call; safety is the PolicyCage, max drawdown, the kill switch and STRATEGY.md MUST lines on the
simulated post-state; risk holds the hard shields, the gas gate by urgency, Kelly sizing and learned guardrails;
permits issues a single-use permit once the simulation succeeded. Before the layers validate_layered sizes every
action to fit (golem.safety.sizing). Every verdict goes on the audit trail; nothing the deliberator writes can widen
a limit. What each layer checks and why this order: docs/design/safety.md#the-validate-chain.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Literal, cast

from pydantic import BaseModel, Field

from golem.chain.permits import PermitStore
from golem.chain.tools.arguments import parse_arguments
from golem.chain.tools.schemas import WRITE_TOOLS, ToolArgumentError
from golem.chain.tools.valuation import action_value_usd, price_usd
from golem.inference.strategy import Strategy
from golem.extensions.hooks import fire
from golem.extensions.registry import ExtensionRegistry, registry_for
from golem.safety.somatic import situation_of, size_factor
from golem.models.enums import BehavioralPhase
from golem.models.interventions import Steer
from golem.models.life import SomaticMarker
from golem.models.observation import Observation
from golem.models.threats import MarketWindow, ThreatVerdict
from golem.models.wake import Forecast
from golem.models.tick import ProposedAction, SimulatedAction, SimulationResult, ValidatedAction, ValidationResult
from golem.safety.approvals import grant_refusal
from golem.safety.audit import AuditLog
from golem.safety.constraints import Book, constraint_caps, constraint_refusal, mark_used
from golem.safety.gas import GasPartition
from golem.safety.limits import SafetyLimits
from golem.safety.policy import PolicyCage, opens_exposure, protective_reason
from golem.safety.risk import RiskSnapshot, kelly_fraction
from golem.safety.threats import (
    MIN_TOLERANCE_BPS,
    SANDWICH_GAS,
    amount_out,
    exposure_at,
    market_refusal,
    market_threats,
    safe_amount,
    safe_tolerance,
    within,
)
from golem.safety.urgency import LineRule, classify, gas_decision, recent_median
from golem.safety.sizing import (
    Fit,
    SOFT_LAYER,
    SizeCap,
    amount_of,
    clip_note,
    fit,
    hf_borrow_cap,
    hf_withdraw_cap,
    impact_cap_amount,
    soft_floor,
    value_cap,
)

Layer = Literal["telemetry", "safety", "risk", "permits", "coordination"]  # the tool_call hook's members


class LayerVerdict(BaseModel):
    layer: Layer
    allow: bool
    reason: str


class ToolCallDecision(BaseModel):
    action_index: int
    tool: str
    allowed: bool
    deferred: bool = False  # the gas gate said "later", not "never"
    blocked_by: Layer | None = None
    reason: str
    value_usd: float = 0.0
    verdicts: list[LayerVerdict] = Field(default_factory=list)
    protective: str | None = None  # the gas gate's note when it treated the action as protective
    clipped: str | None = None  # size to fit: the proposal was clipped to this size, and why (golem.safety.sizing)
    hooks: list[str] = Field(default_factory=list)  # the tool_call members that ran, in order (first block stops)


class ValidationContext(BaseModel):
    golem_id: str
    tick: int
    phase: BehavioralPhase
    observation: Observation
    risk: RiskSnapshot = Field(default_factory=RiskSnapshot)
    strategy: Strategy | None = None
    steers: list[Steer] = Field(default_factory=list)  # the owner's steers this tick deliberated on
    entries_stopped: bool = False  # the owner's `golem stop-entries`: nothing that opens exposure
    # the strategy judged unviable by experience, not acknowledged (golem.safety.experience): nothing that opens exposure
    restricted: str | None = None
    # The daimon's somatic markers and the last tick's price: a strong negative marker matching the
    # action's situation shrinks the size allowed for new exposure (golem.safety.somatic.size_factor).
    markers: list[SomaticMarker] = Field(default_factory=list)
    last_price: float | None = None
    # Urgency buys gas (golem.safety.urgency): the health factor's forecast against STRATEGY.md's lines, the MUST
    # floor, and the recent gas prices (gwei) a routine protective action waits under the median of.
    forecast: Forecast | None = None
    floor: float | None = None
    gas_history: list[float] = Field(default_factory=list)
    # the rules (STRATEGY.md and learned) firing now on a crossed health-factor line with a sell (urgency.line_rules)
    line_rules: list[LineRule] = Field(default_factory=list)
    approvals: dict[str, str] = Field(default_factory=dict)  # the owner's approved privileged requests: id → tool
    # The DeFi threat detectors (golem.safety.threats): the recent blocks' pair and feed, and the market-wide verdicts
    # validate_layered reads from them once per tick
    market: MarketWindow | None = None
    market_verdicts: list[ThreatVerdict] = Field(default_factory=list)


ToolCallHandler = Callable[[ProposedAction, ValidationContext, SimulatedAction | None], str | None]


def _bound(handler: ToolCallHandler, action: ProposedAction, ctx: ValidationContext,
           sim: SimulatedAction | None) -> Callable[[], str | None]:
    """An extension's tool_call handler bound to this action, as the hook firing calls it (no arguments)."""
    return lambda: handler(action, ctx, sim)


class SafetyCage:
    """The tool_call hook over one set of limits: telemetry, safety, risk and permits, fired in the registry's order."""

    def __init__(self, limits: SafetyLimits, registry: ExtensionRegistry | None = None,
                 extra_tool_call: dict[str, ToolCallHandler] | None = None) -> None:
        self.limits = limits
        self.policy_cage = PolicyCage(limits.policy)
        # the tool_call hook's firing order: the worker's registry, built at start
        self.registry = registry if registry is not None else registry_for()
        # handlers of tool_call members this module does not serve (e.g. a coordination extension): name → fn
        # (action, ctx, sim) → refusal or None; they fire only where the registry puts them
        self.extra_tool_call = dict(extra_tool_call or {})

    def policy_hash(self) -> str:
        return self.limits.policy_hash()

    # ── layers ──────────────────────────────────────────────────────────────────────────────

    def safety_layer(self, action: ProposedAction, ctx: ValidationContext, before: Book, after: Book) -> str | None:
        if os.path.exists(self.limits.kill_switch_path):
            return f"kill switch {self.limits.kill_switch_path} is present: every write is blocked"
        verdict = self.policy_cage.check(action, ctx.observation, ctx.phase)
        if not verdict.ok:
            return f"policy: {verdict.reason}"
        ungranted = grant_refusal(action, list(self.limits.policy.privileged_tools), ctx.approvals)
        if ungranted:
            return ungranted
        exposure = opens_exposure(action)
        if exposure and ctx.entries_stopped:
            return (f"stop-entries: the owner stopped new positions ({action.tool} opens exposure); risk-reducing "
                    "actions still run (`golem allow-entries` lifts it)")
        if exposure and ctx.restricted:
            return (f"restricted: the strategy is unviable from experience ({ctx.restricted[:300]}); {action.tool} "
                    "opens exposure, risk-reducing actions still run (`golem strategy-check --ack` or a new "
                    "STRATEGY.md lifts it)")
        dd, cap = ctx.risk.drawdown_pct, self.limits.risk.max_drawdown_pct
        if exposure and dd > cap:
            return (f"max drawdown: net value ${ctx.risk.nav_usd:,.2f} is {dd:.1f}% below the high-water mark "
                    f"${ctx.risk.high_water_usd:,.2f} (limit {cap:g}%); only de-risking actions are allowed")
        if ctx.strategy is not None:
            why = constraint_refusal(ctx.strategy, action, before, after, exposure)
            if why:
                return why
        return None

    def risk_layer(
        self, action: ProposedAction, ctx: ValidationContext, sim: SimulatedAction | None, after: Book,
        value: float, gas_spent_so_far: float,
    ) -> tuple[str | None, bool, str | None]:
        """(reason, deferred, protective note)."""
        r = self.limits.risk
        snap = ctx.observation.snapshot
        hf = after.health_factor
        if action.tool in ("withdraw", "borrow") and hf is not None and hf < r.hf_hard_floor:
            return f"hard shield: health factor would be {hf:.3f}, below the floor {r.hf_hard_floor:g}", False, None
        if action.tool in ("swap", "add_liquidity") and snap.oracle_price > 0:
            # A deposit at a manipulated pool price is as exposed as a swap at one (it is priced by it).
            gap = abs(snap.pool.price - snap.oracle_price) / snap.oracle_price * 1e4
            if gap > r.oracle_deviation_halt_bps:
                return (f"hard shield: pool price deviates {gap:.0f} bps from the oracle (halt above "
                        f"{r.oracle_deviation_halt_bps:g} bps; possible manipulation)"), False, None
        # layers 4–5: a manipulated pool or feed refuses new exposure priced off it; a flash-loan-shaped move holds
        # pool-priced writes for a tick (golem.safety.threats)
        why, held = market_refusal(action.tool, opens_exposure(action), protective_reason(action, snap, ctx.steers),
                                   ctx.market_verdicts)
        if why:
            return why, held, None
        note = None
        if sim is not None and sim.gas_estimate > 0:
            gas_usd = sim.gas_estimate * snap.gas_price_gwei * 1e-9 * price_usd("WETH", ctx.observation)
            partition = GasPartition(budget_usd=r.gas_budget_usd_per_day, emergency_fraction=r.gas_emergency_fraction,
                                     spent_usd=ctx.risk.gas_spent_today_usd + gas_spent_so_far)
            verdict = classify(action, ctx.forecast, ctx.steers, ctx.floor, ctx.line_rules)
            why, note = gas_decision(gas_usd, partition, ctx.risk.typical_action_gas_usd, r.gas_spike_multiple, verdict,
                                     protective_reason(action, snap, ctx.steers), snap.gas_price_gwei,
                                     recent_median(ctx.gas_history), self.limits.policy, value)
            if why:
                return why, True, None
        exposure = opens_exposure(action)
        shrink, fired = (size_factor(ctx.markers, situation_of(ctx.observation, ctx.last_price, action.tool))
                         if exposure and ctx.markers else (1.0, []))
        if fired and value > self.limits.policy.max_trade_size_usd * shrink:
            cap = self.limits.policy.max_trade_size_usd * shrink
            return (f"somatic marker {', '.join(fired)} fired (a loss in this situation before): the size cap shrinks "
                    f"to {shrink:g}× = ${cap:,.2f}; the action is ${value:,.2f}"), False, None
        stats = ctx.risk.tools.get(action.tool)
        if exposure and stats and stats.n >= r.guardrail_min_outcomes and stats.failure_rate >= r.guardrail_failure_rate:
            return (f"adaptive guardrail: {action.tool} failed verification in {stats.failures} of its last {stats.n} "
                    f"outcomes (≥ {r.guardrail_failure_rate:.0%}); no new exposure through it"), False, None
        size_cap = self.limits.policy.max_trade_size_usd
        if exposure and ctx.risk.consecutive_losses >= r.max_consecutive_losses:
            size_cap = size_cap / 2
            if value > size_cap:
                return (f"adaptive guardrail: {ctx.risk.consecutive_losses} losing bets in a row halve the size cap to "
                        f"${size_cap:,.2f}; the action is ${value:,.2f}"), False, None
        if exposure and ctx.risk.bets >= r.kelly_min_outcomes and ctx.risk.win_rate is not None:
            f = kelly_fraction(ctx.risk.win_rate, ctx.risk.payoff_ratio or 0.0)
            if f <= 0:
                return (f"Kelly sizing: no edge over the last {ctx.risk.bets} bets (win rate {ctx.risk.win_rate:.0%}, "
                        f"payoff {ctx.risk.payoff_ratio or 0:.2f}); no new exposure"), False, None
            kelly_cap = min(f, 1.0) * r.kelly_fraction * max(ctx.risk.nav_usd, 0.0) * shrink
            if value > kelly_cap:
                return (f"Kelly sizing: ${value:,.2f} exceeds {r.kelly_fraction:g}×Kelly ({f:.3f}) of net value "
                        f"${ctx.risk.nav_usd:,.2f}" + (f" × {shrink:g} (somatic {', '.join(fired)})" if fired else "")
                        + f" = ${kelly_cap:,.2f}"), False, None
        return None, False, note

    def gas_usd(self, sim: SimulatedAction | None, ctx: ValidationContext) -> float:
        if sim is None or not sim.gas_estimate:
            return 0.0
        return sim.gas_estimate * ctx.observation.snapshot.gas_price_gwei * 1e-9 * price_usd("WETH", ctx.observation)

    def size_caps(self, action: ProposedAction, ctx: ValidationContext, book: Book) -> tuple[list[SizeCap], float]:
        """(every size limit of the layers as a cap in the action's units, the action's USD value per unit).
        The same limits safety_layer and risk_layer check, so a clipped action passes them (docs/design/spending.md)."""
        amount = amount_of(action)
        if action.tool not in WRITE_TOOLS or amount is None:
            return [], 0.0
        try:
            args = parse_arguments(action.tool, action.arguments)
            unit = action_value_usd(action, ctx.observation) / amount
        except ToolArgumentError:
            return [], 0.0
        p, r = self.limits.policy, self.limits.risk
        caps = [value_cap("max_trade_size_usd", "safety", p.max_trade_size_usd, unit,
                          f"max_trade_size_usd ${p.max_trade_size_usd:,.2f}")]
        tool, snap = action.tool, ctx.observation.snapshot
        held = {"swap": str(args.get("token_in", "")), "supply": "WETH", "repay": "USDC", "add_liquidity": "WETH"}
        if tool in held:  # what the wallet holds bounds what it can spend (the simulation would revert)
            bal = book.balances.get(held[tool], 0.0)
            caps.append(SizeCap(limit="balance", layer="permits", max_amount=bal,
                                why=f"the wallet holds {bal:,.6g} {held[tool]}"))
        if tool == "withdraw":
            caps.append(SizeCap(limit="collateral", layer="permits", max_amount=book.collateral,
                                why=f"the position holds {book.collateral:,.6g} WETH of collateral"))
        pool = snap.pool
        if tool == "swap" and {args["token_in"], args["token_out"]} == {pool.token0.upper(), pool.token1.upper()}:
            reserve_in = pool.reserve0 if args["token_in"] == pool.token0.upper() else pool.reserve1
            caps.append(SizeCap(limit="max_price_impact_bps", layer="safety",
                                max_amount=impact_cap_amount(p.max_price_impact_bps / 1e4, reserve_in),
                                why=f"max_price_impact_bps {p.max_price_impact_bps:g} against the pair's "
                                    f"{reserve_in:,.6g} {args['token_in']} reserve"))
        price_lt = book.oracle_price * book.liquidation_threshold
        if tool == "borrow" and price_lt > 0:
            caps.append(SizeCap(limit="hf_hard_floor", layer="risk", why=f"hard shield: health factor ≥ {r.hf_hard_floor:g}",
                                max_amount=hf_borrow_cap(book.collateral, price_lt, book.debt, r.hf_hard_floor)))
        if tool == "withdraw" and price_lt > 0 and book.debt > 1e-12:
            caps.append(SizeCap(limit="hf_hard_floor", layer="risk", why=f"hard shield: health factor ≥ {r.hf_hard_floor:g}",
                                max_amount=hf_withdraw_cap(book.collateral, price_lt, book.debt, r.hf_hard_floor)))
        if ctx.strategy is not None:
            caps += [SizeCap(limit="STRATEGY.md", layer="safety", max_amount=cap, why=why)
                     for cap, why in constraint_caps(ctx.strategy, action, book)]
            # SHOULD lines: soft caps (sizing.soft_floor keeps them from refusing), docs/design/strategies.md
            caps += [SizeCap(limit="SHOULD", layer=SOFT_LAYER, max_amount=cap, why=why)
                     for cap, why in constraint_caps(ctx.strategy, action, book, should=True)]
        if opens_exposure(action):
            shrink, fired = (size_factor(ctx.markers, situation_of(ctx.observation, ctx.last_price, tool))
                             if ctx.markers else (1.0, []))
            if fired:
                caps.append(value_cap("somatic marker", "risk", p.max_trade_size_usd * shrink, unit,
                                      f"somatic marker {', '.join(fired)} shrinks the size cap to {shrink:g}×"))
            if ctx.risk.consecutive_losses >= r.max_consecutive_losses:
                caps.append(value_cap("consecutive losses", "risk", p.max_trade_size_usd / 2, unit,
                                      f"{ctx.risk.consecutive_losses} losing bets in a row halve the size cap"))
            if ctx.risk.bets >= r.kelly_min_outcomes and ctx.risk.win_rate is not None:
                f = kelly_fraction(ctx.risk.win_rate, ctx.risk.payoff_ratio or 0.0)
                if f > 0:
                    caps.append(value_cap("Kelly sizing", "risk",
                                          min(f, 1.0) * r.kelly_fraction * max(ctx.risk.nav_usd, 0.0) * shrink, unit,
                                          f"{r.kelly_fraction:g}×Kelly ({f:.3f}) of net value"))
        return [c for c in caps if c is not None], unit

    def min_worth(self, unit_usd: float, gas_usd: float) -> float:
        """The smallest clipped size worth sending, in the action's units: min_trade_usd, and
        min_trade_gas_multiple × its gas."""
        p = self.limits.policy
        if unit_usd <= 0:
            return 0.0
        return max(p.min_trade_usd, p.min_trade_gas_multiple * gas_usd) / unit_usd

    @staticmethod
    def permit_layer(sim: SimulatedAction | None) -> str | None:
        if sim is None:
            return "not simulated: every write must be simulated before it is approved"
        if not sim.ok:
            return f"simulation failed: {sim.revert_reason or 'reverted'}"
        return None

    # ── the hook ────────────────────────────────────────────────────────────────────────────

    def tool_call(
        self, action: ProposedAction, ctx: ValidationContext, sim: SimulatedAction | None, before: Book,
        gas_spent_so_far: float = 0.0,
    ) -> tuple[ToolCallDecision, Book]:
        """One action through the tool_call hook: the registry's members in the declared order (telemetry →
        safety → risk → permits → coordination), the first block wins and the members after it do not run.
        Returns the decision and the book after the action (unchanged when refused)."""
        call: dict[str, Any] = {"value": 0.0, "after": before, "note": None, "deferred": False}
        verdicts: list[LayerVerdict] = []

        def telemetry() -> str | None:  # meters the call: its value, the book it would leave
            try:
                parse_arguments(action.tool, action.arguments)
            except ToolArgumentError:
                return None  # safety refuses it with the reason
            if action.tool in WRITE_TOOLS:
                call["value"] = action_value_usd(action, ctx.observation)
                call["after"] = before.after(sim.expected if sim is not None and sim.ok else {})
            return None

        def safety() -> str | None:
            if action.tool not in WRITE_TOOLS:
                return f"unknown tool {action.tool!r}: only {', '.join(sorted(WRITE_TOOLS))} may write"
            try:
                parse_arguments(action.tool, action.arguments)
            except ToolArgumentError as e:
                return f"invalid arguments: {e}"
            why = self.safety_layer(action, ctx, before, call["after"])
            verdicts.append(LayerVerdict(layer="safety", allow=why is None,
                                         reason=why or "within policy and constraints"))
            return why

        def risk() -> str | None:
            why, call["deferred"], call["note"] = self.risk_layer(action, ctx, sim, call["after"], call["value"],
                                                                  gas_spent_so_far)
            verdicts.append(LayerVerdict(layer="risk", allow=why is None,
                                         reason=why or call["note"] or "within risk limits"))
            return why

        def permits() -> str | None:
            why = self.permit_layer(sim)
            verdicts.append(LayerVerdict(layer="permits", allow=why is None, reason=why or "simulation ok"))
            return why

        handlers = {"telemetry": telemetry, "safety": safety, "risk": risk, "permits": permits,
                    **{name: _bound(h, action, ctx, sim) for name, h in self.extra_tool_call.items()}}
        fired, results = fire(self.registry, "tool_call", handlers, stop=lambda why: why is not None)
        for layer, why in results:
            if why is not None:
                if layer not in ("safety", "risk", "permits"):  # those three write their own verdicts
                    verdicts.append(LayerVerdict(layer=cast(Any, layer), allow=False, reason=why))
                decision = self._blocked(action, layer, why, verdicts, call["value"],
                                         deferred=call["deferred"] and layer == "risk")
                return decision.model_copy(update={"hooks": fired}), before
        note = call["note"]
        mark_used(call["after"], action)
        return ToolCallDecision(
            action_index=action.action_index, tool=action.tool, allowed=True, value_usd=call["value"],
            reason=f"policy ok (${call['value']:,.2f}), risk ok, simulation ok" + (f"; {note}" if note else ""),
            verdicts=verdicts, protective=note, hooks=fired,
        ), call["after"]  # fmt: skip

    @staticmethod
    def _blocked(action: ProposedAction, layer: str, reason: str, verdicts: list[LayerVerdict], value: float,
                 deferred: bool = False) -> ToolCallDecision:
        return ToolCallDecision(
            action_index=action.action_index, tool=action.tool, allowed=False, deferred=deferred,
            blocked_by=cast(Any, layer),
            reason=f"{layer}: {reason}" if not reason.startswith(("policy:", "not simulated", "simulation failed")) else reason,
            value_usd=value, verdicts=verdicts,
        )  # fmt: skip


Resimulate = Callable[[list[ProposedAction]], SimulationResult]


def sandwich_guard(cage: SafetyCage, f: Fit, ctx: ValidationContext, least: float,
                   reserves: dict[str, float] | None = None) -> Fit:
    """A swap on the observed pair, at its fitted size, against the best sandwich its reserves allow (`reserves`:
    symbol → reserve as the tick's earlier swaps leave them; the observed ones when None): within
    max_sandwich_loss_bps it goes on as it is; above, its slippage bound is tightened until the best sandwich takes no
    more; when that would go below MIN_TOLERANCE_BPS it is clipped instead (refused when what is left is not worth
    doing). The verdict rides on the Fit (docs/design/safety.md#defi-threats)."""
    action = f.action
    if action is None or action.tool != "swap":
        return f
    try:
        args = parse_arguments("swap", action.arguments)
    except ToolArgumentError:
        return f
    obs, pool = ctx.observation, ctx.observation.snapshot.pool
    tin, tout = args["token_in"], args["token_out"]
    if {tin, tout} != {pool.token0.upper(), pool.token1.upper()}:
        return f
    held = reserves or {pool.token0.upper(): pool.reserve0, pool.token1.upper(): pool.reserve1}
    rin, rout = held[tin], held[tout]
    amount, slip = float(args["amount_in"]), float(args["max_slippage_bps"])
    floor_out = float(args["min_amount_out"]) if args["min_amount_out"] is not None else None
    price_in, price_out = price_usd(tin, obs), price_usd(tout, obs)
    gas_usd = SANDWICH_GAS * obs.snapshot.gas_price_gwei * 1e-9 * price_usd("WETH", obs)
    cost_in = gas_usd / price_in if price_in > 0 else 0.0  # the attacker's gas, in what it trades
    bound = cage.limits.policy.max_sandwich_loss_bps
    e = exposure_at(amount, rin, rout, slip, floor_out, cost_in)
    figures = {"amount_in": amount, "slippage_bps": slip, "front_run": e.front_run,
               "attacker_profit": e.attacker_profit, "victim_loss": e.victim_loss, "loss_bps": round(e.loss_bps, 4),
               "loss_usd": round(e.victim_loss * price_out, 4), "bound_bps": bound,
               "reserve_in": rin, "reserve_out": rout, "attacker_gas_usd": round(gas_usd, 4)}
    seen = (f"the best front-run of {e.front_run:,.6g} {tin} takes {e.loss_bps:.1f} bps (${e.victim_loss * price_out:,.2f})"
            f" of the {amount:,.6g} {tin} swap at its {slip:g} bps slippage bound, the attacker nets "
            f"{e.attacker_profit:,.6g} {tin} after gas")

    def verdict(fired: bool, response: str, detail: str, **more: float) -> ThreatVerdict:
        return ThreatVerdict(detector="sandwich", fired=fired, response=response, detail=detail,
                             figures={**figures, **more}, action_index=action.action_index)

    if within(e.loss_bps, bound):
        detail = (f"no sandwich pays at the {slip:g} bps slippage bound (the attacker's fees and "
                  f"${gas_usd:,.2f} of gas exceed what it could take)" if e.front_run <= 0
                  else f"{seen}: within the {bound:g} bps bound")
        return f.model_copy(update={"threat": verdict(False, "none", detail)})
    tolerance = safe_tolerance(amount, rin, rout, slip, floor_out, bound, cost_in)
    if tolerance >= MIN_TOLERANCE_BPS:
        after = exposure_at(amount, rin, rout, tolerance, floor_out, cost_in)
        note = (f"sandwich: {seen}, above the {bound:g} bps bound: slippage bound tightened from {slip:g} to "
                f"{tolerance:g} bps (the best sandwich now takes {after.loss_bps:.1f} bps)")
        tightened = action.model_copy(update={"arguments": {**action.arguments, "max_slippage_bps": tolerance},
                                              "clipped_from": action.clipped_from or dict(action.arguments)})
        return f.model_copy(update={"action": tightened, "tightened": note, "threat": verdict(
            True, "tightened", note, tightened_bps=tolerance, loss_bps_after=round(after.loss_bps, 4))})
    size = safe_amount(amount, rin, rout, MIN_TOLERANCE_BPS, bound, cost_in)
    cap = SizeCap(limit="max_sandwich_loss_bps", layer="risk", max_amount=size,
                  why=(f"sandwich: {seen}; even at a {MIN_TOLERANCE_BPS:g} bps slippage bound only {size:,.6g} {tin} "
                       f"keeps the best sandwich within {bound:g} bps"))
    at_floor = action.model_copy(update={"arguments": {**action.arguments, "max_slippage_bps": MIN_TOLERANCE_BPS},
                                         "clipped_from": action.clipped_from or dict(action.arguments)})
    clipped = fit(at_floor, [cap], least)
    response = "clipped" if clipped.action is not None else "refused"
    return clipped.model_copy(update={
        "proposed_amount": f.proposed_amount, "should": f.should,
        "threat": verdict(True, response, cap.why + (f": clipped to {size:,.6g}" if clipped.action is not None
                                                     else f": {clipped.refusal}"), clipped_to=size)})


def size_to_fit(cage: SafetyCage, actions: list[ProposedAction], simulation: SimulationResult,
                ctx: ValidationContext) -> list[Fit]:
    """Each action clipped to the largest size every size limit allows, in order: each sees the book the ones
    before it leave (their simulated deltas, scaled to their clipped size)."""
    sims = {s.action_index: s for s in simulation.actions}
    book = Book.of(ctx.observation.snapshot)
    pool = ctx.observation.snapshot.pool
    reserves = {pool.token0.upper(): pool.reserve0, pool.token1.upper(): pool.reserve1}  # as earlier swaps leave them
    fits: list[Fit] = []
    for action in actions:
        caps, unit = cage.size_caps(action, ctx, book)
        sim = sims.get(action.action_index)
        least = cage.min_worth(unit, cage.gas_usd(sim, ctx))
        caps, past = soft_floor(caps, least, amount_of(action))
        f = fit(action, caps, least).model_copy(update={"should": past})
        f = sandwich_guard(cage, f, ctx, least, reserves)
        fits.append(f)
        if f.action is None:
            continue
        if f.threat is not None:  # a swap on the pair: the next one meets the reserves this one leaves
            tin, tout = str(f.action.arguments["token_in"]).upper(), str(f.action.arguments["token_out"]).upper()
            sold = float(f.action.arguments["amount_in"])
            bought = amount_out(sold, reserves[tin], reserves[tout])
            reserves = {**reserves, tin: reserves[tin] + sold, tout: reserves[tout] - bought}
        ratio = f.amount / f.proposed_amount if f.proposed_amount > 0 else 1.0
        expected = sim.expected if sim is not None and sim.ok else {}
        book = book.after({k: v * ratio for k, v in expected.items()})
        mark_used(book, f.action)
    return fits


def validate_layered(
    cage: SafetyCage,
    actions: list[ProposedAction],
    simulation: SimulationResult,
    ctx: ValidationContext,
    permits: PermitStore,
    audit: AuditLog | None = None,
    resimulate: Resimulate | None = None,
) -> tuple[ValidationResult, list[ToolCallDecision]]:
    """Step 6 for every action, in order (each sees the book the approved ones before it leave).
    First every action is sized to fit (golem.safety.sizing): one over a size limit is clipped to the largest size
    every limit allows and the clipped set is simulated again (`resimulate`); a clip below the minimum worth doing
    is refused. Then each goes through the tool_call hook at its size. Approved actions get a permit bound to that
    size; refused ones a blocked permit record; all go on the audit trail."""
    if ctx.market is not None and not ctx.market_verdicts:  # layers 4–5, read once for the whole tick
        ctx = ctx.model_copy(update={"market_verdicts": market_threats(ctx.market, cage.limits.policy.threat_move_bps)})
    fits = size_to_fit(cage, actions, simulation, ctx)
    clips = {a.action_index: f for a, f in zip(actions, fits) if f.clipped or f.tightened}
    resimulated: SimulationResult | None = None
    if clips and resimulate is not None:
        resimulated = resimulate([f.action for f in fits if f.action is not None])
    sims = {s.action_index: s for s in (resimulated or simulation).actions}
    policy_hash = cage.policy_hash()
    book = Book.of(ctx.observation.snapshot)
    gas_so_far = 0.0
    out: list[ValidatedAction] = []
    decisions: list[ToolCallDecision] = []
    verdicts_out: list[ThreatVerdict] = []  # the sandwich check's, one per swap on the pair
    bore: dict[str, str] = {}  # market detector → what it did to an action (held | refused)
    for proposed, f in zip(actions, fits):
        action = f.action or proposed
        sim = sims.get(action.action_index)
        note = None
        if f.refusal is not None and f.binding is not None:
            decision = SafetyCage._blocked(proposed, f.binding.layer, f"size to fit: {f.refusal}", [], 0.0)
        elif action.action_index in clips and resimulated is None:
            decision = SafetyCage._blocked(proposed, "permits", f"size to fit: clipped but not simulated again at "
                                           f"its new size (by {f.binding.limit if f.binding else 'a limit'}); every "
                                           "write must be simulated before it is approved", [], 0.0)
        else:
            decision, book = cage.tool_call(action, ctx, sim, book, gas_so_far)
            if f.clipped:
                unit = decision.value_usd / f.amount if f.amount > 0 else 0.0
                note = clip_note(f, unit)
                decision = decision.model_copy(update={"clipped": note, "reason": f"{note}; {decision.reason}"})
            if f.tightened and decision.allowed:  # the tightening is the threat's, not a size clip (record.threats)
                decision = decision.model_copy(update={"reason": f"{f.tightened}; {decision.reason}"})
        decisions.append(decision)
        threats = [f"{v.detector}: {v.detail}" for v in ctx.market_verdicts if v.fired]
        if f.threat is not None:
            verdicts_out.append(f.threat)
            if f.threat.fired:
                threats.append(f"sandwich ({f.threat.response}): {f.threat.detail.removeprefix('sandwich: ')}")
        for v in ctx.market_verdicts:
            if v.fired and not decision.allowed and v.detail in decision.reason:
                bore[v.detector] = "held" if decision.deferred else "refused"
        if audit is not None:
            if note is not None or f.refusal is not None:
                audit.append(ctx.golem_id, "tool_call.clipped", {
                    "tick": ctx.tick, "action_index": action.action_index, "tool": action.tool,
                    "proposed": proposed.arguments, "sized": f.action.arguments if f.action else None,
                    "limit": f.binding.limit if f.binding else None, "clip": note, "refusal": f.refusal,
                })  # fmt: skip
            audit.append(ctx.golem_id, "tool_call." + ("allowed" if decision.allowed else "blocked"), {
                "tick": ctx.tick, "action_index": action.action_index, "tool": action.tool,
                "arguments": action.arguments, "value_usd": decision.value_usd, "reason": decision.reason,
                "blocked_by": decision.blocked_by, "deferred": decision.deferred, "protective": decision.protective,
                "policy_hash": policy_hash, **({"approval_id": action.approval_id} if action.approval_id else {}),
            })  # fmt: skip
        if not decision.allowed:
            permit = permits.record_blocked(ctx.golem_id, ctx.tick, action.action_index, action.tool, policy_hash,
                                            decision.reason)
            if audit is not None:
                audit.append(ctx.golem_id, "permit.blocked", {"permit_id": permit.id, "tick": ctx.tick,
                                                              "action_index": action.action_index,
                                                              "reason": decision.reason})
            out.append(ValidatedAction(action_index=action.action_index, approved=False, reason=decision.reason,
                                       deferred=decision.deferred, should=f.should, threats=threats))
            continue
        gas_so_far += cage.gas_usd(sim, ctx)
        permit = permits.issue(ctx.golem_id, ctx.tick, action.action_index, action.tool, decision.value_usd, policy_hash)
        if audit is not None:
            audit.append(ctx.golem_id, "permit.created", {
                "permit_id": permit.id, "tick": ctx.tick, "action_index": action.action_index, "tool": action.tool,
                "value_limit_usd": permit.value_limit_usd, "expires_at": permit.expires_at, "policy_hash": policy_hash,
            })  # fmt: skip
        out.append(ValidatedAction(action_index=action.action_index, approved=True, reason=decision.reason,
                                   permit_id=permit.id, protective=decision.protective,
                                   action=action if note is not None or f.tightened else None, clipped=note,
                                   should=f.should,
                                   threats=threats))
    market = [v.model_copy(update={"response": bore.get(v.detector, "none")}) for v in ctx.market_verdicts]
    if audit is not None:  # every verdict, fired or not, with its figures
        for v in [*market, *verdicts_out]:
            audit.append(ctx.golem_id, f"threat.{v.detector}", {"tick": ctx.tick, **v.model_dump(mode="json")})
    return ValidationResult(actions=out, simulation=resimulated, threats=[*market, *verdicts_out]), decisions
