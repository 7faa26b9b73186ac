"""The DECIDE step's interface: anything that turns a tick's context into a Deliberation.

The LLM router and the offline deliberator both implement it, so the decide activity does not
care which one answers (docs/design/inference.md). `route` is the deliberator's model-router member of
before_agent_start: which model answers this tick, decided before the prompt is
built; `decide` then uses that route and the hook's tool schemas (`tools`) instead of working them out again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from golem.inference.router import ModelChoice
from golem.inference.strategy import Strategy
from golem.models.tick import DecideInput, Deliberation


@dataclass(frozen=True)
class Route:
    """The model-router's answer for one tick: `choice` is the LLM call it will make (None: no LLM call, `why`
    says why — the budget forbids it, or the deliberator has no model)."""

    model: str
    choice: ModelChoice | None = None
    why: str = ""


class ToolReads(Protocol):
    """What the deliberator may read (and speculate) during a tick: golem.chain.tick_reads.TickReads."""

    def schemas(self) -> list[dict[str, Any]]: ...
    def run(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]: ...


@runtime_checkable
class Deliberator(Protocol):
    def route(self, inp: DecideInput) -> Route:
        """The model that answers `inp` (before the prompt is built)."""
        ...

    async def decide(self, inp: DecideInput, strategy: Strategy, playbook_text: str, *,
                     tools: list[dict[str, Any]] | None = None, route: Route | None = None,
                     reads: ToolReads | None = None) -> Deliberation:
        """Decide what to do this tick. Proposed actions are in human units and token symbols. `tools` and
        `route` are what before_agent_start produced (None: the deliberator works them out itself); `reads`
        the chain reads and speculation it may use (None: none)."""
        ...
