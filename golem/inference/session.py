"""The session sidecar for owner chat: a Merkle hash-chained conversation tree
(docs/design/inference.md#owner-chat).

Nodes are appended to $GOLEM_DATA/conversations/session.jsonl (one JSON object a line) and the
current head is kept in head.json. Each node's content_hash = SHA-256(parent's hash ‖ canonical JSON
of the node's content), so editing any earlier message breaks every hash after it and
`verify_integrity` says where. Branches are typed (sim, pre_steer, dream), start from a trunk node,
and are single-level only (no branch of a branch).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from golem.layout import DataLayout

BRANCH_KINDS = ("sim", "pre_steer", "dream")
GENESIS = "0" * 64


class SessionError(ValueError):
    """A bad navigation or branch request; the message says what to do instead."""


@dataclass
class ConversationNode:
    id: str
    parent_id: str | None
    role: str  # user | golem | system
    text: str
    content_hash: str
    created_at: str
    branch: str | None = None  # None on the trunk; else "<kind>:<label>"
    metadata: dict[str, Any] = field(default_factory=dict)  # model, cost_usd, token_count

    def content(self) -> dict[str, Any]:
        return {"id": self.id, "parent_id": self.parent_id, "role": self.role, "text": self.text,
                "created_at": self.created_at, "branch": self.branch, "metadata": self.metadata}


def node_hash(parent_hash: str, content: dict[str, Any]) -> str:
    canon = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256((parent_hash + canon).encode()).hexdigest()


class SessionTree:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.nodes: dict[str, ConversationNode] = {}
        self.order: list[str] = []
        self.head: str | None = None

    # ---- storage ----------------------------------------------------------------------------
    @staticmethod
    def default_path(data_dir: Path) -> Path:
        return DataLayout(data_dir).conversation

    @classmethod
    def load(cls, path: Path) -> "SessionTree":
        tree = cls(path)
        if path.exists():
            for n, line in enumerate(path.read_text().splitlines(), start=1):
                if not line.strip():
                    continue
                try:
                    node = ConversationNode(**json.loads(line))
                except (json.JSONDecodeError, TypeError) as err:
                    raise SessionError(f"{path}:{n}: not a conversation node ({err}); the sidecar is damaged") from None
                tree.nodes[node.id] = node
                tree.order.append(node.id)
            head_file = path.with_name("head.json")
            head = json.loads(head_file.read_text()).get("head") if head_file.exists() else None
            tree.head = head if head in tree.nodes else (tree.order[-1] if tree.order else None)
        return tree

    def _persist(self, node: ConversationNode) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as f:
            f.write(json.dumps(asdict(node), ensure_ascii=False) + "\n")
        self._save_head()

    def _save_head(self) -> None:
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.with_name("head.json").write_text(json.dumps({"head": self.head}))

    # ---- tree ops ---------------------------------------------------------------------------
    def append(self, role: str, text: str, *, metadata: dict[str, Any] | None = None,
               created_at: str | None = None) -> ConversationNode:
        """Add a message after the head (on the head's branch) and move the head to it."""
        parent = self.nodes[self.head] if self.head else None
        return self._add(parent, role, text, parent.branch if parent else None, metadata, created_at)

    def branch(self, from_id: str, kind: str, label: str, role: str, text: str, *,
               metadata: dict[str, Any] | None = None) -> ConversationNode:
        """Start a typed branch at trunk node `from_id` with its first message; the head moves onto it."""
        if kind not in BRANCH_KINDS:
            raise SessionError(f"branch kind {kind!r}: use one of {', '.join(BRANCH_KINDS)}")
        if not label.strip():
            raise SessionError("a branch needs a label (the hypothesis, pending steer or dream seed)")
        node = self._get(from_id)
        if node.branch is not None:
            raise SessionError(f"node {node.id} is on branch {node.branch}; branches start from the trunk only")
        return self._add(node, role, text, f"{kind}:{label.strip()}", metadata, None)

    def _add(self, parent: ConversationNode | None, role: str, text: str, branch: str | None,
             metadata: dict[str, Any] | None, created_at: str | None) -> ConversationNode:
        node = ConversationNode(
            id=uuid.uuid4().hex[:16], parent_id=parent.id if parent else None, role=role, text=text,
            content_hash="", created_at=created_at or datetime.now(timezone.utc).isoformat(),
            branch=branch, metadata=dict(metadata or {}),
        )
        node.content_hash = node_hash(parent.content_hash if parent else GENESIS, node.content())
        self.nodes[node.id] = node
        self.order.append(node.id)
        self.head = node.id
        self._persist(node)
        return node

    def navigate(self, target: str) -> list[str]:
        """Move the head to `target`; returns the path root → target."""
        self._get(target)
        self.head = target
        self._save_head()
        return [n.id for n in self.current_path()]

    def current_path(self) -> list[ConversationNode]:
        path, cur = [], self.head
        while cur is not None:
            node = self.nodes[cur]
            path.append(node)
            cur = node.parent_id
        return path[::-1]

    def tail(self, n: int) -> list[tuple[str, str]]:
        return [(node.role, node.text) for node in self.current_path()[-n:]] if n > 0 else []

    def find_by_hash(self, content_hash: str) -> ConversationNode | None:
        return next((nd for nd in self.nodes.values() if nd.content_hash == content_hash), None)

    def verify_integrity(self) -> tuple[bool, list[str]]:
        """Recompute every hash from its parent; (ok, problems)."""
        problems = []
        for nid in self.order:
            node = self.nodes[nid]
            parent = self.nodes.get(node.parent_id) if node.parent_id else None
            if node.parent_id and parent is None:
                problems.append(f"node {nid}: parent {node.parent_id} missing")
                continue
            expect = node_hash(parent.content_hash if parent else GENESIS, node.content())
            if expect != node.content_hash:
                problems.append(f"node {nid}: content hash mismatch (history was edited)")
        return not problems, problems

    def _get(self, nid: str) -> ConversationNode:
        matches = [k for k in self.nodes if k.startswith(nid)] if nid not in self.nodes else [nid]
        if len(matches) != 1:
            raise SessionError(f"no single node matches {nid!r}; list them with `golem chat --log`")
        return self.nodes[matches[0]]
