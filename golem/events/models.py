"""GolemEvent: the one envelope of the Event Fabric (docs/design/events.md).

Every event has the same envelope (id, golem, tick, time, subsystem, kind, payload); `kind` is
"<subsystem>.<what>", e.g. "actions.blocked". The id is derived from what the event is about, so an
activity retried by Temporal emits the same id again and the store keeps one event.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import BaseModel, Field


class Subsystem(str, Enum):
    HEARTBEAT = "heartbeat"  # tick started/finished, tier, FSM
    INTERVENTIONS = "interventions"  # steer accepted / rejected / applied, follow-ups
    ACTIONS = "actions"  # proposed, blocked (and why), executed, verified, reorged
    GRIMOIRE = "grimoire"  # admitted, quarantined, superseded, playbook revised
    BUDGET = "budget"  # spend against the caps
    DREAMS = "dreams"
    MORTALITY = "mortality"  # vitality and phase
    SAFETY = "safety"  # incidents, invariant violations
    ALERTS = "alerts"  # chain RPC, probe alerts
    CONTROL = "control"  # pause / resume / stop-entries (the owner's stop buttons)
    QUALITY = "quality"  # cognitive quality measured at a cycle (docs/design/events.md#quality-figures)
    STRATEGIES = "strategies"  # a strategy under strategies/ started, ended, completed, or its file is in error


# Every kind the fabric emits, with the subsystem it belongs to. `golem events --kind` is checked against it.
KINDS: dict[str, str] = {
    "heartbeat.tick_started": "a tick's observe step read the chain",
    "heartbeat.gated": "the gate chose the tier (T0/T1/T2) and why",
    "heartbeat.tick_finished": "a tick was recorded: tier, regime, PE vs threshold, prices, HF, equity, costs, FSM trace",
    "heartbeat.tick_failed": "a tick failed; its root cause",
    "heartbeat.debug_requested": "the owner asked what the golem thought at a tick (`golem show`: the debug hook)",
    "interventions.steer_accepted": "a steer the golem took (it is in the tick's state)",
    "interventions.steer_applied": "a steer the tick deliberated on",
    "interventions.self_steer": "a steer the golem's own risk daemon, mortality engine or PolicyCage sent after the tick",
    "interventions.steer_rejected": "a steer or follow-up refused, with the reason",
    "interventions.followup_delivered": "a follow-up handed to its window",
    "heartbeat.deliberation_started": "decide set up the session (tier, model, tools offered) and is about to ask (agent_start)",
    "heartbeat.deliberation_ended": "the session closed: answered (model, cost, rounds, tokens) or not (agent_end)",
    "actions.read": "the deliberator read the chain or speculated a write in its tool loop",
    "actions.proposed": "the decision proposed a tool call",
    "actions.blocked": "the write path blocked an action, and why",
    "actions.sending": "an approved action is being signed and sent now (tool_execution_start)",
    "actions.tx": "one of an action's transactions, as the journal holds it (tool_execution_update)",
    "actions.landed": "an action's sending ended: executed, failed or refused (tool_execution_end)",
    "actions.executed": "an action's transaction was mined",
    "actions.failed": "an action failed or was cancelled",
    "actions.deferred": "an action was not sent (dry run)",
    "actions.verified": "the outcome of the tick's actions was verified against the chain",
    "actions.reorged": "a reorg removed an earlier tick's transactions",
    "grimoire.admitted": "delta consolidation admitted knowledge entries",
    "grimoire.quarantined": "delta consolidation quarantined entries",
    "grimoire.superseded": "entries merged into or superseded by others",
    "grimoire.playbook_revised": "PLAYBOOK.md got a new revision",
    "grimoire.clade_shared": "the golem sent its own clade entries (warnings first) on the clade's bus",
    "grimoire.clade_received": "entries from siblings came in (quarantined)",
    "grimoire.clade_stage": "an inbound clade entry moved on: consensus, sandbox, adopted or rejected, and why",
    "grimoire.proposal_decided": "the golem's admission gate decided on a memory-consolidator's proposal",
    "grimoire.clade_unreachable": "the clade's bus did not answer: nothing was marked sent, the next pass retries",
    "grimoire.change_rolled_back": "a learning change (loop-2 retune, PLAYBOOK rule) was worse in matched regimes: undone",
    "budget.spend": "what the tick spent (inference, gas) against today's budgets",
    "dreams.cycle_finished": "a dream cycle ended",
    "mortality.phase_changed": "the behavioural phase changed",
    "safety.incident": "an invariant was violated after execution",
    "safety.threat": "a DeFi threat detector fired on a write (sandwich exposure, oracle manipulation, flash-loan move)",
    "safety.strategy_unviable": "the delta cycle judged the strategy unviable from experience: the golem is restricted",
    "safety.strategy_warning": "the delta cycle found the strategy straining (thin liquidity, repeated refusals)",
    "safety.strategy_acknowledged": "the owner acknowledged the strategy's findings (`golem strategy-check --ack`)",
    "alerts.raised": "something needs the owner's attention",
    "alerts.probe": "the heartbeat-monitor's ProbeAlert (a vital past its threshold), batched per window",
    "alerts.process_died": "`golem run`'s supervisor saw a process of the stack exit (Temporal, Anvil, worker, ...)",
    "alerts.process_restarted": "the supervisor restarted it; how long it was down",
    "alerts.supervision_gave_up": "a process crashed too often: the stack stops",
    "control.paused": "the owner paused the golem",
    "control.resumed": "the owner resumed the golem",
    "control.entries_stopped": "the owner stopped new entries",
    "control.entries_allowed": "the owner allowed new entries again",
    "control.approval_approved": "the owner approved a privileged request (it runs on the next tick)",
    "control.approval_denied": "the owner denied a privileged request",
    "control.approval_expired": "a privileged request expired unanswered",
    "quality.reflection_consistency": "the weekly cosine between LLM-worded reflections and their rewording",
    "quality.heuristic_survival": "the share of PLAYBOOK heuristics still in force 100 ticks after they entered",
    "strategies.started": "a strategy under strategies/ became active (its schedule opened, its trigger held)",
    "strategies.ended": "an active strategy's window closed; it waits for the next",
    "strategies.completed": "a strategy completed for good, and which completion line held",
    "strategies.error": "a strategy file does not parse: left out of the tick, the others keep running",
    "quality.outcome_change_point": "the per-tick outcomes shifted (CUSUM): matched before/after windows restart there",
    "quality.external_trend": "the 30-day Sharpe, drawdown and PnL, and how many days the PnL has declined",
}


class GolemEvent(BaseModel):
    id: str
    golem: str
    tick: int | None = None
    time: str  # ISO-8601 UTC, when it happened
    subsystem: Subsystem
    kind: str
    payload: dict[str, Any] = Field(default_factory=dict)
    seq: int | None = None  # the store's order (set when read back)

    def stored_seq(self) -> int:
        """The store's order of an event read back from it (the store sets it on every read)."""
        if self.seq is None:
            raise ValueError(f"event {self.kind} at {self.time} was not read from the store: it has no seq")
        return self.seq


def make_event(golem: str, tick: int | None, time: str, kind: str, key: str = "", **payload: Any) -> GolemEvent:
    """An event whose id is its golem, tick, kind and key: the same fact emitted twice is one event."""
    if kind not in KINDS:
        raise ValueError(f"unknown event kind {kind!r}")
    subsystem = Subsystem(kind.split(".", 1)[0])
    ident = f"{golem}:{'-' if tick is None else tick}:{kind}" + (f":{key}" if key else "")
    return GolemEvent(id=ident, golem=golem, tick=tick, time=time, subsystem=subsystem, kind=kind, payload=payload)
