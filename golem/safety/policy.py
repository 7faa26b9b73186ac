"""PolicyCage: hard limits every write must pass (the safety member of the validate chain). The deliberator can
never widen them: they come from golem.toml's [policy] section, and the permit of every approved action records the
hash of the policy it was checked against. Order for one action: schema → policy → simulation ok → permit.
See docs/design/safety.md#the-validate-chain.
"""

from __future__ import annotations

import hashlib
import json

from pydantic import BaseModel

from golem.chain.tools.arguments import action_tokens, parse_arguments
from golem.chain.tools.schemas import STABLE_TOKENS, WRITE_TOOLS, ToolArgumentError
from golem.chain.tools.valuation import action_value_usd
from golem.models.config import PolicySection
from golem.models.enums import BehavioralPhase, SteerSeverity
from golem.models.interventions import Steer
from golem.models.observation import ChainSnapshot, Observation
from golem.models.tick import ProposedAction
from golem.safety.sizing import price_impact

# "Conservation phase blocks new position entry" (and every phase below it).
RESTRICTED_PHASES: frozenset[BehavioralPhase] = frozenset(
    {BehavioralPhase.CONSERVATION, BehavioralPhase.DECLINING, BehavioralPhase.TERMINAL}
)
# Tools that open or grow a position (add_liquidity opens a pool position exposed to both assets and
# to impermanent loss; remove_liquidity, withdraw and repay reduce exposure).
_NEW_POSITION_TOOLS = frozenset({"supply", "borrow", "add_liquidity"})


# The position probe's Low line: a health factor below 1.5. From there on, cutting debt or
# exposure is protection, not trading.
HF_AT_RISK = 1.5


class PolicyVerdict(BaseModel):
    ok: bool
    reason: str


def opens_exposure(action: ProposedAction) -> bool:
    """Does the action enter or grow a position? supply/borrow/add_liquidity do; a swap does when it
    buys a volatile asset (selling a stable for WETH raises market exposure; WETH→USDC lowers it)."""
    if action.tool in _NEW_POSITION_TOOLS:
        return True
    if action.tool == "swap":
        args = parse_arguments(action.tool, action.arguments)
        return args["token_out"] not in STABLE_TOKENS
    return False


def protective_reason(action: ProposedAction, snapshot: ChainSnapshot, steers: list[Steer]) -> str | None:
    """Why `action` is protective, or None when it is routine — the one definition the gas gate's
    emergency slice uses. It reads only the tool, the chain state and the owner's steers, never anything the
    model wrote (its rationale, its wording), so a deliberator cannot talk a routine trade past the budget:
      - every action of a tick steered by the owner at severity high or critical;
      - repay while there is debt (it only lowers the debt);
      - with a lending health factor below HF_AT_RISK: supply (more collateral), remove_liquidity (frees
        assets to repay with) and a swap into a stable (sells exposure; opens_exposure is False).
    withdraw, borrow and add_liquidity are never protective."""
    steer = max((s for s in steers if s.severity.rank >= SteerSeverity.HIGH.rank), key=lambda s: s.severity.rank,
                default=None)
    if steer is not None:
        return f"owner steer {steer.id} ({steer.severity.value}) governs this tick"
    lending = [p for p in snapshot.positions if p.kind == "lending"]
    debt = sum(p.debt for p in lending)
    if action.tool == "repay" and debt > 0:
        return f"repay lowers the debt ({debt:,.2f} outstanding)"
    hfs = [p.health_factor for p in lending if p.health_factor is not None]
    if not hfs or min(hfs) >= HF_AT_RISK:
        return None
    at_risk = f"health factor {min(hfs):.3f} < {HF_AT_RISK:g}"
    if action.tool == "supply":
        return f"supply adds collateral at {at_risk}"
    if action.tool == "remove_liquidity":
        return f"remove_liquidity frees assets to repay with at {at_risk}"
    if action.tool == "swap":
        try:
            if not opens_exposure(action):
                return f"swap into a stable sells exposure at {at_risk}"
        except ToolArgumentError:
            return None
    return None


class PolicyCage:
    def __init__(self, policy: PolicySection) -> None:
        self.policy = policy
        self._approved = frozenset(a.upper() for a in policy.approved_assets)

    def policy_hash(self) -> str:
        """sha256 of the canonical policy JSON (sorted keys, no whitespace)."""
        canonical = json.dumps(self.policy.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()

    def check(self, action: ProposedAction, observation: Observation, phase: BehavioralPhase) -> PolicyVerdict:
        """One action against the cage; the reason names the limit hit and the numbers."""
        if action.tool not in WRITE_TOOLS:
            return PolicyVerdict(
                ok=False, reason=f"unknown tool {action.tool!r}: only {', '.join(sorted(WRITE_TOOLS))} may write"
            )
        try:
            args = parse_arguments(action.tool, action.arguments)
        except ToolArgumentError as e:
            return PolicyVerdict(ok=False, reason=f"invalid arguments: {e}")

        approved = sorted(self._approved)
        for token in action_tokens(action):
            if token not in self._approved:
                return PolicyVerdict(
                    ok=False, reason=f"asset {token} is not in approved_assets [{', '.join(approved)}]"
                )

        value = action_value_usd(action, observation)
        if value > self.policy.max_trade_size_usd:
            return PolicyVerdict(
                ok=False,
                reason=(
                    f"trade value ${value:,.2f} exceeds max_trade_size_usd ${self.policy.max_trade_size_usd:,.2f}"
                ),
            )

        if action.tool in ("swap", "add_liquidity"):
            slip = args["max_slippage_bps"]
            if slip > self.policy.max_slippage_bps:
                return PolicyVerdict(
                    ok=False,
                    reason=f"max_slippage_bps {slip:g} exceeds the policy limit of {self.policy.max_slippage_bps:g} bps",
                )

        if action.tool == "swap":
            pool = observation.snapshot.pool
            if {args["token_in"], args["token_out"]} == {pool.token0.upper(), pool.token1.upper()}:
                reserve_in = pool.reserve0 if args["token_in"] == pool.token0.upper() else pool.reserve1
                impact = price_impact(float(args["amount_in"]), reserve_in) * 1e4
                if impact > self.policy.max_price_impact_bps * (1 + 1e-9):
                    return PolicyVerdict(ok=False, reason=(
                        f"price impact {impact:.0f} bps against the pair's {reserve_in:,.6g} {args['token_in']} "
                        f"reserve exceeds max_price_impact_bps {self.policy.max_price_impact_bps:g}"))

        if phase in RESTRICTED_PHASES and opens_exposure(action):
            return PolicyVerdict(
                ok=False,
                reason=(
                    f"{phase.value} phase blocks new positions: {action.tool} "
                    f"{_describe(action)} would increase exposure"
                ),
            )

        return PolicyVerdict(ok=True, reason=f"within policy: ${value:,.2f} ≤ ${self.policy.max_trade_size_usd:,.2f}")


def _describe(action: ProposedAction) -> str:
    a = action.arguments
    if action.tool == "swap":
        return f"{a.get('amount_in')} {a.get('token_in')}→{a.get('token_out')}"
    if action.tool == "add_liquidity":
        return f"{a.get('amount_weth')} WETH + {a.get('amount_usdc')} USDC"
    if action.tool == "remove_liquidity":
        return f"{a.get('fraction')} of the pool shares"
    return str(a.get("amount"))
