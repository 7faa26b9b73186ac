"""The DECIDE step's interface: anything that turns a tick's context into a Deliberation.

The LLM router and the offline deliberator both implement it, so the decide activity does not
care which one answers (ARCHITECTURE "Inference").
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from golem.inference.strategy import Strategy
from golem.models.tick import DecideInput, Deliberation


@runtime_checkable
class Deliberator(Protocol):
    async def decide(self, inp: DecideInput, strategy: Strategy, playbook_text: str) -> Deliberation:
        """Decide what to do this tick. Proposed actions are in human units and token symbols."""
        ...
