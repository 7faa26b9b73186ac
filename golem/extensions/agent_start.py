"""The before_agent_start hook in decide (runtime-extensions §3: tools → context → compiler → model-router →
safety), fired through the registry before the deliberator runs:

  tools         the write-tool schemas offered to the model this tick (golem.inference.decision.decision_tools:
                token enums narrowed to the PolicyCage's approved assets)
  context       the Context Governor's policy in force (its revision keys the decision cache)
  compiler      STRATEGY.md → the typed strategy, and its viability in the golem's phase (rev. 10)
  model-router  tier → model under today's spend (the deliberator's `route`; the token-based cap check runs once the
                prompt is built, golem.inference.router.price_route)
  safety        STRATEGY.md MUST lines checked before any LLM call (breaches audited; forbidden tools never run)

The deliberator gets `tools` and `route` from here and does not work them out again. A handler's exception (a bad
STRATEGY.md) stops the hook and reaches the caller.

Then system_prompt (§3: playbook): the playbook member reads PLAYBOOK.md, which the workspace puts in the T2 system
prompt (golem.inference.workspace) and the offline deliberator reads its WHEN-bullets from. With `[extensions]
disabled = ["playbook"]` the member does not run and the prompt has no playbook part. The survival state (phase,
vitality, critical warnings) changes every tick, so it stays in the user message's affect and warnings sections,
after the prompt cache's breakpoint, rather than in the cached system blocks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from golem.extensions.hooks import fire
from golem.extensions.registry import ExtensionRegistry


@dataclass
class AgentStart:
    """What before_agent_start hands the deliberator."""

    tools: Any = None
    context_policy: Any = None
    strategy: Any = None
    viability: Any = None
    route: Any = None
    must: Any = None
    fired: list[str] = field(default_factory=list)


def before_agent_start(registry: ExtensionRegistry, *, tools: Callable[[], Any], context: Callable[[], Any],
                       compile: Callable[[], Any], viability: Callable[[Any], Any], route: Callable[[], Any],
                       safety: Callable[[Any], Any]) -> AgentStart:
    """Fire the hook: `tools()` → the offered schemas, `context()` → the context policy, `compile()` → the strategy,
    `viability(strategy)`, `route()` → the model, then `safety(strategy)` → the MUST gate. Blocking (call it on a
    thread)."""
    out = AgentStart()

    def tools_member() -> None:
        out.tools = tools()

    def context_member() -> None:
        out.context_policy = context()

    def compiler_member() -> None:
        out.strategy = compile()
        out.viability = viability(out.strategy)

    def router_member() -> None:
        out.route = route()

    def safety_member() -> None:
        out.must = safety(out.strategy)

    out.fired, _ = fire(registry, "before_agent_start",
                        {"tools": tools_member, "context": context_member, "compiler": compiler_member,
                         "model-router": router_member, "safety": safety_member})
    return out


@dataclass
class SystemPrompt:
    """What system_prompt adds to the prompt."""

    playbook_text: str = ""
    fired: list[str] = field(default_factory=list)


def system_prompt(registry: ExtensionRegistry, *, playbook: Callable[[], str]) -> SystemPrompt:
    """Fire the hook: `playbook()` → PLAYBOOK.md's text. Blocking (it reads the file)."""
    out = SystemPrompt()

    def playbook_member() -> None:
        out.playbook_text = playbook()

    out.fired, _ = fire(registry, "system_prompt", {"playbook": playbook_member})
    return out
