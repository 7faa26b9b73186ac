"""The deliberator's bounded tool loop: the model may read the chain and speculate candidate writes for a few rounds,
then must decide. Every round is priced against the day's budget (with what the loop already spent), past the
rounds or the token cap the model is offered only the decision tools, and each read's result passes the
result-filter before it enters the context (docs/design/inference.md#the-tool-loop).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field, replace
from typing import Any

from golem.chain.tools.schemas import ToolArgumentError
from golem.inference.deliberator import ToolReads
from golem.inference.result_filter import filter_result
from golem.inference.router import BudgetRefusal, Completion, ModelChoice, ProviderRouter
from golem.inference.workspace import request_tokens
from golem.models.record import ReadCallRecord

MAX_READS_PER_ROUND = 4  # more in one reply are answered "not run" (the model asks again next round)


@dataclass
class LoopResult:
    final: Completion  # the reply that decides (its content holds no read calls)
    content: list[dict[str, Any]]  # the final reply's blocks, read calls left out
    completions: list[Completion] = field(default_factory=list)
    reads: list[ReadCallRecord] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def total(self, attr: str) -> Any:
        return total(self.completions, attr)


def total(completions: list[Completion], attr: str) -> Any:
    """One usage figure (tokens, cost, latency) summed over a loop's calls: every call is paid for."""
    return sum(getattr(c, attr) for c in completions)


class LoopCutShort(Exception):
    """The budget refused a later round: no decision yet; what the loop spent and read comes with it."""

    def __init__(self, reason: str, completions: list[Completion], reads: list[ReadCallRecord]) -> None:
        super().__init__(reason)
        self.reason, self.completions, self.reads = reason, completions, reads


def _blocks(completion: Completion) -> list[dict[str, Any]]:
    return [b.model_dump(exclude_none=True) if hasattr(b, "model_dump") else dict(b) for b in completion.message.content]


async def _run_read(reads: ToolReads, round_no: int, block: dict[str, Any],
                    filtered_by: bool = True) -> tuple[ReadCallRecord, dict[str, Any]]:
    name, args = str(block.get("name")), block.get("input") or {}
    started = time.perf_counter()
    error: str | None = None
    filtered: list[str] = []
    try:
        answer = await asyncio.to_thread(reads.run, name, dict(args))
        text, filtered = filter_result(answer) if filtered_by else (json.dumps(answer, default=str), [])
    except ToolArgumentError as err:
        error = text = str(err)
    except Exception as err:  # a chain read that failed: the model is told, the tick goes on
        error = text = f"{name} failed: {type(err).__name__}: {err}"[:500]
    rec = ReadCallRecord(round=round_no, tool_name=name, arguments=dict(args), result="" if error else text,
                         error=error, filtered=filtered, ms=round((time.perf_counter() - started) * 1000.0, 3))
    result = {"type": "tool_result", "tool_use_id": block["id"], "content": text}
    if error:
        result["is_error"] = True
    return rec, result


async def run_tool_loop(router: ProviderRouter, choice: ModelChoice, *, system: list[dict[str, Any]],
                        messages: list[dict[str, Any]], decision_tools: list[dict[str, Any]],
                        reads: ToolReads | None, rounds: int, max_tokens: int,
                        result_filter: bool = True) -> LoopResult:
    """Up to `rounds` rounds of reads, then a reply that decides. BudgetRefusal on the first call (nothing spent);
    LoopCutShort when the budget refuses a later one. `result_filter` False: the owner switched the extension off
    ([extensions] disabled) and results go to the model as the tools returned them."""
    read_tools = reads.schemas() if reads is not None and rounds > 0 else []
    read_names = {t["name"] for t in read_tools}
    messages = list(messages)
    completions: list[Completion] = []
    records: list[ReadCallRecord] = []
    notes: list[str] = []
    for round_no in range(rounds + 1):
        used = sum(c.input_tokens + c.output_tokens + c.cache_read_tokens + c.cache_creation_tokens
                   for c in completions)
        last = round_no == rounds or not read_names or used >= max_tokens
        if last and read_names and round_no < rounds:
            notes.append(f"tool loop: {used} tokens used of [inference] tool_loop_max_tokens = {max_tokens}; "
                         "this call must decide")
        offered = decision_tools if last else [*read_tools, *decision_tools]
        spent = sum(c.cost for c in completions)
        try:
            plan = router.price(replace(choice, daily_spend=choice.daily_spend + spent),
                                request_tokens(system, messages, offered))
        except BudgetRefusal as refusal:
            if not completions:
                raise
            raise LoopCutShort(f"tool loop cut short after {len(completions)} call(s): {refusal.reason}",
                               completions, records) from None
        try:
            completion = await router.complete(plan, system=system, messages=messages, tools=offered,
                                               tool_choice={"type": "any"})
        except BudgetRefusal as refusal:  # the x402 payer refused this call's quote: keep what was paid so far
            if not completions:
                raise
            raise LoopCutShort(f"tool loop cut short after {len(completions)} call(s): {refusal.reason}",
                               completions, records) from None
        completions.append(completion)
        blocks = _blocks(completion)
        uses = [b for b in blocks if b.get("type") == "tool_use"]
        wanted = [b for b in uses if b.get("name") in read_names]
        if last or not wanted or len(wanted) < len(uses) or completion.message.stop_reason == "max_tokens":
            if wanted:  # reads beside the decision are not run: the decision stands on what was read before
                notes.append("not run (the decision came in the same reply): "
                             + ", ".join(str(b.get("name")) for b in wanted))
            return LoopResult(final=completion, content=[b for b in blocks if b not in wanted],
                              completions=completions, reads=records, notes=notes)
        results = []
        for i, block in enumerate(uses):
            if i < MAX_READS_PER_ROUND:
                rec, result = await _run_read(reads, round_no, block, result_filter)  # type: ignore[arg-type]
                records.append(rec)
            else:
                result = {"type": "tool_result", "tool_use_id": block["id"], "is_error": True,
                          "content": f"not run: at most {MAX_READS_PER_ROUND} reads per round; ask again"}
            results.append(result)
        messages += [{"role": "assistant", "content": blocks}, {"role": "user", "content": results}]
    raise AssertionError("unreachable: the last round always returns")  # pragma: no cover


async def speculate_each(reads: ToolReads, candidates: list[tuple[str, dict[str, Any]]]) -> list[ReadCallRecord]:
    """`speculate` on each candidate write (round 0), run as the loop runs it (the result-filter included)."""
    records = []
    for i, (tool, arguments) in enumerate(candidates):
        block = {"id": f"offline-{i}", "name": "speculate", "input": {"tool": tool, "arguments": arguments}}
        records.append((await _run_read(reads, 0, block))[0])
    return records
