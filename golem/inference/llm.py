"""LLMDeliberator: the Deliberator that thinks with Claude (golem/deliberators.py picks one).

route(): tier → model under today's budget, before the prompt exists. decide(): assemble the workspace → the tool
loop (reads and speculation for a few rounds, each call priced against the daily cap) → a reply with the decision
tools → parse and check the tool calls → Deliberation. When the budget forbids a call the offline deliberator
answers and the record says why. A steer cancels the decide activity and re-runs it with the steer appended.
See docs/design/inference.md.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Protocol

from pydantic import BaseModel

from golem.extensions.hooks import fire
from golem.extensions.registry import registry_for
from golem.inference.budget import daily_spend_on
from golem.inference.config import InferenceConfig
from golem.inference.decision import decision_tools, parse_decision
from golem.inference.deliberator import Deliberator, Route, ToolReads
from golem.inference.mental_models import CORE_MODELS
from golem.inference.offline import MODEL_NAME as OFFLINE_MODEL
from golem.inference.offline import OfflineDeliberator
from golem.inference.router import BudgetRefusal, Completion, ModelChoice, PaymentRefused, ProviderRouter
from golem.inference.tool_loop import LoopCutShort, run_tool_loop, total
from golem.inference.turn_context import disclose
from golem.inference.strategy import Strategy
from golem.inference.workspace import Workspace, WorkspaceSources, assemble_workspace
from golem.models.approvals import PrivilegedRequest
from golem.models.enums import Tier
from golem.models.record import DeliberationRecord, ReadCallRecord, ToolCallRecord
from golem.models.tick import DecideInput, Deliberation, whole


def _optional(model_cls: type[BaseModel], values: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
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
            topology=self.context.topology(whole(inp.observation, "observation").snapshot.block_number),
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
                     tools: list[dict[str, Any]] | None = None, route: Route | None = None,
                     reads: ToolReads | None = None) -> Deliberation:
        route = route or self.route(inp)
        policy = inp.ctx.cfg.policy
        seen = whole(inp.observation, "observation").strategies
        active = seen.active if seen is not None else []  # decide.strategy may name these
        tools = decision_tools(policy.approved_assets, list(policy.privileged_tools), active) if tools is None else tools
        ws = self.workspace(inp, strategy, playbook_text)
        if route.choice is None:
            return await self._fallback(inp, strategy, playbook_text, route.why, ws)
        rounds = self.config.tool_rounds(inp.tier)
        messages, context = ws.messages, list[str]()
        if reads is not None and rounds > 0 and ws.held:  # progressive disclosure (golem.inference.turn_context)
            context, disclosed = fire(registry_for(inp.ctx.cfg.extensions.disabled), "context",
                                      {"turn-context": lambda: disclose(ws, reads)})
            if disclosed:
                messages, reads = disclosed[0][1]

        async def loop_with(choice: ModelChoice) -> Any:
            return await run_tool_loop(self.router, choice, system=ws.system, messages=messages,
                                       decision_tools=tools, reads=reads, rounds=rounds,
                                       max_tokens=self.config.tool_loop_max_tokens,
                                       result_filter="result-filter" not in inp.ctx.cfg.extensions.disabled)

        refused: list[str] = []
        try:  # each call's built request, worst case, against the daily cap (with what the loop already spent)
            try:
                loop = await loop_with(route.choice)
            except PaymentRefused as refusal:  # x402: a quote refused before anything was paid; a cheaper tier may fit
                cheaper = cheaper_choice(route.choice, self.config)
                if cheaper is None:
                    raise
                refused.append(f"{refusal.reason}; the cheaper {cheaper.model} thought instead")
                loop = await loop_with(cheaper)
        except BudgetRefusal as refusal:
            return await self._fallback(inp, strategy, playbook_text, "; ".join([*refused, refusal.reason]), ws)
        except LoopCutShort as cut:
            return self._spent(await self._fallback(inp, strategy, playbook_text, cut.reason, ws, reads=reads,
                                                    called=True), cut.completions, cut.reads)
        completion, plan = loop.final, loop.final.plan
        offered = set(CORE_MODELS) | {e.id for e in (inp.retrieved.entries if inp.retrieved else [])}
        parsed = parse_decision(loop.content, policy.approved_assets, offered, list(policy.privileged_tools), active)
        requests = [PrivilegedRequest(id=f"apr-{inp.ctx.tick}-{i}", tick=inp.ctx.tick, tool=tool, arguments=args,
                                      reason=why) for i, (tool, args, why) in enumerate(parsed.requests)]
        if completion.message.stop_reason == "max_tokens":
            parsed.rejections.append("reply cut off at max_tokens; raise [inference] max_output_tokens if this repeats")

        lead: list[str] = []
        if ws.interrupting_steers:
            lead.append("Deciding.Interrupted{steer_id=" + ",".join(ws.interrupting_steers)
                        + "}: the earlier request was cancelled and re-prompted with the steer.")
        lead += [*plan.notes, *refused]
        if requests:
            lead.append("Asked the owner: " + "; ".join(f"{r.id} {r.tool} {r.arguments}" for r in requests) + ".")
        if loop.reads:
            lead.append(f"Read {len(loop.reads)} time(s) in {len(loop.completions)} call(s): "
                        + ", ".join(r.tool_name for r in loop.reads) + ".")
        lead += loop.notes
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
            input_tokens=loop.total("input_tokens"),  # the whole loop: every call is paid for
            output_tokens=loop.total("output_tokens"),
            cache_read_tokens=loop.total("cache_read_tokens"),
            reasoning_summary=summary,
            tool_calls=[ToolCallRecord(tool_name=a.tool, arguments=a.arguments, rationale=a.rationale)
                        for a in parsed.actions],
            decision=decision,
            confidence=parsed.confidence,
            latency_ms=round(loop.total("latency_ms"), 3),
            cost=round(loop.total("cost"), 8),
            recommends_action=parsed.recommends_action and bool(parsed.actions),
            steers_considered=[s.id for s in inp.steers],
        )
        record = DeliberationRecord(**_optional(DeliberationRecord, base, {
            "cache_creation_tokens": loop.total("cache_creation_tokens"),
            "reads": loop.reads,
            "tool_rounds": len(loop.completions),
            "mental_models": parsed.mental_models,
            "rejections": parsed.rejections,
            "interrupted_by": ws.interrupting_steers,
            **_paid(loop.completions),
            "privileged_requests": requests,
            "strategy": parsed.strategy,
            "context": context,
            "held_back": sorted(ws.held) if context else [],
        }))
        return Deliberation(**_optional(Deliberation, {"record": record, "actions": parsed.actions},
                                        {"context": ws.summary(), "kg_facts": parsed.facts, "requests": requests}))

    async def _fallback(self, inp: DecideInput, strategy: Strategy, playbook_text: str, reason: str,
                        ws: Workspace, reads: ToolReads | None = None, called: bool = False) -> Deliberation:
        delib = await self.fallback.decide(inp, strategy, playbook_text, reads=reads)
        said = "LLM stopped before deciding" if called else "LLM not called"
        delib.record.reasoning_summary = f"{said} ({reason}); offline deliberator answered. " + \
            delib.record.reasoning_summary
        return delib

    @staticmethod
    def _spent(delib: Deliberation, completions: list[Completion], reads: list[ReadCallRecord]) -> Deliberation:
        """The offline answer after a cut-short loop still carries what the loop's calls cost and read."""
        usage = {k: total(completions, k)
                 for k in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens")}
        record = delib.record.model_copy(update={
            **usage, "cost": round(total(completions, "cost"), 8), "tool_rounds": len(completions),
            "reads": [*reads, *delib.record.reads], **_paid(completions)})
        return delib.model_copy(update={"record": record})


def cheaper_choice(choice: ModelChoice, cfg: InferenceConfig) -> ModelChoice | None:
    """The cheaper tier's model for a call whose x402 quote was refused (None: already the cheapest). Pure."""
    if choice.model == cfg.t1_model:
        return None
    return ModelChoice(tier=choice.tier, model=cfg.t1_model, max_tokens=cfg.max_output_tokens(Tier.T1),
                       daily_spend=choice.daily_spend, notes=choice.notes)


def _paid(completions: list[Completion]) -> dict[str, Any]:
    """The record's x402 part: every payment of the loop's calls, and the before_provider_request members that ran
    (empty when nothing fired: no payer)."""
    fired = next((c.before_provider_request for c in completions if c.before_provider_request), [])
    return {"payments": [p for c in completions for p in c.payments], "before_provider_request": list(fired)}


def describe_tiers(cfg: InferenceConfig) -> dict[Tier, str]:
    return {Tier.T1: cfg.t1_model, Tier.T2: cfg.t2_model}
