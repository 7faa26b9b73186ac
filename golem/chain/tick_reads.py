"""What the deliberator may read and try during one tick: the read tools, and `speculate` — one candidate write
simulated with eth_simulateV1 on the current block, its outcome decoded (amounts, gas, the health factor after).
Only reads: nothing here can sign or send (docs/design/inference.md#the-tool-loop).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from web3 import Web3

from golem.chain.contracts import Deployment
from golem.chain.read_tools import ToolRegistry
from golem.chain.simulate import SimulationError, simulate_actions, simulate_health_factor
from golem.chain.tools.schemas import ToolArgumentError
from golem.models.observation import Observation
from golem.models.tick import ProposedAction

SPECULATE = "speculate"


def speculate_schema(write_tools: list[str]) -> dict[str, Any]:
    return {
        "name": SPECULATE,
        "description": (
            "Simulate ONE candidate write on the current block without sending it (eth_simulateV1): whether it "
            "would revert and why, what it would move (amounts in and out, balance and position deltas), its gas, "
            "and the Aave health factor it would leave. Use it to size an action before you propose it."),
        "input_schema": {
            "type": "object",
            "properties": {
                "tool": {"type": "string", "enum": write_tools, "description": "the write tool to try"},
                "arguments": {"type": "object", "description": "that tool's arguments, as you would propose them"},
            },
            "required": ["tool", "arguments"],
            "additionalProperties": False,
        },
    }


class TickReads:
    """The read tools and `speculate` over one tick's chain view (the observation it started from)."""

    def __init__(self, w3: Web3, deployment: Deployment, account: str, observation: Observation, *,
                 write_tools: Iterable[str], registry: ToolRegistry | None = None) -> None:
        self.w3, self.deployment, self.account, self.observation = w3, deployment, account, observation
        self.write_tools = [t for t in write_tools]
        self.registry = registry or ToolRegistry()

    def schemas(self) -> list[dict[str, Any]]:
        """The tools as the Messages API takes them (name, description, input_schema)."""
        reads = [t.schema() for t in self.registry.read_tools()]
        return [*reads, speculate_schema(self.write_tools)] if self.write_tools else reads

    def names(self) -> set[str]:
        return {t["name"] for t in self.schemas()}

    def run(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The tool's JSON answer; ToolArgumentError names what to fix. Blocking (chain reads)."""
        if name == SPECULATE and self.write_tools:
            return self.speculate(arguments)
        tool = self.registry.read_tool(name)
        if tool is None:
            raise ToolArgumentError(f"{name} is not a read tool here; read tools: {', '.join(sorted(self.names()))}")
        return tool(self.w3, self.deployment, self.account, arguments)

    def speculate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        extra = sorted(set(arguments) - {"tool", "arguments"})
        if extra:
            raise ToolArgumentError(f"speculate: unexpected argument(s) {', '.join(extra)}; allowed: tool, arguments")
        tool, args = arguments.get("tool"), arguments.get("arguments")
        if tool not in self.write_tools:
            raise ToolArgumentError(f"speculate.tool: {tool!r} is not a write tool offered this tick; one of "
                                    f"{', '.join(self.write_tools)}")
        if not isinstance(args, dict):
            raise ToolArgumentError(f"speculate.arguments: must be an object of {tool}'s arguments, got {args!r}")
        action = ProposedAction(action_index=0, tool=str(tool), arguments=args, rationale="speculation")
        try:
            sim = simulate_actions(self.w3, self.deployment, self.account, [action], self.observation).actions[0]
        except SimulationError as err:
            return {"tool": tool, "ok": False, "revert_reason": f"could not simulate: {err}"}
        out: dict[str, Any] = {"tool": tool, "arguments": args, "ok": sim.ok, "block": self.w3.eth.block_number}
        if not sim.ok:
            return {**out, "revert_reason": sim.revert_reason}
        out.update(gas_estimate=sim.gas_estimate, expected=sim.expected)
        try:
            out["health_factor_after"] = simulate_health_factor(self.w3, self.deployment, self.account, [action],
                                                                self.observation, out["block"])
        except (SimulationError, ToolArgumentError) as err:
            out["health_factor_after_error"] = str(err)
        out["health_factor_now"] = self.observation.min_health_factor()
        return out
