"""Death (Thanatopsis: acceptance, settlement, reflection, legacy) as pure functions; GolemWorkflow runs the
phases and the `thanatopsis` activity does the I/O. Settlement unwinds the positions through the normal write path
(simulate → validate → execute → verify); none of its actions opens exposure.
The phases and the legacy package: docs/design/life.md#death-and-legacy.
"""

from __future__ import annotations

from collections import Counter

from pydantic import BaseModel, Field

from golem.models.life import DeathCertificate
from golem.models.observation import Observation
from golem.models.record import DecisionCycleRecord
from golem.models.state import GolemState
from golem.models.tick import ProposedAction

DEATH_CAUSES = ("hayflick", "economic", "terminal", "stochastic", "owner")
DUST = {"WETH": 1e-4, "DAI": 0.01, "USDC": 0.01}
REPAY_MARGIN = 1.001  # interest accrues until inclusion; Aave takes min(amount, debt)
WITHDRAW_ALL = 1.0001  # "an amount at (or a hair above) the supplied balance withdraws all of it"
MAX_SWAPS_PER_TICK = 4  # actions per settlement tick
CHUNK_OF_CAP = 0.95  # each action stays under the PolicyCage's max trade size (it caps repays and withdrawals too)


class KillRequest(BaseModel):
    """`golem kill --reason R`: the owner's kill, an Update that needs `confirm` = the golem's id."""

    reason: str = Field(min_length=1, max_length=500)
    confirm: str = ""  # the golem id, typed by the owner
    by: str = "owner"


class KillAnswer(BaseModel):
    accepted: bool
    golem_id: str
    note: str


def check_kill(golem_id: str, req: KillRequest, already: str | None) -> None:
    """The kill Update's validator: refused (before it enters history) without the confirmation."""
    if already:
        raise ValueError(f"golem {golem_id} is already dying ({already})")
    if not req.reason.strip():
        raise ValueError("give a reason: golem kill --reason \"...\"")
    if req.confirm != golem_id:
        raise ValueError(f"killing golem {golem_id} settles its positions and ends it for good; confirm by "
                         f"sending confirm={golem_id!r} (the CLI asks you to type the id)")


def accept_kill(s: GolemState, req: KillRequest) -> tuple[GolemState, KillAnswer]:
    """The owner's confirmed kill: the cause goes into the state; the loop dies after its running tick."""
    life = s.life.model_copy(update={"death_cause": "owner", "death_detail": req.reason.strip()})
    return s.model_copy(update={"life": life}), KillAnswer(
        accepted=True, golem_id=s.golem_id, note=f"golem {s.golem_id} dies after its running tick: settlement, "
                                                 "reflection, legacy; the workflow's result is its death certificate")


def settlement_actions(obs: Observation, approved_assets: list[str], max_trade_usd: float) -> tuple[list[ProposedAction], list[str]]:
    """The next unwind step from what the chain shows: (actions, what stays open after them, in words).
    One kind per tick, in order: repay → withdraw and remove liquidity → sell into USDC."""
    snap = obs.snapshot
    bal = snap.balances
    lending = [p for p in snap.positions if p.kind == "lending"]
    lp = [p for p in snap.positions if p.kind == "lp" and p.collateral > 0]
    debt = sum(p.debt for p in lending)
    collateral = sum(p.collateral for p in lending)
    price = snap.pool.price if snap.pool.price > 0 else snap.oracle_price
    acts: list[ProposedAction] = []

    def act(tool, args, why):
        acts.append(ProposedAction(action_index=len(acts), tool=tool, arguments=args, rationale=f"settlement: {why}"))

    def chunks(total: float, unit_usd: float):
        """`total` in pieces the PolicyCage's max trade size lets through (it caps repays and withdrawals too)."""
        size = CHUNK_OF_CAP * max_trade_usd / unit_usd if unit_usd > 0 else total
        left = total
        while left > 1e-12 and len(acts) < MAX_SWAPS_PER_TICK:
            piece = min(left, size)
            yield piece
            left -= piece

    if debt > DUST["USDC"]:
        usdc = bal.get("USDC", 0.0)
        if usdc >= debt * REPAY_MARGIN:
            for piece in chunks(debt * REPAY_MARGIN, 1.0):
                act("repay", {"amount": round(piece, 6)}, f"repay {piece:,.2f} of the {debt:,.2f} USDC debt")
        else:  # sell WETH for the shortfall first; the repay follows next tick
            need = (debt * REPAY_MARGIN - usdc) * 1.02 / price if price > 0 else 0.0
            act("swap", {"token_in": "WETH", "token_out": "USDC", "amount_in": round(min(need, bal.get("WETH", 0.0)), 6)},
                f"raise USDC to repay {debt:,.2f}")
    elif collateral > DUST["WETH"] or lp:
        if collateral > DUST["WETH"]:
            for piece in chunks(collateral * WITHDRAW_ALL, price):
                act("withdraw", {"amount": round(piece, 8)}, f"withdraw {piece:.6f} of {collateral:.6f} WETH collateral")
        if lp:
            act("remove_liquidity", {"fraction": 1.0}, "remove all liquidity")
    else:
        for token in ("WETH", "DAI"):
            amount = bal.get(token, 0.0)
            if amount <= DUST[token] or token.upper() not in {a.upper() for a in approved_assets}:
                continue
            for size in chunks(amount, price if token == "WETH" else 1.0):
                act("swap", {"token_in": token, "token_out": "USDC", "amount_in": round(size * (1 - 1e-9), 8)},
                    f"sell {size:.6f} {token} into USDC")
    return acts, open_positions(obs, approved_assets)


