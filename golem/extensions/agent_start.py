"""The before_agent_start hook in decide (tools → context → compiler → model-router → safety), fired through the
registry before the deliberator runs; the deliberator takes `tools` and `route` from here. A handler's exception (a
bad STRATEGY.md) stops the hook and reaches the caller. Then system_prompt (playbook) puts PLAYBOOK.md in the T2
system prompt. What each member does and why the survival state stays out of the cached prompt:
docs/design/life.md#extensions.
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
