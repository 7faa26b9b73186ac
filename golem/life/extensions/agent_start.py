"""The before_agent_start hook in decide (runtime-extensions §3: tools → context → compiler → model-router →
safety), fired through the registry before the deliberator runs. The members with code at this point of the tick:

  context   the Context Governor's policy in force (its revision keys the decision cache)
  compiler  STRATEGY.md → the typed strategy, and its viability in the golem's phase (rev. 10)
  safety    STRATEGY.md MUST lines checked before any LLM call (breaches audited; forbidden tools never run)

tools and model-router serve the hook inside System 2 (the deliberator offers golem.chain.tools' schemas and
plans the route with golem.inference.router.plan_route once the prompt is built); here they have no handler,
so they are not in `fired`. A handler's exception (a bad STRATEGY.md) stops the hook and reaches the caller.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from golem.life.extensions.hooks import fire
from golem.life.extensions.registry import ExtensionRegistry


@dataclass
class AgentStart:
    """What before_agent_start hands the deliberator."""

    context_policy: Any = None
    strategy: Any = None
    viability: Any = None
    must: Any = None
    fired: list[str] = field(default_factory=list)


def before_agent_start(registry: ExtensionRegistry, *, context: Callable[[], Any], compile: Callable[[], Any],
                       viability: Callable[[Any], Any], safety: Callable[[Any], Any]) -> AgentStart:
    """Fire the hook: `context()` → the context policy, `compile()` → the strategy, `viability(strategy)`, then
    `safety(strategy)` → the MUST gate. Blocking (call it on a thread)."""
    out = AgentStart()

    def context_member() -> None:
        out.context_policy = context()

    def compiler_member() -> None:
        out.strategy = compile()
        out.viability = viability(out.strategy)

    def safety_member() -> None:
        out.must = safety(out.strategy)

    out.fired, _ = fire(registry, "before_agent_start",
                        {"context": context_member, "compiler": compiler_member, "safety": safety_member})
    return out
