"""The memory-consolidator's activity (it holds no wallet and touches no chain) and its Temporal Schedule: read the
golems' episodes, keep the curator's patterns that recur across golems, offer them to each golem's inbox. Pure
parts: golem.clade.consolidator; design: docs/design/clade.md#the-memory-consolidator.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from pathlib import Path

from temporalio import activity
from temporalio.client import (Client, Schedule, ScheduleActionStartWorkflow, ScheduleAlreadyRunningError,
                               ScheduleIntervalSpec, ScheduleOverlapPolicy, SchedulePolicy, ScheduleSpec,
                               ScheduleUpdate, ScheduleUpdateInput)

from activities.clade import ledger_path
from golem import ids
from golem.clade.consolidator import patterns, proposals
from golem.clade.proposals import ProposalInbox
from golem.grimoire.episodes.model import Episode
from golem.models.clade import ConsolidatorInput, ConsolidatorReport, consolidator_id

CONSOLIDATOR_WORKFLOW = "MemoryConsolidatorWorkflow"  # by name: activities/ does not import workflows/


def _episodes(data: str, home: str) -> list[Episode]:
    from golem.grimoire.access import configured_embedder
    from golem.grimoire.episodes.store import EpisodeStore
    from golem.layout import DataLayout

    if not Path(data).is_dir():
        raise FileNotFoundError(f"no data directory at {data}")
    store = EpisodeStore(DataLayout(Path(data)).episodes, configured_embedder(Path(home) if home else None),
                         on_model_switch="ignore")
    return store.all()


def consolidate(inp: ConsolidatorInput) -> ConsolidatorReport:
    report = ConsolidatorReport()
    read: dict[str, list[Episode]] = {}
    for g in inp.golems:
        try:
            read[g.id] = _episodes(g.data, g.home)
            report.golems_read.append(g.id)
        except Exception as err:  # one golem's unreadable memory does not stop the others'
            report.unreadable[g.id] = f"{type(err).__name__}: {str(err)[:200]}"
    report.episodes = sum(len(v) for v in read.values())
    found = patterns(read, min_support=inp.min_support, min_golems=inp.min_golems)
    report.patterns = [p.text for p in found]
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    for g in inp.golems:
        if g.id not in read:
            continue
        offered = proposals(found, [g.id], inp.name)[g.id]
        report.offered[g.id] = ProposalInbox(ledger_path(Path(g.data))).offer(offered, when)
    return report


class ConsolidatorActivities:
    @activity.defn(name="consolidate_golems")
    async def consolidate(self, inp: ConsolidatorInput) -> ConsolidatorReport:
        report = await asyncio.to_thread(consolidate, inp)
        activity.logger.info("consolidator %s: %d episodes of %s, %d pattern(s), offered %s", inp.name,
                             report.episodes, report.golems_read, len(report.patterns), report.offered)
        return report


async def schedule(client: Client, inp: ConsolidatorInput, every: timedelta) -> str:
    """Create the consolidator's Schedule (or update it in place): one run per `every`, never two at once, on the
    queue of the fleet host holding its golems' data (inp.host), else on the clade's."""
    sid = consolidator_id(inp.name)
    queue = ids.host_queue(inp.host) if inp.host else ids.clade_queue(inp.clade)  # the host worker needs no other
    action = ScheduleActionStartWorkflow(CONSOLIDATOR_WORKFLOW, inp, id=sid, task_queue=queue)
    sched = Schedule(action=action, spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=every)]),
                     policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP))
    try:
        await client.create_schedule(sid, sched)
    except ScheduleAlreadyRunningError:
        def update(_: ScheduleUpdateInput) -> ScheduleUpdate:
            return ScheduleUpdate(schedule=sched)
        await client.get_schedule_handle(sid).update(update)
    return sid
