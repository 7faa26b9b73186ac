"""The clade's entry exchange on a golem's side: which entries it shares, what it sent and received (its ledger),
and a sibling's four stages over its own stores — quarantine, consensus (≥ 2 siblings or its own
learning agrees), sandbox (replayed on its own recent ticks without acting), adopt (through its own admission gate
at 0.8× the sender's confidence). Thresholds and why: docs/design/clade.md.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np

from golem.cognition.reflect import retrieval_query
from golem.grimoire.semantic.admission import CONTRADICTION_COSINE, admit, polarity
from golem.grimoire.semantic.store import EntrySource, EntryType, GrimoireEntry, Provenance, SemanticStore
from golem.learning.trial import _window
from golem.clade.bus import warnings_first
from golem.models.clade import Inbound, SandboxResult, SharedEntry, content_key
from golem.models.enums import ActionStatus
from golem.models.record import DecisionCycleRecord
from golem.storage import connect, init_db

CONSENSUS_SIBLINGS = 2  # distinct siblings that must have sent the same words
ADOPT_DISCOUNT = 0.8  # a sibling's confidence is worth 0.8 of one's own
INSIGHT_SHARE_AT = 0.6  # an insight is shared once it is promotable
RULE_SHARE_AT = 0.7  # a heuristic or causal link once it would reach the PLAYBOOK
RECALL_COSINE = 0.30  # a tick's situation recalls an entry at this cosine (retrieval's semantic floor)
OWN_PROVENANCE = (Provenance.SELF_LEARNED, Provenance.DREAM, Provenance.DEATH_REFLECTION)


# ---- which entries leave the golem ---------------------------------------------------------------------------------

def propagation(e: GrimoireEntry) -> str:
    """"clade" when the entry is the golem's own and worth its siblings' time, else "private". Warnings go at any
    confidence; what came from others (a sibling, a predecessor) is theirs to share, never echoed back."""
    if not e.active or e.provenance not in OWN_PROVENANCE:
        return "private"
    if e.provenance == Provenance.DREAM and not e.dream_validated:
        return "private"
    if e.category == EntryType.WARNING:
        return "clade"
    if e.category == EntryType.INSIGHT and e.confidence >= INSIGHT_SHARE_AT:
        return "clade"
    if e.category in (EntryType.HEURISTIC, EntryType.CAUSAL_LINK) and e.confidence >= RULE_SHARE_AT:
        return "clade"
    return "private"


def shared(e: GrimoireEntry, origin: str, *, legacy: bool = False) -> SharedEntry:
    """The entry as it travels (propagation() lets only the four shareable categories through)."""
    return SharedEntry.model_validate(dict(
        origin=origin, entry_id=e.id, category=e.category.value, content=e.content[:2000], confidence=e.confidence,
        market_regime=e.market_regime, tags=e.tags[:20], created_tick=e.created_tick, legacy=legacy))


# ---- a golem's own ledger: what it sent, what it received and at which stage ---------------------------------------

SCHEMA = """
CREATE TABLE IF NOT EXISTS sent (entry_id TEXT PRIMARY KEY, content_key TEXT NOT NULL, tick INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS cursor (clade TEXT PRIMARY KEY, seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS inbound (content_key TEXT PRIMARY KEY, stage TEXT NOT NULL, body TEXT NOT NULL,
                                    updated_tick INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS inbound_stage ON inbound (stage);
"""


class CladeLedger:
    """<data>/clade/exchange.sqlite: ids sent (nothing is sent twice), the bus cursor, the inbound entries."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        init_db(self.path, SCHEMA)

    def _db(self) -> sqlite3.Connection:
        return connect(self.path, rows=True)

    def unsent(self, ids: list[str]) -> set[str]:
        with closing(self._db()) as db:
            have = {r[0] for r in db.execute(f"SELECT entry_id FROM sent WHERE entry_id IN ({','.join('?' * len(ids))})",
                                              ids)} if ids else set()
        return set(ids) - have

    def mark_sent(self, entries: list[SharedEntry], tick: int) -> None:
        with closing(self._db()) as db, db:
            db.executemany("INSERT OR IGNORE INTO sent VALUES (?, ?, ?)",
                           [(s.entry_id, content_key(s.content), tick) for s in entries])

    def sent_count(self) -> int:
        with closing(self._db()) as db:
            return int(db.execute("SELECT COUNT(*) FROM sent").fetchone()[0])

    def sent_keys(self) -> set[str]:
        with closing(self._db()) as db:
            return {r[0] for r in db.execute("SELECT content_key FROM sent")}

    def cursor(self, clade: str) -> int:
        with closing(self._db()) as db:
            row = db.execute("SELECT seq FROM cursor WHERE clade = ?", (clade,)).fetchone()
        return int(row[0]) if row else 0

    def set_cursor(self, clade: str, seq: int) -> None:
        with closing(self._db()) as db, db:
            db.execute("INSERT INTO cursor VALUES (?, ?) ON CONFLICT(clade) DO UPDATE SET seq = excluded.seq",
                       (clade, seq))

    def get(self, key: str) -> Inbound | None:
        with closing(self._db()) as db:
            row = db.execute("SELECT body FROM inbound WHERE content_key = ?", (key,)).fetchone()
        return Inbound.model_validate_json(row[0]) if row else None

    def put(self, item: Inbound) -> None:
        with closing(self._db()) as db, db:
            db.execute("INSERT INTO inbound VALUES (?, ?, ?, ?) ON CONFLICT(content_key) DO UPDATE SET "
                       "stage = excluded.stage, body = excluded.body, updated_tick = excluded.updated_tick",
                       (item.content_key, item.stage, item.model_dump_json(), item.updated_tick))

    def inbound(self, stage: str | None = None) -> list[Inbound]:
        with closing(self._db()) as db:
            rows = db.execute("SELECT body FROM inbound" + (" WHERE stage = ?" if stage else "") +
                              " ORDER BY updated_tick, content_key", (stage,) if stage else ()).fetchall()
        items = [Inbound.model_validate_json(r[0]) for r in rows]
        return sorted(items, key=lambda i: (not i.legacy, i.category != "warning"))  # warnings are worked first

    def stage_counts(self) -> dict[str, int]:
        with closing(self._db()) as db:
            return {r[0]: int(r[1]) for r in db.execute("SELECT stage, COUNT(*) FROM inbound GROUP BY stage")}


# ---- the four stages ----------------------------------------------------------------------------------------------

def receive(ledger: CladeLedger, entries: list[SharedEntry], tick: int, me: str) -> list[Inbound]:
    """Stage 1: every entry from a sibling lands in quarantine; the same words from another sibling add an origin
    (that is what consensus counts). Entries this golem sent itself are not taken back."""
    own = ledger.sent_keys()
    new: list[Inbound] = []
    for s in warnings_first(entries):
        if s.origin == me:
            continue
        key = content_key(s.content)
        if key in own:
            continue
        item = ledger.get(key)
        if item is None:
            item = Inbound(content_key=key, category=s.category, content=s.content, confidence=s.confidence,
                           market_regime=s.market_regime, tags=s.tags, origins=[s.origin], entry_ids=[s.key],
                           legacy=s.legacy, received_tick=tick, updated_tick=tick,
                           reason=f"received from {s.origin}")
            new.append(item)
        elif s.key not in item.entry_ids:
            item = item.model_copy(update={
                "origins": sorted(set(item.origins) | {s.origin}), "entry_ids": [*item.entry_ids, s.key],
                "confidence": max(item.confidence, s.confidence), "legacy": item.legacy or s.legacy,
                "updated_tick": tick})
        else:
            continue
        ledger.put(item)
    return new


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray(a @ b, dtype=np.float64)


def own_agreement(store: SemanticStore, content: str) -> tuple[GrimoireEntry | None, GrimoireEntry | None]:
    """The golem's own active entry that says the same (close and of the same direction), and one that says the
    opposite; only what it learned itself counts (a clade entry it adopted is not its own outcome)."""
    vec = store.embedder.embed([content])[0]
    pol = polarity(content)
    agree = against = None
    for e, c in store.nearest(vec, k=8):
        if c < CONTRADICTION_COSINE or e.provenance not in OWN_PROVENANCE or not e.active:
            continue
        p = polarity(e.content) * pol
        if p >= 0 and agree is None:
            agree = e
        elif p < 0 and against is None:
            against = e
    return agree, against


def consensus(item: Inbound, store: SemanticStore) -> tuple[str, str]:
    """Stage 2: ("consensus", why) when ≥ 2 siblings sent it or the golem's own learning says the same;
    ("rejected", why) when its own confident learning says the opposite; ("quarantine", why) to keep waiting."""
    agree, against = own_agreement(store, item.content)
    if against is not None and against.confidence >= item.confidence:
        return "rejected", f"its own entry {against.id} says the opposite ({against.content[:80]!r})"
    if len(item.origins) >= CONSENSUS_SIBLINGS:
        return "consensus", f"confirmed by {len(item.origins)} siblings ({', '.join(item.origins)})"
    if agree is not None:
        return "consensus", f"its own entry {agree.id} says the same"
    return "quarantine", f"waiting: 1 of {CONSENSUS_SIBLINGS} siblings, and its own learning does not say it yet"


def _went_badly(r: DecisionCycleRecord) -> bool:
    """The tick's outcome argues for caution: an anomaly was seen, an action failed, or its Reflexion was negative."""
    return bool(r.anomalies) or any(a.status == ActionStatus.FAILED for a in r.actions) or (
        r.reflexion is not None and r.reflexion.verdict == "negative")


def _went_well(r: DecisionCycleRecord) -> bool:
    """The golem acted and it paid: an executed action whose Reflexion was positive."""
    return any(a.status == ActionStatus.EXECUTED for a in r.actions) and (
        r.reflexion is not None and r.reflexion.verdict == "positive")


def sandbox(item: Inbound, records: Iterable[DecisionCycleRecord], store: SemanticStore, window: int) -> SandboxResult:
    """Stage 3: the entry replayed over the golem's own last `window` ticks (the learning trial's window) without
    acting: on each tick whose situation (the retrieve step's query) recalls it, did what happened bear it out?
    A warning is borne out by a tick that went badly and goes against a tick where acting paid; an insight the other
    way round. It fails when it is contradicted more often than supported."""
    path = _window(records, window)
    if not path:
        return SandboxResult(passed=True, reason="no recent ticks of its own to replay it on: nothing against it")
    emb = store.embedder
    ev = emb.embed([item.content])[0]
    qs = emb.embed_query([retrieval_query(r.observation) for r in path])
    cos = _cos(qs, ev)
    cautious = item.category == "warning" or polarity(item.content) < 0
    recalled = supported = contradicted = 0
    for r, c in zip(path, cos):
        if c < RECALL_COSINE:
            continue
        recalled += 1
        bad, good = _went_badly(r), _went_well(r)
        if (cautious and bad) or (not cautious and good):
            supported += 1
        elif (cautious and good) or (not cautious and bad):
            contradicted += 1
    passed = contradicted <= supported
    why = (f"recalled on {recalled} of its last {len(path)} ticks: {supported} bear it out, {contradicted} go "
           f"against it")
    return SandboxResult(ticks=len(path), recalled=recalled, supported=supported, contradicted=contradicted,
                         passed=passed, reason=why if passed else f"{why}: not adopted")


def adopt(item: Inbound, store: SemanticStore, tick: int) -> tuple[str, str, str | None, float]:
    """Stage 4: offered to the golem's own admission gate as a clade entry at 0.8× the sender's confidence.
    A sibling's heuristic arrives as an insight: rules are derived locally by the curator. Returns (stage, why,
    entry id, confidence)."""
    category = EntryType.WARNING if item.category == "warning" else (
        EntryType.CAUSAL_LINK if item.category == "causal_link" else EntryType.INSIGHT)
    conf = round(item.confidence * ADOPT_DISCOUNT, 4)
    origin = item.origins[0]
    entry = GrimoireEntry(category=category, content=item.content, confidence=conf, provenance=Provenance.CLADE,
                          source=EntrySource(golem_id=origin), created_tick=tick, valid_from=tick,
                          market_regime=item.market_regime,
                          tags=sorted({*item.tags, "clade", *(f"from:{o}" for o in item.origins),
                                       *(["bloodstain"] if item.legacy else [])}))
    d = admit(store, entry, tick=tick)
    action = d.action.value
    if action in ("admitted", "admitted_low", "merged", "skipped"):
        return "adopted", f"admission gate: {action} (score {d.score:.2f})", d.entry_id, conf
    return "rejected", f"admission gate: {action} (score {d.score:.2f})", None, conf


def advance(ledger: CladeLedger, store: SemanticStore, records: list[DecisionCycleRecord], tick: int, *,
            window: int, quarantine_ticks: int) -> list[str]:
    """Move every inbound entry on by at most one stage (so each stage is seen): quarantine → consensus →
    sandbox → adopted; warnings first. Returns what moved, as "from→to: content" lines."""
    moved: list[str] = []

    def move(item: Inbound, stage: str, reason: str, **kw: Any) -> None:
        ledger.put(item.model_copy(update={"stage": stage, "reason": reason, "updated_tick": tick, **kw}))
        moved.append(f"{item.stage}→{stage}: {item.content[:80]}")

    for item in ledger.inbound("sandbox"):
        stage, why, entry_id, conf = adopt(item, store, tick)
        move(item, stage, why, adopted_entry_id=entry_id, adopted_confidence=conf if entry_id else None)
    for item in ledger.inbound("consensus"):
        result = sandbox(item, records, store, window)
        move(item, "sandbox" if result.passed else "rejected", result.reason, sandbox=result)
    for item in ledger.inbound("quarantine"):
        stage, why = consensus(item, store)
        if stage == "quarantine" and tick - item.received_tick > quarantine_ticks:
            stage, why = "rejected", f"no consensus within {quarantine_ticks} ticks"
        if stage != "quarantine":
            move(item, stage, why)
        elif why != item.reason:
            ledger.put(item.model_copy(update={"reason": why}))
    return moved
