"""The hooks fire the registry's members in their declared order: tool_call in the write
path (telemetry → safety → risk → permits → coordination; the first block wins), before_agent_start before
decide (tools → context → compiler → model-router → safety)."""

from __future__ import annotations

import dataclasses

from golem.extensions import ExtensionRegistry, builtin_extensions, registry_for
from golem.extensions.hooks import fire
from golem.safety.cage import SafetyCage
from golem.safety.constraints import Book
from tests.unit.test_safety_cage import LIMITS, ctx, sim_for, swap


def _decide(cage, action):
    c = ctx()
    decision, _ = cage.tool_call(action, c, sim_for(action), Book.of(c.observation.snapshot))
    return decision


def test_tool_call_fires_the_registry_members_in_the_spec_order():
    assert registry_for().order("tool_call") == ["telemetry", "safety", "risk", "permits"]  # coordination: not built
    d = _decide(SafetyCage(LIMITS), swap(1))
    assert d.allowed and d.hooks == ["telemetry", "safety", "risk", "permits"] and d.value_usd == 2000.0


def test_safetys_tool_call_refuses_and_the_members_after_it_do_not_run():
    d = _decide(SafetyCage(LIMITS), swap(100, "DAI", "USDC"))
    assert not d.allowed and d.blocked_by == "safety" and d.hooks == ["telemetry", "safety"]


def _with_coordination() -> ExtensionRegistry:
    reg = ExtensionRegistry()
    for ext in builtin_extensions():
        reg.register(dataclasses.replace(ext, present=True) if ext.name == "coordination" else ext)
    return reg.build()


def test_a_members_handler_changes_the_outcome_where_the_registry_puts_it():
    """A coordination extension in the build: its tool_call handler fires last and its refusal blocks the write;
    without it in the registry the same handler never runs."""
    seen = []

    def coordination(action, c, sim):
        seen.append(action.action_index)
        return "another golem of the clade holds this swap"

    cage = SafetyCage(LIMITS, _with_coordination(), extra_tool_call={"coordination": coordination})
    d = _decide(cage, swap(1))
    assert not d.allowed and d.blocked_by == "coordination" and "clade holds" in d.reason
    assert d.hooks == ["telemetry", "safety", "risk", "permits", "coordination"]
    assert [v.layer for v in d.verdicts] == ["safety", "risk", "permits", "coordination"]
    # a refusal before it: coordination does not run
    assert not _decide(cage, swap(100, "DAI", "USDC")).allowed and seen == [0]
    # not in this build's registry: the handler is ignored
    assert _decide(SafetyCage(LIMITS, extra_tool_call={"coordination": coordination}), swap(1)).allowed
    assert seen == [0]


def test_fire_runs_only_registered_members_in_order_and_stops_on_request():
    reg = registry_for()
    ran = []
    handlers = {n: (lambda n=n: ran.append(n) or (n == "compiler")) for n in
                ("safety", "compiler", "tools", "context", "model-router", "nonexistent")}
    fired, results = fire(reg, "before_agent_start", handlers)
    assert fired == ran == ["tools", "context", "compiler", "model-router", "safety"]
    ran.clear()
    fired, _ = fire(reg, "before_agent_start", handlers, stop=bool)
    assert fired == ["tools", "context", "compiler"]


def test_before_agent_start_runs_its_five_members_in_order_and_a_bad_strategy_stops_it():
    import pytest

    from golem.extensions.agent_start import before_agent_start

    ran = []
    out = before_agent_start(registry_for(), tools=lambda: ran.append("tools") or ["swap"],
                             context=lambda: ran.append("context") or "policy",
                             compile=lambda: ran.append("compile") or "strategy",
                             viability=lambda s: ran.append(f"viability:{s}") or "viable",
                             route=lambda: ran.append("route") or "claude-haiku-4-5",
                             safety=lambda s: ran.append(f"safety:{s}") or "gate")
    assert ran == ["tools", "context", "compile", "viability:strategy", "route", "safety:strategy"]
    assert out.fired == ["tools", "context", "compiler", "model-router", "safety"]
    assert (out.tools, out.context_policy, out.route, out.must) == (["swap"], "policy", "claude-haiku-4-5", "gate")

    def bad():
        raise ValueError("STRATEGY.md: no rules")

    ran.clear()
    with pytest.raises(ValueError, match="no rules"):
        before_agent_start(registry_for(), tools=lambda: ran.append("tools"), context=lambda: ran.append("context"),
                           compile=bad, viability=lambda s: ran.append("viability"),
                           route=lambda: ran.append("route"), safety=lambda s: ran.append("safety"))
    assert ran == ["tools", "context"]  # neither the router nor safety ran on a strategy that does not compile


async def test_fire_async_awaits_each_member_in_order_and_skips_the_unregistered():
    """on_end (lifespan: Thanatopsis) and send_message (intervention: deliver the signal) await their handlers."""
    from golem.extensions.hooks import fire_async

    ran = []

    async def member(name):
        ran.append(name)
        return name

    reg = registry_for()
    fired, results = await fire_async(reg, "on_end", {"lifespan": lambda: member("lifespan"),
                                                      "clade": lambda: member("clade")})
    assert fired == ran == ["lifespan"] and results == [("lifespan", "lifespan")]
    assert reg.order("steer") == reg.order("send_message") == ["intervention"]
