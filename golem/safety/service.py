"""SafetyService: steps 5–8 of the heartbeat behind one object the worker builds once per golem.

It owns the audit trail (`audit.sqlite`), the risk store (`risk.sqlite`), the confirmation tracker
(tables in `tx_journal.sqlite`) and uses the permit store and tx journal the worker already has.
Every permit, tool call and outcome goes on the hash-chained audit trail. Activities call it; it
never decides what runs next.
"""

from __future__ import annotations

from pathlib import Path

from eth_typing import HexStr
from web3 import Web3

from golem.extensions.registry import registry_for
from golem.chain.confirmations import ConfirmationReport, ConfirmationTracker
from golem.chain.contracts import Deployment
from golem.chain.executor import Executor
from golem.chain.journal import TxJournal
from golem.chain.outcome import OutcomeVerification, verify_outcome
from golem.chain.permits import PermitError, PermitStore
from golem.chain.tools.schemas import ToolArgumentError
from golem.chain.tools.valuation import action_value_usd
from golem.inference.strategy import Strategy
from golem.models.config import GolemConfig
from golem.models.enums import ActionStatus, BehavioralPhase
from golem.models.interventions import Steer
from golem.models.life import SomaticMarker
from golem.models.observation import Observation
from golem.models.record import ActionRecord
from golem.models.threats import MarketWindow
from golem.models.wake import Forecast
from golem.models.tick import ProposedAction, SimulationResult, ValidatedAction, ValidationResult
from golem.safety.audit import AuditLog
from golem.safety.cage import Resimulate, SafetyCage, ToolCallDecision, ValidationContext, validate_layered
from golem.safety.constraints import MustGate, must_gate
from golem.safety.limits import SafetyLimits
from golem.safety.policy import opens_exposure
from golem.safety.risk import RiskStore, net_value_usd
from golem.safety.run_actions import RunAction, RunActionLedger, SlotTaken, same_action
from golem.safety.urgency import LineRule
from golem.layout import DataLayout


