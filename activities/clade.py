"""The clade's entry exchange as a golem's activities use it: share its own entries on the clade's bus (a signal
that starts the bus if the clade has none yet), read what siblings shared since its cursor (a query), and one pass
of the four stages over its own stores. The pure parts are golem.clade.bus and golem.clade.exchange; design:
docs/design/clade.md.
"""

from __future__ import annotations

import asyncio
import hashlib
from datetime import timedelta
from collections.abc import Callable
from pathlib import Path

from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError, RPCStatusCode

from golem import ids
from golem.clade import exchange
from golem.clade.bus import warnings_first
from golem.events.models import GolemEvent, make_event
from golem.grimoire.semantic.store import SemanticStore
from golem.models.clade import (BusEntry, BusInput, BusState, ExchangeStep, ShareBatch, SharedEntry, SinceQuery,
                                exchange_id)
from golem.models.record import DecisionCycleRecord

# by name: activities/ does not import workflows/ (the workflows import the activities)
BUS_WORKFLOW = "CladeExchangeWorkflow"
SHARE_AT_ONCE = 64  # entries per share signal


def ledger_path(data_root: Path) -> Path:
    return Path(data_root) / "clade" / "exchange.sqlite"


class CladeBus:
    def __init__(self, client: Client) -> None:
        self.client = client

    async def share(self, clade: str, batch: ShareBatch, timeout_s: float) -> None:
        """A signal (with start): the server keeps it while no member's worker serves the bus; a resent batch or an
        entry already carried is dropped by the bus."""
        await self.client.start_workflow(
            BUS_WORKFLOW, BusInput(state=BusState(clade=clade)), id=exchange_id(clade),
            task_queue=ids.clade_queue(clade), id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            start_signal="share", start_signal_args=[batch], rpc_timeout=timedelta(seconds=timeout_s))

    async def since(self, clade: str, after: int, me: str, timeout_s: float) -> list[BusEntry]:
        """What siblings shared after `after`; [] while the clade has no bus yet."""
        handle = self.client.get_workflow_handle(exchange_id(clade))
        try:
            got: list[BusEntry] = await handle.query("since", SinceQuery(after=after, me=me), result_type=list[BusEntry],
                                                      rpc_timeout=timedelta(seconds=timeout_s))
            return got
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return []
            raise

    async def state(self, clade: str, timeout_s: float) -> BusState | None:
        handle = self.client.get_workflow_handle(exchange_id(clade))
        try:
            st: BusState = await handle.query("state", result_type=BusState, rpc_timeout=timedelta(seconds=timeout_s))
            return st
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return None
            raise


def batch_id(origin: str, entries: list[SharedEntry]) -> str:
    """The same entries from the same golem make the same batch id (a retried send is one batch)."""
    digest = hashlib.sha256("\n".join(sorted(s.key for s in entries)).encode()).hexdigest()[:16]
    return f"{origin}/{digest}"


async def share_entries(bus: CladeBus, ledger: exchange.CladeLedger, clade: str, entries: list[SharedEntry],
                        tick: int, timeout_s: float) -> int:
    """Send what was never sent (warnings first), then mark it sent; a send that fails marks nothing (next pass)."""
    fresh = ledger.unsent([s.entry_id for s in entries])
    todo = warnings_first(s for s in entries if s.entry_id in fresh)
    for i in range(0, len(todo), SHARE_AT_ONCE):
        part = todo[i:i + SHARE_AT_ONCE]
        await bus.share(clade, ShareBatch(id=batch_id(part[0].origin, part), entries=part), timeout_s)
        await asyncio.to_thread(ledger.mark_sent, part, tick)
    return len(todo)


RESCAN_TICKS = 50  # a confidence that crossed a sharing line without a content change is seen within this many ticks


def _scan_due(ledger: exchange.CladeLedger, changes: int, tick: int) -> bool:
    """Reading the whole store each tick is the pass's cost: it is read when its entries changed since the last
    read, or RESCAN_TICKS later (a confidence change alone does not count as a change)."""
    return ledger.cursor("~semantic-changes") != changes or tick - ledger.cursor("~scanned-tick") >= RESCAN_TICKS \
        or tick < ledger.cursor("~scanned-tick")


def _scanned(ledger: exchange.CladeLedger, changes: int, tick: int) -> None:
    ledger.set_cursor("~semantic-changes", changes)
    ledger.set_cursor("~scanned-tick", tick)


async def exchange_pass(bus: CladeBus, ledger: exchange.CladeLedger, semantic: SemanticStore,
                        recent: Callable[[int], list[DecisionCycleRecord]], *, clade: str, me: str, tick: int, timeout_s: float, window: int,
                        quarantine_ticks: int) -> ExchangeStep:
    """One pass: share the golem's own clade entries, take in what siblings shared, move every inbound entry on by
    one stage. Temporal not answering skips the bus part of this pass and says so; the stages still move."""
    step = ExchangeStep()
    errors: list[str] = []
    changes = await asyncio.to_thread(semantic.change_count)
    if await asyncio.to_thread(_scan_due, ledger, changes, tick):
        own = await asyncio.to_thread(
            lambda: [exchange.shared(e, me) for e in semantic.all() if exchange.propagation(e) == "clade"])
        try:
            step.shared = await share_entries(bus, ledger, clade, own, tick, timeout_s)
            await asyncio.to_thread(_scanned, ledger, changes, tick)
        except Exception as err:  # the bus unreachable: nothing marked sent, the next pass sends it
            errors.append(f"not shared: {str(err)[:200]}")
    try:
        cursor = await asyncio.to_thread(ledger.cursor, clade)
        got = await bus.since(clade, cursor, me, timeout_s)
        if got:
            new = await asyncio.to_thread(exchange.receive, ledger, [b.entry for b in got], tick, me)
            step.received = len(new)
            await asyncio.to_thread(ledger.set_cursor, clade, max(b.seq for b in got))
    except Exception as err:
        errors.append(f"not read: {str(err)[:200]}")
    records = await asyncio.to_thread(recent, window) if ledger.inbound("consensus") else []
    step.moved = await asyncio.to_thread(exchange.advance, ledger, semantic, records, tick, window=window,
                                         quarantine_ticks=quarantine_ticks)
    step.error = "; ".join(errors) or None
    return step


def exchange_events(golem: str, tick: int, time: str, step: ExchangeStep) -> list[GolemEvent]:
    """The pass on the Event Fabric: what was shared, received, and each stage an entry moved to."""
    out = []
    if step.shared:
        out.append(make_event(golem, tick, time, "grimoire.clade_shared", "", entries=step.shared))
    if step.received:
        out.append(make_event(golem, tick, time, "grimoire.clade_received", "", entries=step.received))
    for line in step.moved:
        moves, _, content = line.partition(": ")
        before, _, after = moves.partition("→")
        out.append(make_event(golem, tick, time, "grimoire.clade_stage",
                              hashlib.sha256(line.encode()).hexdigest()[:12], stage_from=before, stage=after,
                              content=content))
    if step.error:
        out.append(make_event(golem, tick, time, "grimoire.clade_unreachable", "", error=step.error))
    return out
