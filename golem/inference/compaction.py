"""DeFi-aware compaction of the owner's chat session: the turns older than the tail the model sees are folded into a
short narrative beside what must survive any compaction verbatim — the PolicyCage's hash, the positions, the
behavioural phase, PLAYBOOK.md's heuristics, the active warnings. Fired at the session hook (before_compact) by
`golem chat` and the T2 workspace (golem.usecases.conversation), kept per compacted head so a path is compacted
once (docs/design/inference.md#compaction).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from pydantic import BaseModel, Field

from golem.inference.session import ConversationNode
from golem.inference.workspace import approx_tokens

NARRATIVE_TOKENS = 300  # the compacted turns' narrative: at most this many tokens
LINE_CHARS = 160  # a turn contributes its first sentence, at most this long
# A turn that names money, a position or a limit is kept before one that does not.
_DEFI = re.compile(r"\$|\d|health|factor|repay|borrow|supply|withdraw|swap|sell|buy|WETH|USDC|DAI|liquidat|limit|"
                   r"steer|stop|pause|drawdown|gas|slippage|strategy|rule|MUST", re.IGNORECASE)


class CompactionPreserve(BaseModel):
    """What survives compaction as data, not as prose."""

    policy_cage_hash: str = ""
    positions: list[dict[str, float | str | None]] = Field(default_factory=list)
    behavioral_phase: str = ""
    playbook_heuristics: list[str] = Field(default_factory=list)
    active_warnings: list[str] = Field(default_factory=list)


class CompactionResult(BaseModel):
    through: str  # the newest compacted node's id: the result belongs to that path
    compacted: int  # turns folded
    structured: CompactionPreserve
    narrative: str
    tokens_before: int
    tokens_after: int
    compression_ratio: float

    def text(self) -> str:
        """The compaction as the model reads it, before the tail."""
        s = self.structured
        pos = "; ".join(", ".join(f"{k} {v}" for k, v in p.items() if v is not None) for p in s.positions) or "none"
        lines = [f"[{self.compacted} earlier turns, compacted {self.tokens_before}→{self.tokens_after} tokens]",
                 self.narrative,
                 f"Preserved: PolicyCage {s.policy_cage_hash[:16]}; phase {s.behavioral_phase or 'unknown'}; "
                 f"positions: {pos}"]
        if s.active_warnings:
            lines.append("Active warnings: " + "; ".join(s.active_warnings))
        if s.playbook_heuristics:
            lines.append("PLAYBOOK heuristics: " + "; ".join(s.playbook_heuristics))
        return "\n".join(lines)


def _first_sentence(text: str) -> str:
    one = re.split(r"(?<=[.!?])\s", " ".join(text.split()), maxsplit=1)[0]
    return one if len(one) <= LINE_CHARS else one[: LINE_CHARS - 1] + "…"


def narrative(turns: list[tuple[str, str]], budget: int = NARRATIVE_TOKENS) -> str:
    """Each turn's first sentence, oldest first; over budget, the turns naming money, positions or limits stay and
    the oldest of the others go first. Deterministic (no model)."""
    lines = [(i, f"{role}: {_first_sentence(text)}", bool(_DEFI.search(text))) for i, (role, text) in enumerate(turns)]
    keep = sorted(lines, key=lambda x: (not x[2], -x[0]))  # DeFi turns first, then the newest
    chosen, used = [], 0
    for i, line, _ in keep:
        cost = approx_tokens(line) + 1
        if used + cost > budget:
            continue
        chosen.append((i, line))
        used += cost
    dropped = len(turns) - len(chosen)
    body = "\n".join(line for _, line in sorted(chosen))
    return body + (f"\n({dropped} turn(s) with nothing on money, positions or limits left out)" if dropped else "")


class CompactionLog:
    """`<data>/conversations/compactions.jsonl`: one line per compacted head."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def find(self, through: str) -> CompactionResult | None:
        if not self.path.exists():
            return None
        for line in reversed(self.path.read_text().splitlines()):
            if line.strip() and json.loads(line).get("through") == through:
                return CompactionResult.model_validate_json(line)
        return None

    def append(self, result: CompactionResult) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as f:
            f.write(result.model_dump_json() + "\n")


def compact(older: list[ConversationNode], kept: CompactionPreserve) -> CompactionResult:
    """The turns `older` (oldest first) folded beside `kept`."""
    pairs = [(n.role, n.text) for n in older]
    before = sum(approx_tokens(f"{r}: {t}") for r, t in pairs)
    result = CompactionResult(through=older[-1].id, compacted=len(older), structured=kept, narrative=narrative(pairs),
                              tokens_before=before, tokens_after=0, compression_ratio=0.0)
    after = approx_tokens(result.text())
    return result.model_copy(update={"tokens_after": after,
                                     "compression_ratio": round(after / before, 4) if before else 1.0})
