"""The hard limits of the safety and risk layers, their hash, and the one-way ratchet on changes.

`SafetyLimits` = golem.toml's [policy] (PolicySection) + the risk limits below. The LLM never sees a way to change
them, and PLAYBOOK evolution may only tighten them: `check_limit_change` refuses a change that widens a limit and
`check_playbook_delta` a PLAYBOOK.md rewrite that drops or loosens a MUST line. See docs/design/safety.md.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from pydantic import BaseModel, Field

from golem.models.config import GolemConfig, PolicySection


class RiskLimits(BaseModel):
    """Risk-layer limits. Read from golem.toml [policy] when the lead adds these keys there; the
    defaults apply until then."""

    model_config = {"extra": "forbid"}
    # 1–50 %, as strategy validation checks it (docs/design/safety.md#strategy-validation)
    max_drawdown_pct: float = Field(default=20.0, ge=1.0, le=50.0)
    # the gas partition (docs/design/safety.md#the-gas-partition)
    gas_budget_usd_per_day: float = Field(default=10.0, ge=0.0)
    gas_spike_multiple: float = Field(default=2.0, gt=1.0)  # defer above 2× the usual cost
    # The emergency slice of the gas partition, ring-fenced for protective actions (golem.safety.gas): routine
    # actions stop once the day's gas reaches (1 − this) × the budget. 20 % is the credit-balance probe's Low
    # line (partition < 20 %): routine spending ends where the probe starts warning. The ≤ 0.9 bound is ours
    # (a routine share of at least 10 % keeps the limit meaningful).
    gas_emergency_fraction: float = Field(default=0.2, ge=0.0, le=0.9)
    hf_hard_floor: float = Field(default=1.1, ge=1.0)  # hard shield: never act into HF below this
    oracle_deviation_halt_bps: float = Field(default=500.0, gt=0.0)  # the circuit breaker's halt line
    kelly_fraction: float = Field(default=0.5, gt=0.0, le=1.0)  # half-Kelly
    kelly_min_outcomes: int = Field(default=10, ge=2)  # Kelly only once the data supports it
    guardrail_min_outcomes: int = Field(default=5, ge=1)
    guardrail_failure_rate: float = Field(default=0.5, gt=0.0, le=1.0)
    max_consecutive_losses: int = Field(default=3, ge=1)


class SafetyLimits(BaseModel):
    policy: PolicySection
    risk: RiskLimits = Field(default_factory=RiskLimits)
    kill_switch_path: str = "/tmp/golem_killswitch"

    @classmethod
    def from_config(cls, config: GolemConfig) -> "SafetyLimits":
        policy = config.policy
        known = set(PolicySection.model_fields)
        base = PolicySection.model_validate({k: getattr(policy, k) for k in known})
        risk = {k: getattr(policy, k) for k in RiskLimits.model_fields if hasattr(policy, k)}
        return cls(policy=base, risk=RiskLimits(**risk), kill_switch_path=config.probes.kill_switch_path)

    def policy_hash(self) -> str:
        """sha256 of every limit, canonical JSON; permits carry it, so a permit issued under other
        limits is recognisably stale."""
        body = {"policy": self.policy.model_dump(mode="json"), "risk": self.risk.model_dump(mode="json")}
        return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


# Direction in which each numeric limit is *tighter*: "down" means a smaller value is stricter.
TIGHTER: dict[str, str] = {
    "max_trade_size_usd": "down",
    "max_slippage_bps": "down",
    "max_price_impact_bps": "down",
    "min_trade_usd": "up",  # a larger minimum refuses more clipped actions
    "min_trade_gas_multiple": "up",
    "gas_ceiling_per_action_usd": "down",
    "gas_ceiling_share_of_protected": "down",
    "gas_ceiling_per_day_usd": "down",
    "max_drawdown_pct": "down",
    "gas_budget_usd_per_day": "down",
    "gas_spike_multiple": "down",
    "gas_emergency_fraction": "up",  # a larger reserve leaves routine actions less
    "oracle_deviation_halt_bps": "down",
    "kelly_fraction": "down",
    "max_consecutive_losses": "down",
    "guardrail_failure_rate": "down",
    "hf_hard_floor": "up",
    "kelly_min_outcomes": "up",
    "guardrail_min_outcomes": "up",
    "approval_ttl_ticks": "down",  # a request that waits less asks the owner for less
    "max_sandwich_loss_bps": "down",
    "threat_move_bps": "down",  # a smaller move already counts as a threat
    "threat_window_blocks": "up",  # more blocks read back see more
}


class LimitChange(BaseModel):
    ok: bool
    refused: list[str] = []  # one line per widened limit, naming it and both values
    applied: dict[str, Any] = {}  # the tightenings that may be applied


def _flat(limits: SafetyLimits | dict[str, Any]) -> dict[str, Any]:
    if isinstance(limits, SafetyLimits):
        # every field, the late policy keys too (model_dump leaves those out at their defaults)
        return {**{k: getattr(limits.policy, k) for k in PolicySection.model_fields}, **limits.risk.model_dump()}
    out: dict[str, Any] = {}
    for k, v in limits.items():
        if isinstance(v, dict) and k in ("policy", "risk"):
            out.update(v)
        else:
            out[k] = v
    return out


def check_limit_change(current: SafetyLimits, proposed: dict[str, Any], *, source: str = "proposal") -> LimitChange:
    """Refuse every change that would widen a limit; keep the tightenings. Unknown keys are refused
    too (a limit nobody enforces is not a limit)."""
    cur = _flat(current)
    refused: list[str] = []
    applied: dict[str, Any] = {}
    for key, new in _flat(proposed).items():
        if key not in cur:
            refused.append(f"{source}: unknown limit {key!r}; limits are {', '.join(sorted(cur))}")
            continue
        old = cur[key]
        if key == "approved_assets":
            if not isinstance(new, (list, tuple)):
                refused.append(f"{source}: approved_assets must be a list of symbols")
                continue
            added = sorted({str(a).upper() for a in new} - {a.upper() for a in old})
            if added:
                refused.append(f"{source}: approved_assets may not grow (would add {', '.join(added)})")
            elif {str(a).upper() for a in new} != {a.upper() for a in old}:
                applied[key] = [str(a).upper() for a in new]
            continue
        if key == "privileged_tools":  # the grant: a tool taken back may not be handed out again here
            if not isinstance(new, (list, tuple)):
                refused.append(f"{source}: privileged_tools must be a list of write tools")
            elif set(old) - set(new):
                refused.append(f"{source}: privileged_tools may not shrink (would grant "
                               f"{', '.join(sorted(set(old) - set(new)))} without approval)")
            elif set(new) != set(old):
                applied[key] = list(new)
            continue
        if isinstance(new, bool) or not isinstance(new, (int, float)):
            refused.append(f"{source}: {key} must be a number, got {new!r}")
            continue
        direction = TIGHTER.get(key)
        wider = (new > old) if direction == "down" else (new < old)
        if wider:
            refused.append(f"{source}: {key} {old:g} → {new:g} would widen the limit; only tightening is allowed")
        elif new != old:
            applied[key] = new
    return LimitChange(ok=not refused, refused=refused, applied=applied)


def tightened(current: SafetyLimits, change: LimitChange) -> SafetyLimits:
    """The limits with the accepted tightenings applied (never a widening)."""
    pol = {k: v for k, v in change.applied.items() if k in PolicySection.model_fields}
    risk = {k: v for k, v in change.applied.items() if k in RiskLimits.model_fields}
    return SafetyLimits(
        policy=current.policy.model_copy(update=pol),
        risk=current.risk.model_copy(update=risk),
        kill_switch_path=current.kill_switch_path,
    )


_MUST = re.compile(r"^\s*[-*+]\s+(MUST\b.*)$", re.I | re.M)
_LIMIT_LINE = re.compile(r"^\s*[-*+]?\s*(?:limit|policy)[.:]\s*([a-z_]+)\s*[:=]\s*(\S+)", re.I | re.M)
_KEEP = re.compile(r"^MUST\s+keep\s+(\S+)\s*(<=|>=|<|>|==)\s*(\S+)$", re.I)


def _musts(text: str) -> dict[str, str]:
    return {" ".join(m.split()).lower(): m.strip() for m in _MUST.findall(text or "")}


def check_playbook_delta(old_text: str, new_text: str, current: SafetyLimits | None = None) -> LimitChange:
    """A PLAYBOOK.md rewrite may add MUST lines and tighten them, never drop or loosen one, and any
    `limit.<key> = value` line it carries must not widen `current`."""
    refused: list[str] = []
    old, new = _musts(old_text), _musts(new_text)
    new_keeps = {}
    for norm, line in new.items():
        m = _KEEP.match(line)
        if m:
            new_keeps[(m[1].lower(), m[2])] = (float(m[3].replace("_", "")) if _num(m[3]) else None, line)
    for norm, line in old.items():
        if norm in new:
            continue
        m = _KEEP.match(line)
        if m and _num(m[3]):
            metric, op, value = m[1].lower(), m[2], float(m[3].replace("_", ""))
            repl = new_keeps.get((metric, op))
            if repl and repl[0] is not None:
                stricter = repl[0] >= value if op in (">=", ">") else repl[0] <= value
                if stricter:
                    continue
                refused.append(f"PLAYBOOK delta loosens `{line}` to `{repl[1]}`")
                continue
        refused.append(f"PLAYBOOK delta removes the safety constraint `{line}`")
    applied: dict[str, Any] = {}
    if current is not None:
        proposed = {k: _coerce(v) for k, v in _LIMIT_LINE.findall(new_text or "")}
        if proposed:
            change = check_limit_change(current, proposed, source="PLAYBOOK delta")
            refused += change.refused
            applied = change.applied
    return LimitChange(ok=not refused, refused=refused, applied=applied)


def _num(s: str) -> bool:
    try:
        float(s.replace("_", ""))
        return True
    except ValueError:
        return False


def _coerce(raw: str) -> Any:
    return float(raw.replace("_", "")) if _num(raw) else raw