def open_positions(obs: Observation, approved_assets: list[str]) -> list[str]:
    """What is still open or not in USDC, in words (the certificate's `unsettled`)."""
    snap = obs.snapshot
    out = []
    for p in snap.positions:
        if p.kind == "lending" and p.debt > DUST["USDC"]:
            out.append(f"{p.id}: debt {p.debt:,.4f} USDC")
        if p.kind == "lending" and p.collateral > DUST["WETH"]:
            out.append(f"{p.id}: collateral {p.collateral:,.6f} WETH")
        if p.kind == "lp" and p.collateral > 0:
            out.append(f"{p.id}: liquidity")
    for token in ("WETH", "DAI"):
        amount = snap.balances.get(token, 0.0)
        if amount > DUST[token]:
            note = "" if token.upper() in {a.upper() for a in approved_assets} else " (not an approved asset: kept)"
            out.append(f"{token} balance {amount:,.6f}{note}")
    return out


def death_certificate(before: GolemState, after: GolemState, settled: list[int], txs: list[str], reflection: str,
                      now: str) -> DeathCertificate:
    """Acceptance and Settlement as they ran: the trigger and the life from `before` (the state death found),
    vitality and phase from `after` (once the settlement ticks ran)."""
    life, v = before.life, after.vitality
    return DeathCertificate(
        golem_id=before.golem_id, generation=life.generation, predecessor=life.predecessor,
        cause=life.death_cause or "owner", detail=life.death_detail, born_tick=life.born_tick,
        died_at_tick=before.tick, died_at=now,
        vitality={"economic": v.economic, "epistemic": v.epistemic, "stochastic": v.stochastic,
                  "composite": v.composite},
        phase=after.phase, settlement_ticks=settled, settlement_txs=txs, reflection_model=reflection,
        phases=["acceptance", "settlement"],
    )


class DeathReflection(BaseModel):
    """What the dying golem leaves in words and numbers (Thanatopsis Reflection)."""

    golem_id: str
    ticks: int
    what_worked: list[str] = Field(default_factory=list)
    what_failed: list[str] = Field(default_factory=list)
    causal_graph: list[dict] = Field(default_factory=list)  # the strongest edges
    top_heuristics: list[str] = Field(default_factory=list)
    regrets: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)  # become bloodstain entries in the legacy
    summary: str = ""
    model: str = "offline"
    stats: dict = Field(default_factory=dict)


