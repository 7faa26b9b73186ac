"""The clade's bus arithmetic, pure (run inside CladeExchangeWorkflow): a share batch parsed, appended once per
origin entry id with warnings first, read back after a sibling's cursor. Design: docs/design/clade.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError

from golem.models.clade import BusEntry, BusState, ShareBatch, SharedEntry, SinceQuery

KEEP_ENTRIES = 2000  # entries the bus still offers; a sibling further behind starts from the oldest kept
KEEP_KEYS = 8192  # origin:entry ids remembered, so nothing is carried twice
KEEP_BATCHES = 512


def warnings_first(entries: Iterable[SharedEntry]) -> list[SharedEntry]:
    """Warnings travel first (a death's lessons before them all); then by confidence."""
    return sorted(entries, key=lambda s: (not s.legacy, s.category != "warning", -s.confidence))


def parse_share(raw: Any) -> ShareBatch:
    """A share batch from a signal or update payload; ValueError saying which field is wrong."""
    try:
        return ShareBatch.model_validate(raw)
    except ValidationError as err:
        where = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors()[:5])
        raise ValueError(f"malformed share batch ({where}); a batch is {{id, entries: [{{origin, entry_id, "
                         f"category warning|insight|heuristic|causal_link, content, confidence 0..1}}]}}") from None


def apply_share(state: BusState, batch: ShareBatch) -> tuple[BusState, int]:
    """Append the batch's entries not carried before (warnings first); returns the state and how many went on."""
    if batch.id in state.batches:
        return state, 0
    keys = set(state.keys)
    seq, entries, new_keys = state.seq, list(state.entries), list(state.keys)
    for s in warnings_first(batch.entries):
        if s.key in keys:
            continue
        seq += 1
        entries.append(BusEntry(seq=seq, entry=s))
        keys.add(s.key)
        new_keys.append(s.key)
    added = seq - state.seq
    return state.model_copy(update={
        "seq": seq, "entries": entries[-KEEP_ENTRIES:], "keys": new_keys[-KEEP_KEYS:],
        "batches": [*state.batches, batch.id][-KEEP_BATCHES:]}), added


def since(state: BusState, q: SinceQuery) -> list[BusEntry]:
    return [b for b in state.entries if b.seq > q.after and b.entry.origin != q.me][:q.limit]
