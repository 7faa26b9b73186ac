"""Reflexion after an acted tick and the credit it gives.

Compare the decision's stated expectation with the verified outcome, ask the counterfactuals (not acting;
half size), and word one insight candidate that carries the numbers; the reflect activity offers it to the
admission gate at confidence 0.5. Offline the text is deterministic. See docs/design/learning.md#predict-then-compare.
"""

from __future__ import annotations

from golem.models.record import (
    Counterfactual,
    CreditGiven,
    DecisionCycleRecord,
    ExpectedOutcome,
    OutcomeRecord,
    Reflexion,
    RuleApplied,
)

INSIGHT_CONFIDENCE = 0.5  # an insight from one tick is a hypothesis, not yet knowledge
HF_IMPROVED = 1e-4  # a health factor change below this is reading noise, not a risk metric that improved


def verdict_of(outcome: OutcomeRecord, failed: bool = False) -> str:
    """A positive outcome is "PnL > 0 or risk metric improved"; a failed action, an invariant violation or
    a loss without a safer position is negative; the rest (nothing measurable moved) is neutral. A tick still
    waiting for confirmations (verified False, nothing failed) is judged on the state verify re-read."""
    if failed or outcome.invariant_violations:
        return "negative"
    before, after = outcome.health_factor_before, outcome.health_factor_after
    improved = before is not None and (after is None or after > before + HF_IMPROVED)  # None after: debt repaid
    if (outcome.pnl_impact or 0.0) > 0 or improved:
        return "positive"
    if outcome.pnl_impact is not None and outcome.pnl_impact < 0:
        return "negative"
    return "neutral"


def _hf(v: float | None) -> str:
    return "none (no debt)" if v is None else f"{v:.3f}"


def reflect_on(record: DecisionCycleRecord, expected: ExpectedOutcome, half: ExpectedOutcome,
               half_simulated: tuple[float | None, str] | None = None) -> Reflexion | None:
    """None when the tick did not act (nothing was sent) or nothing was verified. `half_simulated`: the half-size
    health factor simulated on the pre-tick block, and how (else the projection stands in, and says so)."""
    outcome = record.outcome
    sent = [a for a in record.actions if a.status.value in ("executed", "failed")]
    if outcome is None or not sent:
        return None
    verdict = verdict_of(outcome, failed=any(a.status.value == "failed" for a in sent))
    v_hf, v_val = outcome.health_factor_after, outcome.pnl_impact
    hf_err = (round(v_hf - expected.health_factor_after, 6)
              if v_hf is not None and expected.health_factor_after is not None else None)
    val_err = round(v_val - expected.value_change_usd, 6) if v_val is not None else None
    # Half size: the projection from the pre-tick state, scaled by how far the verified outcome was from the
    # full-size projection (the chain's own correction), value change linear in size.
    ratio = (v_hf / expected.health_factor_after
             if v_hf is not None and expected.health_factor_after else 1.0)
    half_hf = round(half.health_factor_after * ratio, 6) if half.health_factor_after is not None else None
    half_source = "projection from the pre-tick state, calibrated by the verified outcome"
    if half_simulated is not None:
        half_hf, half_source = (round(half_simulated[0], 6) if half_simulated[0] is not None else None), half_simulated[1]
    counterfactuals = [
        Counterfactual(label="not acting", health_factor_after=outcome.health_factor_before, value_change_usd=0.0,
                       source="pre-tick state re-read by verify"),
        Counterfactual(label="half size", health_factor_after=half_hf,
                       value_change_usd=round((v_val if v_val is not None else half.value_change_usd * 2) / 2, 6),
                       source=half_source),
    ]
    tools = ", ".join(a.tool_name for a in sent)
    text = (
        f"In a {record.regime.value.replace('_', ' ')} regime, acting ({tools}) at health factor "
        f"{_hf(outcome.health_factor_before)} was {verdict}: expected health factor {_hf(expected.health_factor_after)}, "
        f"verified {_hf(v_hf)}"
        + (f" (error {hf_err:+.3f})" if hf_err is not None else "")
        + f"; expected value change ${expected.value_change_usd:+.2f}, verified "
        + (f"${v_val:+.2f}" if v_val is not None else "unmeasured")
        + f". Not acting would have left health factor {_hf(outcome.health_factor_before)}; half size about "
        f"{_hf(half_hf)} and ${counterfactuals[1].value_change_usd:+.2f}."
    )
    return Reflexion(verdict=verdict, expected=expected, verified_health_factor=v_hf, verified_value_change_usd=v_val,
                     health_factor_error=hf_err, value_error_usd=val_err, counterfactuals=counterfactuals,
                     insight=text)


def evaluator_of(record: DecisionCycleRecord) -> str | None:
    """The evaluator's own verdict on the decision (good / neutral / bad), None when no evaluator model judged it
    (offline: the chain's metrics alone, which are the outcome itself, not a second opinion)."""
    return (record.evaluation or {}).get("evaluator_verdict")


def credit_weight(evaluator: str | None, verdict: str) -> int:
    """A loss the evaluator had judged a bad decision counts twice; every other credit once
    (docs/design/learning.md#credit-assignment)."""
    return 2 if verdict == "negative" and evaluator == "bad" else 1


def credit_for(record: DecisionCycleRecord, verdict: str) -> list[CreditGiven]:
    """The entries in this decision's workspace, credited by its verified outcome: semantic entries the
    retrieve step put there, and the learned PLAYBOOK rules that produced an action. Neutral: no credit. A loss the
    evaluator rejected weighs double."""
    sign = {"positive": 1, "negative": -1}.get(verdict)
    if sign is None:
        return []
    evaluator = evaluator_of(record)
    delta = sign * credit_weight(evaluator, verdict)
    word = ("strengthened" if delta > 0 else "weakened") + (" twice: the evaluator judged it bad" if abs(delta) > 1
                                                            else "")
    rules: list[RuleApplied] = record.deliberation.rules_applied if record.deliberation else []
    # a learned rule's admitted entry has the heuristic's id (playbook_view): retrieved too, it is credited once,
    # as the rule, and the Curator's vote reaches the entry
    learned = {r.entry_id for r in rules if r.origin == "learned" and r.entry_id}
    out = [CreditGiven(entry_id=e.id, kind="entry", delta=delta, reason=f"in the workspace; outcome {verdict}, {word}")
           for e in record.retrieved_entries if e.source == "entry" and e.id not in learned]
    seen = {c.entry_id for c in out}
    for r in rules:
        if r.origin == "learned" and r.entry_id and r.entry_id not in seen:
            seen.add(r.entry_id)
            out.append(CreditGiven(entry_id=r.entry_id, kind="heuristic", delta=delta,
                                   reason=f"learned rule {r.rule} produced action {r.action_index}; outcome {verdict}"))
    return out
