"""The turn-context extension at the context hook: progressive disclosure of the workspace. What the token allocation
(the context governor's learned policy, or the tier's defaults) cut or left out is not lost but held: the first turn
names each held section and its size, and the tool loop offers a `workspace` read that returns it page by page (a page
fits the result-filter's bound) (docs/design/inference.md#progressive-disclosure).
"""

from __future__ import annotations

from typing import Any

from golem.chain.tools.schemas import ToolArgumentError
from golem.inference.result_filter import MAX_LIST_ITEMS, MAX_STRING_CHARS
from golem.inference.workspace import Workspace, approx_tokens

WORKSPACE_TOOL = "workspace"
PAGE_CHARS = 1_500  # a page's lines, so one page passes the result-filter (2,000 characters of JSON) uncut
TITLES = {"retrieved": "retrieved memory (Grimoire)", "causal": "causal edges", "affect": "affect and vitality",
          "conversation": "the owner's chat", "playbook": "PLAYBOOK.md", "standing_orders": "HEARTBEAT.md",
          "strategy": "STRATEGY.md", "warnings": "critical warnings", "observation": "the observation",
          "positions": "positions", "interventions": "owner interventions", "invariants": "invariants"}


def pages(text: str) -> list[list[str]]:
    """`text`'s lines in pages of at most PAGE_CHARS characters and MAX_LIST_ITEMS lines (a longer line is cut)."""
    out: list[list[str]] = [[]]
    used = 0
    for line in text.splitlines():
        line = line if len(line) <= MAX_STRING_CHARS else line[: MAX_STRING_CHARS - 1] + "…"
        if out[-1] and (used + len(line) > PAGE_CHARS or len(out[-1]) >= MAX_LIST_ITEMS):
            out.append([])
            used = 0
        out[-1].append(line)
        used += len(line) + 8  # JSON quoting and the comma
    return out


class HeldSections:
    """The `workspace` read over the sections held back this tick (golem.inference.deliberator.ToolReads)."""

    def __init__(self, held: dict[str, str]) -> None:
        self.held = {name: pages(text) for name, text in held.items()}

    def schemas(self) -> list[dict[str, Any]]:
        return [{"name": WORKSPACE_TOOL,
                 "description": ("Read a section of your workspace that was held back to keep the first turn short "
                                 "(the list, with each section's pages, is at the end of the user message). "
                                 "Returns one page of its lines (page 0 first)."),
                 "input_schema": {"type": "object", "properties": {
                     "section": {"type": "string", "enum": sorted(self.held)},
                     "page": {"type": "integer", "minimum": 0}}, "required": ["section"]}}]

    def run(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        section, page = arguments.get("section"), arguments.get("page", 0)
        if name != WORKSPACE_TOOL or section not in self.held:
            raise ToolArgumentError(f"workspace: section must be one of {', '.join(sorted(self.held))}, "
                                    f"got {section!r}")
        book = self.held[section]
        if not isinstance(page, int) or isinstance(page, bool) or not 0 <= page < len(book):
            raise ToolArgumentError(f"workspace: {section} has pages 0–{len(book) - 1}, got {page!r}")
        return {"section": section, "page": page, "pages": len(book), "lines": book[page]}


def index(held: dict[str, str]) -> str:
    """The held sections as the first turn reads them."""
    lines = [f"- {name}: {TITLES.get(name, name)}, ~{approx_tokens(text):,} tokens in {len(pages(text))} page(s)"
             for name, text in sorted(held.items())]
    return ("## Held back (call `workspace` with a section and a page to read it before you decide)\n" + "\n".join(lines))


def disclose(ws: Workspace, reads: Any) -> tuple[list[dict[str, Any]], Any]:
    """The turn-context member: (the first turn's messages with the index appended, the reads with `workspace`)."""
    from golem.grimoire.memory_tools import CombinedReads

    messages = [dict(m) for m in ws.messages]
    last = messages[-1]
    blocks = [dict(b) for b in last["content"]]
    text = blocks[-1]["text"]
    marker = "Decide now:"
    at = text.rfind(marker)
    addition = index(ws.held) + "\n\n"
    blocks[-1]["text"] = text[:at] + addition + text[at:] if at >= 0 else text + "\n\n" + addition
    last["content"] = blocks
    return messages, CombinedReads(reads, HeldSections(ws.held))