class SafetyService:
    def __init__(self, config: GolemConfig, data: DataLayout | str | Path, *, permits: PermitStore | None = None,
                 journal: TxJournal | None = None) -> None:
        self.layout = layout = DataLayout.of(data)
        # The worker's config from golem.toml at start: only the default for callers outside a tick. A tick's
        # checks use the config version the tick carries (config=ctx.config), never this one.
        self.config = config
        self.limits = SafetyLimits.from_config(config)
        self.cage = SafetyCage(self.limits, registry_for(config.extensions.disabled))
        self._cages: dict[tuple[str, tuple[str, ...]], SafetyCage] = {
            (self.limits.policy_hash(), tuple(sorted(config.extensions.disabled))): self.cage}
        self.audit = AuditLog(layout.audit)
        self.risk = RiskStore(layout.risk)
        self.permits = permits or PermitStore(layout.permits)
        self.journal = journal or TxJournal(layout.tx_journal)
        self.confirmations = ConfirmationTracker(self.journal.path)
        self.run_actions = RunActionLedger(layout.run_actions)

    def limits_for(self, config: GolemConfig | None) -> SafetyLimits:
        """The hard limits of a config version (the worker's own when None)."""
        return self.limits if config is None else self.cage_for(config).limits

    def cage_for(self, config: GolemConfig | None) -> SafetyCage:
        """The PolicyCage of a config version, one per distinct set of limits and of switched-off extensions (the
        tool_call hook fires the registry's members)."""
        if config is None:
            return self.cage
        limits = SafetyLimits.from_config(config)
        key = (limits.policy_hash(), tuple(sorted(config.extensions.disabled)))
        if key not in self._cages:
            self._cages[key] = SafetyCage(limits, registry_for(config.extensions.disabled))
        return self._cages[key]

    # ── before the LLM ──────────────────────────────────────────────────────────────────────

    def pre_llm_gate(self, golem_id: str, tick: int, strategy: Strategy, observation: Observation) -> MustGate:
        """STRATEGY.md MUST lines checked before any LLM call: a breach forces T2 and is audited."""
        gate = must_gate(strategy, observation.snapshot)
        if gate.breached:
            self.audit.append(golem_id, "must.breached", {"tick": tick, "breached": gate.breached})
        return gate

    # ── validate ────────────────────────────────────────────────────────────────────────────

    def validate(
        self, golem_id: str, tick: int, phase: BehavioralPhase, actions: list[ProposedAction],
        simulation: SimulationResult, observation: Observation, strategy: Strategy | None = None,
        steers: list[Steer] | None = None, now: float | None = None, run_id: str | None = None,
        config: GolemConfig | None = None, entries_stopped: bool = False, markers: list[SomaticMarker] | None = None,
        last_price: float | None = None, resimulate: Resimulate | None = None, forecast: Forecast | None = None,
        floor: float | None = None, gas_history: list[float] | None = None, approvals: dict[str, str] | None = None,
        line_rules: list[LineRule] | None = None, market: MarketWindow | None = None, restricted: str | None = None,
    ) -> tuple[ValidationResult, list[ToolCallDecision]]:
        """`steers`: the owner's steers the tick deliberated on (high/critical make its actions protective);
        `now`: the tick's clock in unix seconds (the gas partition's day), the store's clock when None;
        `run_id`: the Temporal run deciding — an action another run of the tick already sent is not
        validated again (no permit), its verdict names the run that sent it. `config`: the tick's config
        version, whose limits the cage enforces (the worker's own config when None). `resimulate`: simulates the
        actions again at the sizes the cage clipped them to (golem.safety.sizing); without it a clip is refused.
        `forecast`, `floor`, `gas_history`, `line_rules`: what urgency is read from (golem.safety.urgency). `approvals`:
        the owner's approved privileged requests (id → tool), the only way a privileged tool passes
        (golem.safety.approvals). `market`: the recent blocks' pair and feed the DeFi threat detectors read
        (golem.chain.market_window; without it only the sandwich check runs). `restricted`: the binding findings of the
        strategy judged by experience (golem.safety.experience): nothing that opens exposure passes."""
        sent = self.sent_by_other_runs(golem_id, tick, actions, run_id) if run_id else {}
        if sent:
            fresh = [a for a in actions if a.action_index not in sent]
            result, decisions = self.validate(golem_id, tick, phase, fresh, simulation, observation, strategy=strategy,
                                              steers=steers, now=now, config=config, entries_stopped=entries_stopped,
                                              markers=markers, last_price=last_price, resimulate=resimulate,
                                              forecast=forecast, floor=floor, gas_history=gas_history,
                                              approvals=approvals, line_rules=line_rules, market=market,
                                              restricted=restricted)
            verdicts = {v.action_index: v for v in result.actions}
            for index, claim in sent.items():
                intents = self.journal.intents_for(golem_id, tick, claim.action_index)
                hashes = ", ".join(i.tx_hash for i in intents)
                verdicts[index] = ValidatedAction(
                    action_index=index, approved=False, sent_by_run=claim.run_id,
                    reason=f"already sent by run {claim.run_id} of tick {tick} as action {claim.action_index} "
                           f"(tx {hashes}); not sent again",
                )
                self.audit.append(golem_id, "action.already_sent", {
                    "tick": tick, "action_index": index, "run_id": run_id, "sent_by_run": claim.run_id,
                    "sent_as": claim.action_index, "tx_hashes": [i.tx_hash for i in intents],
                })  # fmt: skip
            return ValidationResult(actions=[verdicts[a.action_index] for a in actions]), decisions
        nav = net_value_usd(observation.snapshot)
        self.risk.mark_nav(golem_id, tick, nav, now=now)
        ctx = ValidationContext(golem_id=golem_id, tick=tick, phase=phase, observation=observation,
                                risk=self.risk.snapshot(golem_id, nav, now=now), strategy=strategy,
                                steers=list(steers or []), entries_stopped=entries_stopped,
                                markers=list(markers or []), last_price=last_price, forecast=forecast, floor=floor,
                                gas_history=list(gas_history or []), approvals=dict(approvals or {}),
                                line_rules=list(line_rules or []), market=market, restricted=restricted)
        for sim in simulation.actions:
            if not sim.ok:
                self.audit.append(golem_id, "simulation.reverted", {"tick": tick, "action_index": sim.action_index,
                                                                   "revert_reason": sim.revert_reason})
        return validate_layered(self.cage_for(config), actions, simulation, ctx, self.permits, self.audit,
                                resimulate=resimulate)

    def sent_by_other_runs(self, golem_id: str, tick: int, actions: list[ProposedAction],
                           run_id: str) -> dict[int, RunAction]:
        """action_index → the other run's claim, for each action another run of this tick already sent
        (the same tool and arguments, with a journaled transaction)."""
        others = self.run_actions.others(golem_id, tick, run_id)
        out: dict[int, RunAction] = {}
        for action in actions:
            for claim in others:
                if same_action(claim, action) and self.journal.intents_for(golem_id, tick, claim.action_index):
                    out[action.action_index] = claim
                    break
        return out

    # ── execute ─────────────────────────────────────────────────────────────────────────────

    def execute(self, executor: Executor, golem_id: str, tick: int, action: ProposedAction, permit_id: str,
                observation: Observation, run_id: str | None = None) -> ActionRecord:
        """Run one permitted action; refused permits and the result are audited. With `run_id`, the
        action's slot is claimed for that run first (a slot another run holds is refused)."""
        try:
            if run_id:
                self.run_actions.claim(golem_id, tick, action, run_id)
            record = executor.execute(golem_id, tick, action, permit_id, observation)
        except SlotTaken as e:
            self.audit.append(golem_id, "permit.refused", {"tick": tick, "action_index": action.action_index,
                                                          "permit_id": permit_id, "reason": str(e)})
            raise PermitError(str(e)) from None
        except PermitError as e:
            self.audit.append(golem_id, "permit.refused", {"tick": tick, "action_index": action.action_index,
                                                          "permit_id": permit_id, "reason": str(e)})
            raise
        self.audit.append(golem_id, "permit.committed", {"tick": tick, "action_index": action.action_index,
                                                        "permit_id": permit_id, "tool": action.tool})
        intents = self.journal.intents_for(golem_id, tick, action.action_index)
        self.audit.append(golem_id, f"tx.{record.status.value}", {
            "tick": tick, "action_index": action.action_index, "tool": action.tool, "permit_id": permit_id,
            "tx_hashes": [i.tx_hash for i in intents], "nonces": [i.nonce for i in intents],
            "block_number": record.block_number, "gas_used": record.gas_used, "reason": record.block_reason,
        })  # fmt: skip
        return record

    def cancel_unsent(self, golem_id: str, tick: int, actions: list[ProposedAction], validation: ValidationResult,
                      reason: str, *, restricted: bool = False) -> list[ActionRecord]:
        """A high-severity steer during EXECUTING (CancelPending), or a constraint hit earlier in the batch
        (Restricted, `restricted`): cancel every approved action with nothing sent yet."""
        verdicts = {v.action_index: v for v in validation.actions}
        out = []
        for action in actions:
            v = verdicts.get(action.action_index)
            if v is None or not v.approved or not v.permit_id or self.journal.intents_for(golem_id, tick, action.action_index):
                continue
            try:
                self.permits.cancel(v.permit_id, reason)
            except PermitError:
                continue  # already committed (being sent) or gone: never cancel what may be on its way
            self.audit.append(golem_id, "permit.cancelled", {"tick": tick, "action_index": action.action_index,
                                                            "permit_id": v.permit_id, "reason": reason})
            out.append(ActionRecord(action_index=action.action_index, action_type=action.tool, tool_name=action.tool,
                                    permit_id=v.permit_id,
                                    status=ActionStatus.BLOCKED if restricted else ActionStatus.CANCELLED,
                                    block_reason=(f"restricted, not sent: {reason}" if restricted
                                                  else f"cancelled before sending: {reason}")))
        return out

    # ── verify ──────────────────────────────────────────────────────────────────────────────

    def verify(
        self, w3: Web3, deployment: Deployment, golem_id: str, tick: int, account: str,
        actions: list[ProposedAction], simulation: SimulationResult, records: list[ActionRecord],
        observation: Observation, *, timeout_s: float = 5.0, now: float | None = None,
        config: GolemConfig | None = None,
    ) -> OutcomeVerification:
        """OutcomeVerification + invariants; tracks executed txs for confirmation and feeds the risk
        store. `result.safety_incident` (if any) is the episode to write at confidence 1.0."""
        cfg = config or self.config  # the tick's config version
        depth = self.confirmations.depth(observation.snapshot.block_number)
        confs = max(cfg.chain.confirmations, depth) if cfg.chain.confirmations else 0
        result = verify_outcome(
            w3, deployment, self.journal, golem_id, tick, account, actions, simulation, records, observation,
            confs, max_trade_size_usd=self.limits_for(config).policy.max_trade_size_usd, timeout_s=timeout_s,
        )  # fmt: skip
        by_index = {a.action_index: a for a in actions}
        n_exec = max(1, sum(1 for r in records if r.status is ActionStatus.EXECUTED))
        for r in records:
            if r.status not in (ActionStatus.EXECUTED, ActionStatus.FAILED) or r.action_index not in by_index:
                continue
            action = by_index[r.action_index]
            if r.tx_hash and r.block_number is not None:
                receipt = w3.eth.get_transaction_receipt(HexStr(r.tx_hash))
                self.confirmations.track(golem_id, tick, r.action_index, r.tx_hash, receipt["blockNumber"],
                                         receipt["blockHash"])
            try:
                value, exposure = action_value_usd(action, observation), opens_exposure(action)
            except ToolArgumentError:
                value, exposure = 0.0, False
            self.risk.record_outcome(
                golem_id, tick, r.action_index, action.tool, opens_exposure=exposure,
                verified=result.outcome.verified and r.status is ActionStatus.EXECUTED,
                value_usd=value, pnl_usd=(result.outcome.pnl_impact or 0.0) / n_exec, gas_usd=r.gas_cost, now=now,
            )  # fmt: skip
        self.audit.append(golem_id, "outcome.verified" if result.outcome.verified else "outcome.unverified", {
            "tick": tick, "expected": result.outcome.expected, "actual": result.outcome.actual,
            "deviations_bps": result.deviations.balance_change_bps, "gas_deviation_bps": result.deviations.gas_deviation_bps,
            "unexpected_logs": [lg.label for lg in result.deviations.unexpected_logs],
            "missing_expected_logs": result.deviations.missing_expected_logs, "pnl_impact": result.outcome.pnl_impact,
        })  # fmt: skip
        if result.safety_incident:
            self.audit.append(golem_id, "safety_incident", result.safety_incident)
        return result

    # ── every tick ──────────────────────────────────────────────────────────────────────────

    def confirm(self, w3: Web3, golem_id: str) -> ConfirmationReport:
        """Call once per tick: pending → confirmed, or reorged (report.force_t2)."""
        report = self.confirmations.poll(w3, golem_id)
        for a in report.newly_confirmed:
            self.audit.append(golem_id, "action.confirmed", {"tick": a.tick, "action_index": a.action_index,
                                                            "tx_hash": a.tx_hash, "confirmations": a.confirmations})
        for a in report.reorged:
            self.audit.append(golem_id, "action.reorged", {"tick": a.tick, "action_index": a.action_index,
                                                          "tx_hash": a.tx_hash, "detail": a.detail})
        if report.reorg_detected_at:
            self.audit.append(golem_id, "chain.reorg", {"fork_blocks": report.reorg_detected_at, "head": report.head,
                                                       "depth": report.depth})
        return report
