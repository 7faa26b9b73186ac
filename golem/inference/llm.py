"""LLMDeliberator: the Deliberator that thinks with Claude (golem/deliberators.py picks one).

route(): tier → model under today's budget, before the prompt exists. decide(): assemble the workspace → price the
built request against the daily cap → one Messages call with the decision tools → parse and check the tool calls →
Deliberation. When the budget forbids the call the offline deliberator answers and the record says why. A steer
cancels the decide activity and re-runs it with the steer appended. See docs/design/inference.md.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Protocol

from golem.inference.budget import daily_spend_on
from golem.inference.config import InferenceConfig
from golem.inference.decision import decision_tools, parse_decision
from golem.inference.deliberator import Deliberator, Route
from golem.inference.offline import MODEL_NAME as OFFLINE_MODEL
from golem.inference.offline import OfflineDeliberator
from golem.inference.router import BudgetRefusal, ProviderRouter
from golem.inference.strategy import Strategy
from golem.inference.workspace import Workspace, WorkspaceSources, assemble_workspace, request_tokens
from golem.models.enums import Tier
from golem.models.record import DeliberationRecord, ToolCallRecord
from golem.models.tick import DecideInput, Deliberation


def _optional(model_cls: type, values: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Add `extra` keys the model already declares (fields the lead may add later); drop the rest."""
    return {**values, **{k: v for k, v in extra.items() if k in model_cls.model_fields}}


class WorkspaceContext(Protocol):
    """The workspace's file-backed sources (golem/deliberators.py reads them from the home and the data dir)."""

    def standing_orders(self) -> str: ...
    def topology(self, block: int) -> str: ...
    def allocations(self, tier: Tier) -> dict[str, int] | None: ...
    def conversation_tail(self, n: int) -> list[tuple[str, str]]: ...


class NoContext:
    """No home and no data dir: no standing orders, topology, learned allocations or conversation."""

    def standing_orders(self) -> str:
        return ""

    def topology(self, block: int) -> str:
        return ""

    def allocations(self, tier: Tier) -> dict[str, int] | None:
        return None

    def conversation_tail(self, n: int) -> list[tuple[str, str]]:
        return []


class LLMDeliberator:
    """Deliberator over ProviderRouter (see module docstring)."""

    def __init__(self, router: ProviderRouter, *, context: WorkspaceContext | None = None,
                 fallback: Deliberator | None = None) -> None:
        self.router = router
        self.context: WorkspaceContext = context or NoContext()
        self.fallback = fallback or OfflineDeliberator()

    @property
    def config(self) -> InferenceConfig:
        return self.router.config

    @property
    def model(self) -> str:
        return self.config.t2_model

    def workspace(self, inp: DecideInput, strategy: Strategy, playbook_text: str) -> Workspace:
        sources = WorkspaceSources(
            strategy=strategy,
            playbook_text=playbook_text,
            standing_orders=self.context.standing_orders(),
            conversation_tail=self.context.conversation_tail(self.config.conversation_tail),
            topology=self.context.topology(inp.observation.snapshot.block_number),
        )
        return assemble_workspace(inp, sources, self.context.allocations(inp.tier) or self.config.allocations(inp.tier))

    def route(self, inp: DecideInput) -> Route:
        """before_agent_start's model-router member: tier → model under today's spend (router.choose_model);
        a budget refusal routes to the offline deliberator."""
        now = inp.ctx.started_at or datetime.now(timezone.utc).isoformat()
        try:
            choice = self.router.choose(inp.tier, daily_spend_on(inp.ctx.state, now))
        except BudgetRefusal as refusal:
            return Route(model=OFFLINE_MODEL, why=refusal.reason)
        return Route(model=choice.model, choice=choice)

    async def decide(self, inp: DecideInput, strategy: Strategy, playbook_text: str, *,
                     tools: list[dict[str, Any]] | None = None, route: Route | None = None) -> Deliberation:
        route = route or self.route(inp)
        tools = decision_tools(inp.ctx.config.policy.approved_assets) if tools is None else tools
        ws = self.workspace(inp, strategy, playbook_text)
        if route.choice is None:
            return await self._fallback(inp, strategy, playbook_text, route.why, ws)
        try:  # the token-based part of the route: the built request's worst case against the daily cap
            plan = self.router.price(route.choice, request_tokens(ws.system, ws.messages, tools))
        except BudgetRefusal as refusal:
            return await self._fallback(inp, strategy, playbook_text, refusal.reason, ws)

        completion = await self.router.complete(
            plan, system=ws.system, messages=ws.messages, tools=tools, tool_choice={"type": "any"},
        )
        parsed = parse_decision(list(completion.message.content), inp.ctx.config.policy.approved_assets)
        if completion.message.stop_reason == "max_tokens":
            parsed.rejections.append("reply cut off at max_tokens; raise [inference] max_output_tokens if this repeats")

        lead: list[str] = []
        if ws.interrupting_steers:
            lead.append("Deciding.Interrupted{steer_id=" + ",".join(ws.interrupting_steers)
                        + "}: the earlier request was cancelled and re-prompted with the steer.")
        lead += plan.notes
        tail: list[str] = []
        if parsed.rejections:
            tail.append("Rejected: " + "; ".join(parsed.rejections) + ".")
        if ws.truncated:
            tail.append("Workspace truncated to allocation: " + ", ".join(ws.truncated) + ".")
        summary = " ".join([*lead, parsed.reasoning_summary or "(no reasoning given)", *tail])
        if parsed.actions:
            decision = parsed.decision or "; ".join(f"{a.tool} {a.arguments}" for a in parsed.actions)
        else:
            decision = "hold: " + (parsed.decision or ("answer rejected" if parsed.rejections else "no action recommended"))
        base = dict(
            model=completion.model,
            tier=inp.tier,
            input_tokens=completion.input_tokens,
            output_tokens=completion.output_tokens,
            cache_read_tokens=completion.cache_read_tokens,
            reasoning_summary=summary,
            tool_calls=[ToolCallRecord(tool_name=a.tool, arguments=a.arguments, rationale=a.rationale)
                        for a in parsed.actions],
            decision=decision,
            confidence=parsed.confidence,
            latency_ms=completion.latency_ms,
            cost=round(completion.cost, 8),
            recommends_action=parsed.recommends_action and bool(parsed.actions),
            steers_considered=[s.id for s in inp.steers],
        )
        record = DeliberationRecord(**_optional(DeliberationRecord, base, {
            "cache_creation_tokens": completion.cache_creation_tokens,
            "rejections": parsed.rejections,
            "interrupted_by": ws.interrupting_steers,
        }))
        return Deliberation(**_optional(Deliberation, {"record": record, "actions": parsed.actions},
                                        {"context": ws.summary(), "kg_facts": parsed.facts}))

    async def _fallback(self, inp: DecideInput, strategy: Strategy, playbook_text: str, reason: str,
                        ws: Workspace) -> Deliberation:
        delib = await self.fallback.decide(inp, strategy, playbook_text)
        delib.record.reasoning_summary = f"LLM not called ({reason}); offline deliberator answered. " + \
            delib.record.reasoning_summary
        return delib


def describe_tiers(cfg: InferenceConfig) -> dict[Tier, str]:
    return {Tier.T1: cfg.t1_model, Tier.T2: cfg.t2_model}
