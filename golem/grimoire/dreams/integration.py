"""Dream phase 3, integration: rehearsal results → the staging buffer → the admission gate.

Also the two NREM helpers that read the tick records: the verified deviations of a replayed episode, and the
grouping of near-duplicate episodes (compression: a group is replayed and journalled as one pattern).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from golem.grimoire.semantic.admission import AdmissionAction, admit
from golem.grimoire.episodes.model import Episode
from golem.grimoire.episodes.store import EpisodeStore
from golem.grimoire.playbook.heuristics import GLOBAL_SCOPE, HeuristicStore
from golem.grimoire.semantic.store import EntrySource, EntryType, GrimoireEntry, Provenance, SemanticStore
from golem.grimoire.dreams.staging import (
    CORROBORATIONS_TO_VALIDATE,
    DREAM_ENTRY_CONFIDENCE,
    StageKind,
    StagedItem,
    StageStatus,
    StagingBuffer,
    Trigger,
    corroborate,
    staged_id,
)
from golem.models.record import DecisionCycleRecord

# "what would have happened at 50bps, 100bps, 200bps deviation?" — the perturbations named beside each
# replayed episode's measured deviation.
DEVIATION_PERTURBATIONS_BPS = (50, 100, 200)
WAKING_RECORDS = 200  # how many recent tick records waking evidence is read from (ours)
_GUARD_HF = re.compile(r"health_factor < ([0-9.]+)")



class CycleRecords(Protocol):
    """The decision records a dream reads (life/cycle_store.py's CycleStore, handed in by the caller)."""

    def recent(self, n: int) -> list[dict[str, Any]]: ...

    def load(self, tick: int) -> DecisionCycleRecord: ...


def deviation_context(cycles: CycleRecords, tick: int) -> dict[str, Any]:
    """The verified deviations of the episode's tick (bps per quantity)."""
    try:
        outcome = cycles.load(tick).outcome
    except Exception:  # no record (imported episode, archived): replayed without deviation data
        return {"deviations_bps": {}, "verified": None}
    if outcome is None:
        return {"deviations_bps": {}, "verified": None}
    devs = {k: round(v, 2) for k, v in outcome.deviations_bps.items()}
    worst = max((abs(v) for v in devs.values()), default=0.0)
    return {"deviations_bps": devs, "verified": outcome.verified,
            "perturb_bps": [p for p in DEVIATION_PERTURBATIONS_BPS if p > worst]}


def merge_groups(episodes: list[Episode]) -> list[list[str]]:
    """Near-duplicates among the replayed: same regime, tier and tools, prediction error within 0.05."""
    groups: dict[tuple[Any, ...], list[Episode]] = defaultdict(list)
    for e in episodes:
        groups[(e.regime.value, e.tier.value, tuple(sorted(e.action_tools)), round(e.prediction_error * 20))].append(e)
    return [sorted(x.id for x in g) for g in groups.values() if len(g) > 1]


def recent_tvls(cycles: CycleRecords, n: int = 50) -> list[float]:
    """The pair's TVL in the newest n tick records (the thin-liquidity condition is read against them)."""
    out = []
    for r in cycles.recent(n):
        try:
            out.append(cycles.load(r["tick"]).observation.snapshot.pool.tvl)
        except Exception:  # a record archived past retention, or unreadable: not evidence
            continue
    return out


def compress(store: EpisodeStore, groups: list[list[str]], tick: int, audit_path: Path) -> list[dict[str, Any]]:
    """NREM compression: each near-duplicate group of observation episodes (no action taken: no P&L, credit or
    outcome hangs on them) becomes one row. The newest is kept, with the group's highest strength, summed access
    count and a note of how many it stands for; the others leave the episodes table and are kept whole in the
    audit table `merged_episodes` (merged id → kept id, the dream's tick, the episode's JSON), so a merge can be
    traced and undone. Groups with an acted episode are journalled only. Returns {"kept", "merged"} per group."""
    import sqlite3

    with sqlite3.connect(audit_path, timeout=30) as db:
        db.execute("CREATE TABLE IF NOT EXISTS merged_episodes (merged_id TEXT PRIMARY KEY, kept_id TEXT NOT NULL, "
                   "tick INTEGER NOT NULL, body TEXT NOT NULL)")
    out = []
    for ids in groups:
        eps = store.get_many(ids)
        if len(eps) < 2 or any(e.acted for e in eps):
            continue
        eps.sort(key=lambda e: (-e.tick, e.id))
        kept, rest = eps[0], eps[1:]
        with sqlite3.connect(audit_path, timeout=30) as db:
            db.executemany("INSERT OR IGNORE INTO merged_episodes (merged_id, kept_id, tick, body) VALUES (?, ?, ?, ?)",
                           [(e.id, kept.id, tick, e.model_dump_json()) for e in rest])
        folded = kept.model_copy(update={"strength": max(e.strength for e in eps),
                                         "access_count": sum(e.access_count for e in eps)})
        # the summary (and so the vector) is unchanged: a scalar update keeps the stored vector semantics
        store.upsert_many([folded])
        store.delete_many([e.id for e in rest])
        out.append({"kept": kept.id, "merged": [e.id for e in rest]})
    return out


def waking_facts(cycles: CycleRecords, n: int = WAKING_RECORDS) -> list[tuple[int, float | None, float | None]]:
    """(tick, health factor, price move bps since the previous record) of recent waking ticks, oldest first."""
    rows = sorted(cycles.recent(n), key=lambda r: r["tick"])
    out: list[tuple[int, float | None, float | None]] = []
    prev: float | None = None
    for r in rows:
        try:
            snap = cycles.load(r["tick"]).observation
        except Exception:
            continue
        price = snap.snapshot.pool.price
        move: float | None = (price - prev) / prev * 10_000.0 if prev else None
        out.append((r["tick"], snap.min_health_factor(), move))
        prev = price
    return out


@dataclass
class Integrated:
    staged: list[str] = field(default_factory=list)
    promoted: list[str] = field(default_factory=list)


def _trigger(result: dict[str, Any]) -> Trigger:
    """The waking situation that corroborates what a rehearsal found: the guard's health threshold, or half the
    crisis's price move."""
    guard = result.get("guard") or ""
    m = _GUARD_HF.search(guard)
    fork = result.get("fork") or {}
    hf = float(m.group(1)) if m else (fork.get("health_before") or None)
    shock = re.search(r"feed ([+-][0-9]+)%", result.get("crisis", ""))
    move = float(shock.group(1)) * 100 / 2 if shock and float(shock.group(1)) < 0 else None
    return Trigger(health_below=hf, price_move_bps=move)


def _admit(semantic: SemanticStore, item: StagedItem, golem_id: str, tick: int, category: EntryType) -> str | None:
    """Through the admission gate with the dream calibration: entries start at 0.3, provenance Dream,
    decaying at the dream-validated (class D) rate."""
    entry = GrimoireEntry(
        id=item.id, category=category, content=item.content, confidence=DREAM_ENTRY_CONFIDENCE,
        provenance=Provenance.DREAM, source=EntrySource(golem_id=golem_id), created_tick=tick, valid_from=tick,
        parent_episode_ids=[item.source_episode] if item.source_episode else [], dream_validated=True,
        tags=["dream", item.kind.value] + ([item.scenario] if item.scenario else []),
    )
    decision = admit(semantic, entry, tick=tick)
    if decision.action in (AdmissionAction.REJECTED, AdmissionAction.QUARANTINED):
        return None
    return decision.entry_id


def _guard_evidence(heuristics: HeuristicStore | None, item: StagedItem, golem_id: str, ticks: list[int]) -> None:
    """A guard joins the heuristic store on the rehearsal's evidence (confidence 0.5) and gains +0.1 per waking
    tick that corroborates it; at 0.7 — two corroborations, the staging buffer's "validated" — the Curator's
    PLAYBOOK.md rewrite includes it, where the deliberator reads it as a rule."""
    if heuristics is None or item.kind != StageKind.GUARD or not item.rule:
        return
    heuristics.add_or_reinforce(item.rule, GLOBAL_SCOPE, f"dream-{item.cycle_tick}:{item.scenario}")
    for t in ticks:
        heuristics.add_or_reinforce(item.rule, GLOBAL_SCOPE, f"{golem_id}:tick:{t}")


def integrate_results(staging: StagingBuffer, semantic: SemanticStore, golem_id: str, tick: int,
                      results: list[dict[str, Any]], heuristics: HeuristicStore | None = None) -> Integrated:
    """Stage every dream output. A broken response's warning and guard are grounded (the chain produced their
    figures): partially validated at once and admitted at 0.3. What a counterfactual showed stays a hypothesis
    until waking evidence corroborates it."""
    out = Integrated()
    for r in results:
        scenario, source = r.get("scenario", ""), r.get("source_episode")
        outputs: list[tuple[StageKind, str]] = []
        if r.get("warning"):
            outputs.append((StageKind.THREAT_WARNING, r["warning"]))
            if r.get("guard"):
                outputs.append((StageKind.GUARD, f"PLAYBOOK guard candidate from a dream rehearsal "
                                                 f"({scenario}): {r['guard'].lstrip('- ')}"))
        elif source:
            fork = r.get("fork") or {}
            acts = "; ".join(fork.get("actions") or []) or "no action"
            hb, ha = fork.get("health_before"), fork.get("health_after")
            outputs.append((StageKind.HYPOTHESIS, (
                f"If the market repeats tick {scenario.rsplit(' ', 1)[-1]} deeper ({r.get('crisis')}), the golem's "
                f"response ({acts}) holds: health factor {hb if hb is None else round(hb, 3)} → "
                f"{ha if ha is None else round(ha, 3)} on a fork at block {fork.get('block')}.")))
        for kind, content in outputs:
            sid = staged_id(tick, kind, content)
            old = staging.get(sid)
            item = old or StagedItem(id=sid, cycle_tick=tick, kind=kind, content=content, scenario=scenario,
                                     source_episode=source, trigger=_trigger(r),
                                     rule=r["guard"].lstrip("- ") if kind == StageKind.GUARD else None)
            if kind != StageKind.HYPOTHESIS and item.entry_id is None:
                item.status = StageStatus.PARTIALLY_VALIDATED
                item.entry_id = _admit(semantic, item, golem_id, tick,
                                       EntryType.WARNING if kind == StageKind.THREAT_WARNING else EntryType.HEURISTIC)
                if item.entry_id:
                    out.promoted.append(sid)
                _guard_evidence(heuristics, item, golem_id, [])
            staging.put(item)
            out.staged.append(sid)
    return out


def promote_with_waking_evidence(staging: StagingBuffer, semantic: SemanticStore, golem_id: str, tick: int,
                                 facts: list[tuple[int, float | None, float | None]],
                                 heuristics: HeuristicStore | None = None) -> list[str]:
    """Waking evidence moves staged items on: a corroborated hypothesis is admitted at 0.3; a validated item's
    entry is raised to 0.7. Run by every dream's integration and by the curator (delta) cycle, which so
    accelerates promotion when waking ticks corroborate. Returns the ids that moved."""
    moved = []
    for item in staging.open_items():
        new = corroborate(item, facts)
        if new.status == item.status and new.corroborations == item.corroborations:
            continue
        # Only the corroborations that validate it count as the guard's evidence (0.5 + 2 × 0.1 = 0.7): a situation
        # that recurs forty times is one finding, not forty.
        counted = new.corroborations[:CORROBORATIONS_TO_VALIDATE]
        _guard_evidence(heuristics, new, golem_id, [t for t in counted if t not in item.corroborations])
        if new.entry_id is None:
            category = EntryType.WARNING if new.kind == StageKind.THREAT_WARNING else EntryType.INSIGHT
            new.entry_id = _admit(semantic, new, golem_id, tick, category)
        if new.status == StageStatus.VALIDATED and new.entry_id:
            entry = semantic.get(new.entry_id)
            if entry is not None and entry.confidence < new.confidence:
                semantic.update(entry.model_copy(update={"confidence": new.confidence}))
        staging.put(new)
        moved.append(new.id)
    return moved