def death_reflection(golem_id: str, records: list[DecisionCycleRecord], edges: list[dict], heuristics: list[str],
                     markers: list[dict], cause: str, detail: str) -> DeathReflection:
    """Deterministic: the same records give the same reflection."""
    worked, failed, regrets = [], [], []
    tiers = Counter(r.tier.value for r in records)
    emotions = Counter(r.primary_emotion.value for r in records if r.primary_emotion is not None)
    pnl_total, blocked = 0.0, Counter()
    for r in records:
        acted = [a for a in r.actions if a.status.value == "executed"]
        pnl = r.outcome.pnl_impact if r.outcome is not None else None
        if pnl is not None and acted:
            pnl_total += pnl
            tools = ", ".join(a.tool_name for a in acted)
            if pnl > 0:
                worked.append(f"tick {r.tick} ({r.regime.value}): {tools} made {pnl:+.2f} USD")
            elif pnl < 0:
                failed.append(f"tick {r.tick} ({r.regime.value}): {tools} lost {pnl:+.2f} USD")
        for a in r.actions:
            if a.status.value == "failed":
                failed.append(f"tick {r.tick}: {a.tool_name} failed ({a.block_reason or 'reverted'})")
            if a.status.value == "blocked":
                blocked[(a.tool_name, (a.block_reason or "")[:80])] += 1
        if r.observation.liquidations:
            regrets.append(f"tick {r.tick}: liquidated at health factor below 1 ({r.regime.value})")
    for (tool, why), n in blocked.most_common(5):
        regrets.append(f"{tool} refused {n}× by the PolicyCage: {why}")
    worked.sort(key=lambda s: -float(s.split(" made ")[1].split()[0]) if " made " in s else 0)
    warnings = [f"In {m['situation'].get('regime')} markets with health {m['situation'].get('health')} and the price "
                f"{m['situation'].get('move')}, {m['situation'].get('tool') or 'holding'} lost "
                f"{abs(m.get('pnl_usd') or 0):.2f} USD (strength {m['strength']:.2f}): size down or stay out."
                for m in sorted(markers, key=lambda m: -m.get("strength", 0))[:5]]
    if cause in ("economic", "terminal"):
        warnings.append(f"This golem died of {cause}: {detail}. Watch the burn rate against the credit.")
    top_edges = sorted(edges, key=lambda e: -float(e.get("weight", 0)))[:10]
    summary = (f"{golem_id} lived {len(records)} recorded ticks and died of {cause} ({detail}). "
               f"Tiers {dict(tiers)}; verified P&L of its actions {pnl_total:+.2f} USD; {len(worked)} gains, "
               f"{len(failed)} failures or losses, {sum(blocked.values())} refused actions"
               + (f"; most felt: {emotions.most_common(1)[0][0]}" if emotions else "") + ".")
    return DeathReflection(golem_id=golem_id, ticks=len(records), what_worked=worked[:10], what_failed=failed[:10],
                           causal_graph=top_edges, top_heuristics=heuristics[:10], regrets=regrets[:10],
                           warnings=warnings, summary=summary,
                           stats={"tiers": dict(tiers), "emotions": dict(emotions), "pnl_usd": round(pnl_total, 6),
                                  "blocked": sum(blocked.values())})


def within_caps(actions: list[ProposedAction], strategy, obs: Observation) -> list[ProposedAction]:
    """The owner's STRATEGY.md MUST caps bind a dying golem too (the PolicyCage would refuse more): each amount is cut
    to what the caps leave this tick, so the unwind goes step by step instead of being refused whole."""
    if strategy is None:
        return actions
    from golem.safety.constraints import _AMOUNT_ARG, Book, _basis, _token_of

    book = Book.of(obs.snapshot)
    used: dict[str, float] = {}
    out = []
    for a in actions:
        key = _AMOUNT_ARG.get(a.tool, "amount")
        amount = float(a.arguments.get(key, 0.0))
        token = _token_of(a)
        for c in strategy.constraints:
            if c.kind == "cap" and c.tool == a.tool and (c.token is None or c.token == token) and c.amount:
                cap = c.amount.value / 100.0 * _basis(a.tool, token, book) if c.amount.percent else c.amount.value
                amount = min(amount, max(cap * (1 - 1e-6) - used.get(f"{a.tool}:{token}", 0.0), 0.0))
        if amount <= 0:
            continue
        used[f"{a.tool}:{token}"] = used.get(f"{a.tool}:{token}", 0.0) + amount
        out.append(a.model_copy(update={"action_index": len(out), "arguments": {**a.arguments, key: round(amount, 8)}}))
    return out


def settlement_deliberation(obs: Observation, config, strategy=None) -> "Deliberation":
    """A settlement tick's decision: the next unwind step, as a DeliberationRecord the record shows."""
    from golem.models.enums import Tier
    from golem.models.record import DeliberationRecord, ToolCallRecord
    from golem.models.tick import Deliberation

    acts, left = settlement_actions(obs, config.policy.approved_assets, config.policy.max_trade_size_usd)
    acts = within_caps(acts, strategy, obs)
    decision = ("settlement: " + ", ".join(f"{a.tool} {a.arguments}" for a in acts) if acts
                else "settlement: nothing left to unwind")
    if left:
        decision += "; open before this step: " + "; ".join(left)
    record = DeliberationRecord(model="thanatopsis-settlement", tier=Tier.T2, decision=decision, confidence=1.0,
                                recommends_action=bool(acts), reasoning_summary="Thanatopsis phase 2: unwind through "
                                "the normal write path (simulate, PolicyCage, execute, verify)",
                                tool_calls=[ToolCallRecord(tool_name=a.tool, arguments=a.arguments, rationale=a.rationale)
                                            for a in acts])
    return Deliberation(record=record, actions=acts)
