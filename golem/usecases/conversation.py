"""What a model reads of the owner's chat session: the compaction of the turns older than the tail (the session hook's
compaction member, golem.inference.compaction) with the invariants the data dir holds now, and the tail.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from golem.extensions.hooks import fire
from golem.extensions.registry import registry_for
from golem.inference.compaction import CompactionLog, CompactionPreserve, CompactionResult, compact
from golem.inference.session import SessionTree
from golem.layout import DataLayout
from golem.models.config import GolemConfig

WARNING_WINDOW = timedelta(hours=1)  # the monitor's alerts still active for the preserve


def preserve(data: DataLayout, cfg: GolemConfig, now: datetime | None = None) -> CompactionPreserve:
    """The invariants as the data dir has them now: the config's cage, the newest record's positions and phase,
    PLAYBOOK.md's rules, the monitor's alerts of the last hour and what binds the strategy."""
    from golem.events.store import EventStore
    from golem.life.cycle_store import CycleStore
    from golem.safety.experience import ViabilityStore
    from golem.safety.limits import SafetyLimits

    out = CompactionPreserve(policy_cage_hash=SafetyLimits.from_config(cfg).policy_hash())
    if data.cycle_index.exists():
        store = CycleStore(data.root)
        rows = store.recent(1)
        if rows:
            rec = store.load(rows[0]["tick"])
            out.behavioral_phase = rec.phase.value
            out.positions = [{"kind": p.kind, "collateral": round(p.collateral, 6), "debt": round(p.debt, 2),
                              "health_factor": None if p.health_factor is None else round(p.health_factor, 3)}
                             for p in rec.observation.snapshot.positions]
    if data.playbook.exists():
        out.playbook_heuristics = [ln.lstrip("-* ").strip() for ln in data.playbook.read_text().splitlines()
                                   if ln.lstrip("-* ").startswith("WHEN ")]
    since = ((now or datetime.now(timezone.utc)) - WARNING_WINDOW).isoformat()
    if data.events.exists():
        for e in EventStore(data).read(kinds=["alerts.probe"], since=since, limit=20):
            out.active_warnings.append(f"{e.payload.get('vital')}: {e.payload.get('detail') or e.payload.get('value')}")
    try:
        state = ViabilityStore(data.viability).load()
    except ValueError:
        state = None
    if state is not None and state.assessment is not None:
        out.active_warnings += [f"strategy {f.kind} ({f.severity})" for f in state.assessment.findings
                                if f.kind not in state.acknowledged]
    return out


def conversation_context(data: DataLayout, cfg: GolemConfig, tail: int,
                         now: datetime | None = None) -> tuple[CompactionResult | None, list[tuple[str, str]]]:
    """What a model reads of the owner's conversation: the compaction of the turns older than the last `tail` (None
    when there are none, or the compaction extension is switched off) and the tail itself."""
    path = data.conversation
    if tail <= 0 or not path.exists():
        return None, []
    turns = SessionTree.load(path).current_path()
    older, recent = turns[:-tail], [(n.role, n.text) for n in turns[-tail:]]
    if not older:
        return None, recent
    log = CompactionLog(path.parent / "compactions.jsonl")

    def compaction() -> CompactionResult:
        done = log.find(older[-1].id)  # a path is compacted once
        if done is None:
            done = compact(older, preserve(data, cfg, now))
            log.append(done)
        return done

    _, results = fire(registry_for(cfg.extensions.disabled), "session", {"compaction": compaction})
    return (results[0][1] if results else None), recent
