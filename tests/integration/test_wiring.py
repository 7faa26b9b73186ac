"""Every wire guarded: each test here fails when one call of the running loop is deleted.

Each test names the line it guards; deleting that line (or branch) turns it red. They call the activities directly
on real parts (Anvil, LanceDB, SQLite; the LLM faked at the HTTP boundary), except `learn_at_delta`, which lives in
workflow code and runs on the Temporal dev server. The chain is an Anvil with chain id 8453: to the golem an
external RPC, so it dry-runs unless a test passes `live=True` (as `--live` does).
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
import tomli_w
from temporalio.testing import ActivityEnvironment

from activities.consolidation import ConsolidationActivities
from activities.tick import TickActivities
from golem.chain.web3client import make_web3
from golem.grimoire.episodes.model import Episode, Importance
from golem.grimoire.playbook.compile import PlaybookRefused
from golem.grimoire.semantic.store import EntrySource, EntryType, GrimoireEntry
from golem.inference.decision import decision_tools
from golem.deliberators import select_deliberator
from golem.layout import DataLayout
from golem.models.config import load_config
from golem.models.enums import ActionStatus, MarketRegime, Tier
from golem.models.golem import ConsolidationInput, TickFailure
from golem.models.state import GolemState
from golem.models.tick import (
    DecideInput,
    ExecuteInput,
    ObserveInput,
    ProposedAction,
    RetrieveInput,
    SimulateInput,
    TickContext,
    ValidateInput,
    VerifyInput,
)
from infra.anvil import AnvilProcess, free_port
from infra.forks import ForkRegistry
from infra.world_cache import deploy_or_load
from tests.integration.golem_rig import EXAMPLE_HOME, GOLEM_KEY, in_process_worker, make_rig
from tests.unit.inference_fakes import FakeMessagesAPI, decide, message, tool_use
from workers.services import GolemServices
from workers.telemetry import span_exporter

pytestmark = pytest.mark.integration

EXTERNAL_CHAIN_ID = 8453  # not the embedded sandbox (31337): an "external RPC" to the golem
GID = "wire-golem"
STARTED = "2026-11-22T00:00:00+00:00"


class ExternalChain:
    """One Anvil with the dev world, on a chain id the golem treats as external."""

    def __init__(self, tmp: Path) -> None:
        self.anvil = AnvilProcess(port=free_port(), log_path=tmp / "anvil.log", chain_id=EXTERNAL_CHAIN_ID)
        self.anvil.start()
        self.w3 = make_web3(self.anvil.rpc_url)
        dep, _ = deploy_or_load(self.w3, self.anvil.rpc_url)
        self.deployment = dep.model_copy(update={"chain_id": EXTERNAL_CHAIN_ID})

    def golem(self, tmp: Path, *, live: bool | None = None, **config_overrides) -> GolemServices:
        """A golem home and data dir on this chain; its services (offline deliberator unless replaced)."""
        home, data = tmp / "home", tmp / "data"
        home.mkdir(parents=True)
        data.mkdir(parents=True)
        self.deployment.save(data / "deployment.json")
        shutil.copy(EXAMPLE_HOME / "STRATEGY.md", home / "STRATEGY.md")
        raw = {"golem": {"id": GID, "home": "."}, "chain": {"rpc_url": self.anvil.rpc_url},
               "probes": {"kill_switch_path": str(tmp / "killswitch")}}
        for section, values in config_overrides.items():
            raw.setdefault(section, {}).update(values)
        (home / "golem.toml").write_text(tomli_w.dumps(raw))
        return GolemServices(load_config(home / "golem.toml"), DataLayout(data), private_key=GOLEM_KEY, live=live)

    def snapshot(self) -> str:
        return self.w3.provider.make_request("evm_snapshot", [])["result"]

    def revert(self, snap: str) -> None:
        assert self.w3.provider.make_request("evm_revert", [snap]).get("result") is True


@pytest.fixture(scope="module")
def chain(tmp_path_factory) -> Iterator[ExternalChain]:
    c = ExternalChain(tmp_path_factory.mktemp("external-chain"))
    yield c
    c.anvil.stop()


@pytest.fixture
def clean_chain(chain) -> Iterator[ExternalChain]:
    """The chain, reverted after the test (tests here may send transactions)."""
    snap = chain.snapshot()
    try:
        yield chain
    finally:
        chain.revert(snap)


def _ctx(services: GolemServices, tick: int = 1) -> TickContext:
    return TickContext(golem_id=GID, tick=tick, config=services.config, state=GolemState(golem_id=GID),
                       started_at=STARTED)


SWAP = ProposedAction(action_index=0, tool="swap", arguments={"token_in": "WETH", "token_out": "USDC", "amount_in": 1})


def _approved(acts: TickActivities, ctx: TickContext, actions: list[ProposedAction]):
    """observe → simulate → validate on the real write path; every action approved with a permit."""
    obs = acts.observe(ObserveInput(ctx=ctx))
    sim = acts.simulate(SimulateInput(ctx=ctx, observation=obs, actions=actions))
    val = acts.validate(ValidateInput(ctx=ctx, observation=obs, actions=actions, simulation=sim))
    assert all(v.approved and v.permit_id for v in val.actions), val
    return obs, sim, val


# ---- 1. execute's dry-run branch (activities/tick.py `if not self.s.live:`) -----------------------------
async def test_external_rpc_without_live_never_broadcasts_and_says_dry_run(clean_chain, tmp_path):
    services = clean_chain.golem(tmp_path)
    assert services.chain_id == EXTERNAL_CHAIN_ID and services.live is False, "external RPC, no --live: dry run"
    acts = TickActivities(services)
    ctx = _ctx(services)
    obs, _, val = _approved(acts, ctx, [SWAP])
    nonce = clean_chain.w3.eth.get_transaction_count(services.account)

    out = ActivityEnvironment().run(acts.execute, ExecuteInput(ctx=ctx, observation=obs, actions=[SWAP],
                                                                      validation=val))
    assert clean_chain.w3.eth.get_transaction_count(services.account) == nonce, "a dry-run golem broadcast a tx"
    assert services.journal.intents_for(GID, 1, 0) == [], "a dry-run golem journaled a send"
    [rec] = out.records
    assert rec.status is ActionStatus.DEFERRED and rec.tx_hash is None, rec
    assert rec.block_reason and rec.block_reason.startswith("dry-run"), rec.block_reason
    assert rec.permit_id == val.actions[0].permit_id


# ---- 2. execute's CancelPending branch (`if inp.cancelled_reason:`) -------------------------------------
async def test_a_high_steer_during_executing_cancels_what_is_not_sent(clean_chain, tmp_path):
    services = clean_chain.golem(tmp_path, live=True)
    acts = TickActivities(services)
    ctx = _ctx(services)
    obs, _, val = _approved(acts, ctx, [SWAP])
    nonce = clean_chain.w3.eth.get_transaction_count(services.account)

    reason = "steer s-1 (high): stop trading"
    out = ActivityEnvironment().run(acts.execute, ExecuteInput(
        ctx=ctx, observation=obs, actions=[SWAP], validation=val, cancelled_reason=reason))
    assert clean_chain.w3.eth.get_transaction_count(services.account) == nonce, "a cancelled action was sent"
    [rec] = out.records
    assert rec.status is ActionStatus.CANCELLED, rec
    assert rec.block_reason == f"cancelled before sending: {reason}"
    assert services.permits.get(val.actions[0].permit_id).status.value == "cancelled"


# ---- 7. the safety-incident episode (workers/services.py `self.write_safety_incident(...)` in verify) ----
async def test_an_invariant_violated_after_execution_is_remembered_as_an_incident(clean_chain, tmp_path):
    services = clean_chain.golem(tmp_path, live=True)
    acts = TickActivities(services)
    ctx = _ctx(services, tick=4)
    obs, sim, val = _approved(acts, ctx, [SWAP])
    out = ActivityEnvironment().run(acts.execute, ExecuteInput(ctx=ctx, observation=obs, actions=[SWAP],
                                                                      validation=val))
    assert out.records[0].status is ActionStatus.EXECUTED, out.records
    clean_chain.w3.provider.make_request("evm_mine", [])
    # The swap's receipts checked as if the action had been an Aave supply: foreign logs → a safety incident.
    supply = ProposedAction(action_index=0, tool="supply", arguments={"amount": 1})
    outcome = acts.verify(VerifyInput(ctx=ctx, observation=obs, actions=[supply], simulation=sim,
                                      records=out.records))
    assert not outcome.verified and outcome.invariant_violations
    incident = services.episodes.get(f"{GID}:incident:tick:4")
    assert incident is not None, "the safety incident was not written to the Grimoire"
    assert incident.importance is Importance.EMERGENCY and incident.confidence == 1.0
    assert incident.summary.startswith("SAFETY INCIDENT at tick 4")


# ---- 8. mark_accessed in retrieve (both stores) ----------------------------------------------------------
def test_retrieval_restarts_the_decay_clock_of_what_it_used(chain, tmp_path):
    services = chain.golem(tmp_path)
    acts = TickActivities(services)
    services.episodes.upsert(Episode(
        id=f"{GID}:tick:1", golem_id=GID, tick=1, created_at=STARTED, regime=MarketRegime.RANGE_BOUND,
        tier=Tier.T2, prediction_error=0.8, utility=0.9,
        summary="Tick 1: range bound regime, price 2000, health factor 2.00; repaid debt to protect the loan.",
    ))
    entry = services.semantic.put(GrimoireEntry(
        category=EntryType.HEURISTIC, content="In a range bound regime with health factor near 2, repay debt "
        "to protect the loan when the price falls.", created_tick=1, valid_from=1, market_regime="range_bound",
        source=EntrySource(golem_id=GID),
    ))
    ctx = _ctx(services, tick=7)
    obs = acts.observe(ObserveInput(ctx=ctx)).model_copy(update={"regime": MarketRegime.RANGE_BOUND})
    got = acts.retrieve(RetrieveInput(ctx=ctx, observation=obs, tier=Tier.T2))
    used = {e.id for e in got.entries}
    assert {f"{GID}:tick:1", entry.id} <= used, got

    ep = services.episodes.get(f"{GID}:tick:1")
    assert (ep.last_accessed_tick, ep.access_count) == (7, 1), "retrieve did not mark the episode accessed"
    e = services.semantic.get(entry.id)
    assert (e.last_accessed_at, e.access_count) == (7, 1), "retrieve did not mark the semantic entry accessed"


# ---- 6. the pre-LLM MUST gate in decide (`apply_must_gate(...)`) ---------------------------------------
def _with_fake_claude(services: GolemServices, api: FakeMessagesAPI) -> GolemServices:
    deliberator, why = select_deliberator(
        services.config, {"ANTHROPIC_API_KEY": "sk-test-not-a-key"}, home=services.home, data_dir=services.data_dir,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(api.handler)),
    )
    services.use_deliberator(deliberator, why)
    assert why.startswith("anthropic"), why
    return services


async def test_a_tool_strategy_forbids_is_dropped_from_the_llm_decision(chain, tmp_path):
    # STRATEGY.md (examples/golem-home) says "MUST NOT borrow"; the model proposes a borrow anyway.
    api = FakeMessagesAPI(message([
        tool_use("borrow", {"amount": 500}, 0),
        decide("borrow to lever up", 0.7, True, decision="borrow 500 USDC"),
    ]))
    services = _with_fake_claude(chain.golem(tmp_path, inference={"provider": "anthropic"}), api)
    acts = TickActivities(services)
    ctx = _ctx(services, tick=2)
    obs = acts.observe(ObserveInput(ctx=ctx))
    d = await ActivityEnvironment().run(acts.decide, DecideInput(ctx=ctx, observation=obs, tier=Tier.T2,
                                                                   prediction_error=0.6))
    assert api.requests, "the LLM was asked"
    assert d.record.tool_calls and d.record.tool_calls[0].tool_name == "borrow", "the model did propose a borrow"
    assert [a.tool for a in d.actions] == [], f"a forbidden tool reached the write path: {d.actions}"
    assert "borrow: STRATEGY.md says MUST NOT borrow" in d.record.rejections, d.record.rejections
    assert d.record.recommends_action is False
    # the gate is safety's before_agent_start member, fired in the registry's order
    assert d.record.before_agent_start == ["tools", "context", "compiler", "model-router", "safety"]
    # the request carries the tools member's schemas and the model-router's model
    offered = decision_tools(services.config.policy.approved_assets)
    names = [t["name"] for t in api.requests[0]["tools"]]  # the tool loop's reads first, then the tools member's
    assert names[-len(offered):] == [t["name"] for t in offered] and {"speculate", "get_pool_state"} < set(names)
    assert api.requests[0]["model"] == d.record.model == services.deliberator.route(
        DecideInput(ctx=ctx, observation=obs, tier=Tier.T2, prediction_error=0.6)).model


@pytest.mark.parametrize("disabled", [[], ["playbook"]])
async def test_the_playbook_enters_the_prompt_through_system_prompt_unless_switched_off(chain, tmp_path, disabled):
    """System_prompt's playbook member puts PLAYBOOK.md in the T2 system prompt;
    with `[extensions] disabled = ["playbook"]` in golem.toml it does not run and the prompt has no playbook part."""
    api = FakeMessagesAPI(message([decide("hold", 0.6, False)]))
    services = _with_fake_claude(chain.golem(tmp_path, inference={"provider": "anthropic"},
                                             extensions={"disabled": disabled}), api)
    services.playbook_path.parent.mkdir(parents=True, exist_ok=True)
    services.playbook_path.write_text("<!-- golem PLAYBOOK revision: 1 -->\n"
                                      "- WHEN gas_gwei > 400 THEN repay 1% debt (learned: tick 7)\n")
    acts = TickActivities(services)
    ctx = _ctx(services, tick=3)
    obs = acts.observe(ObserveInput(ctx=ctx))
    d = await ActivityEnvironment().run(acts.decide, DecideInput(ctx=ctx, observation=obs, tier=Tier.T2,
                                                                   prediction_error=0.6))
    system = "\n".join(block["text"] for block in api.requests[0]["system"])
    if disabled:
        assert d.record.system_prompt == []
        assert "PLAYBOOK" not in system and "gas_gwei > 400" not in system
    else:
        assert d.record.system_prompt == ["playbook"]
        assert "PLAYBOOK.md (learned heuristics)" in system and "gas_gwei > 400 THEN repay 1% debt" in system


@pytest.mark.parametrize("disabled", [[], ["observability"]])
def test_session_opens_the_grimoire_and_a_failed_tick_is_recorded_its_event_unless_observability_is_off(
        chain, tmp_path, disabled):
    """session(start)'s grimoire member opens the stores as the services start; a failed tick is recorded either
    way, and the error hook's observability member emits its event — switched
    off, the record and no event."""
    services = chain.golem(tmp_path, extensions={"disabled": disabled})
    assert services.session == ["grimoire"] and services.episodes is not None
    failure = TickFailure(golem_id=GID, tick=4, workflow_id="wire-golem-tick-4", error="observe: RPC refused",
                          failed_at=STARTED)
    ActivityEnvironment().run(TickActivities(services).record_failure, failure)
    assert [f["tick"] for f in services.cycles.failures(10)] == [4]  # never lost
    failed = services.events.store.read(kinds=["heartbeat.tick_failed"])
    assert [e.tick for e in failed] == ([] if disabled else [4])


async def test_a_cached_decision_is_gated_by_a_must_added_since(chain, tmp_path):
    """System 1 answers from the decision cache without the LLM; a `MUST NOT borrow` the owner added
    after the borrow was cached still keeps it off the write path."""
    borrow = message([tool_use("borrow", {"amount": 500}, 0), decide("borrow", 0.7, True, decision="borrow 500")])
    api = FakeMessagesAPI(*([borrow] * 3))
    services = _with_fake_claude(chain.golem(tmp_path, inference={"provider": "anthropic"}), api)
    allowed = (EXAMPLE_HOME / "STRATEGY.md").read_text().replace("- MUST NOT borrow\n", "")
    services.strategy_path.write_text(allowed)
    acts = TickActivities(services)
    state = GolemState(golem_id=GID)
    ctx = _ctx(services, tick=1)
    obs = acts.observe(ObserveInput(ctx=ctx))
    env = ActivityEnvironment()

    async def decide_at(tick: int):
        c = ctx.model_copy(update={"tick": tick, "state": state})
        return await env.run(acts.decide, DecideInput(ctx=c, observation=obs, tier=Tier.T1, prediction_error=0.4))

    for tick in range(1, 4):  # the same borrow decided three times: consistent
        assert [a.tool for a in (await decide_at(tick)).actions] == ["borrow"]
    services.strategy_path.write_text(allowed + "- MUST NOT borrow\n")
    d = await decide_at(4)
    assert d.record.model == "decision-cache" and len(api.requests) == 3, "the fourth answer came from the cache"
    assert d.actions == [], f"a cached decision bypassed the MUST gate: {d.actions}"
    assert "borrow: STRATEGY.md says MUST NOT borrow" in d.record.rejections


# ---- 4 & 5. the delta cycle: PLAYBOOK safety guard and curator_decay (activities/consolidation.py) -------
def _delta_input(services: GolemServices, tick: int) -> ConsolidationInput:
    return ConsolidationInput(golem_id=GID, tick=tick, config=services.config, followups=[], daily_spend_usd=0.0)


async def test_a_playbook_rewrite_that_drops_a_safety_constraint_is_refused(chain, tmp_path):
    services = chain.golem(tmp_path)
    before = ("<!-- golem PLAYBOOK revision: 3 -->\n# PLAYBOOK\n\n## Global\n\n"
              "- MUST keep health_factor >= 1.5\n")
    services.playbook_path.write_text(before)
    with pytest.raises(PlaybookRefused, match=r"removes the safety constraint `MUST keep health_factor >= 1.5`"):
        await ActivityEnvironment().run(ConsolidationActivities(services).consolidate, _delta_input(services, 50))
    assert services.playbook_path.read_text() == before, "the refused rewrite changed PLAYBOOK.md"


async def test_the_delta_cycle_runs_the_curator_decay(chain, tmp_path):
    services = chain.golem(tmp_path)
    entry = services.semantic.put(GrimoireEntry(
        category=EntryType.HEURISTIC, content="Gas spikes at the top of the hour; batch approvals before then.",
        created_tick=0, valid_from=0, source=EntrySource(golem_id=GID),
    ))
    assert services.semantic.get(entry.id).retention == 1.0
    # Untouched for 5,000 ticks of 60 s: a heuristic's retention has fallen well below 1 (grimoire decay).
    await ActivityEnvironment().run(ConsolidationActivities(services).consolidate, _delta_input(services, 5000))
    e = services.semantic.get(entry.id)
    assert e is not None and e.retention < 0.9, f"curator decay did not run: {e}"


# ---- 3. learn_at_delta in GolemWorkflow (workflows/golem.py `_consolidate`) ---------------------------
@pytest.fixture
def loop_rig(tmp_path):
    rig = make_rig(tmp_path, "learn-golem", "calm", theta=0.25)
    yield rig
    rig.stop()


async def test_the_delta_cycle_closes_the_learned_gating_loop(temporal_client, loop_rig):
    rig = loop_rig
    rig.start_market(interval=0.25)
    async with in_process_worker(temporal_client, rig):
        handle = await rig.start_golem(temporal_client, max_ticks=11)  # the delta cycle runs before tick 10
        final = await asyncio.wait_for(handle.result(), timeout=180)
    assert final.last_delta_tick == 10, "the delta cycle ran"
    learned = final.learned_gating
    # Outcome feedback judged ticks 0..8 at the delta (horizon 1: tick 9's window was still open).
    assert learned.feedback_rounds == 1 and learned.stats.judged >= 9, learned.stats
    assert learned.judged_through_tick >= 8
    assert min(e.tick for e in learned.log) > learned.judged_through_tick, "judged ticks leave the log"
    # the external trend is measured at the delta from the ticks' equity events (delta_report).
    from golem.events.store import EventStore

    trend = EventStore(rig.data_dir).read(kinds=["quality.external_trend"])
    assert [e.tick for e in trend] == [10] and trend[0].payload["points"] >= 9, trend
    # ... and the weekly reflection consistency (offline: nothing to word again, and the event says so)
    rc = EventStore(rig.data_dir).read(kinds=["quality.reflection_consistency"])
    assert [e.tick for e in rc] == [10] and rc[0].payload["mean"] is None and rc[0].payload["reason"], rc
    hs = EventStore(rig.data_dir).read(kinds=["quality.heuristic_survival"])  # nothing 100 ticks old yet: none judged
    assert [e.tick for e in hs] == [10] and hs[0].payload["judged"] == 0 and hs[0].payload["rate"] is None, hs


# ---- the next-dream follow-up focuses NREM (activities/dream.py `focus_of`) -----------------------------
def test_a_next_dream_followup_makes_nrem_replay_its_situation_first(chain, tmp_path):
    from activities.dream import DreamActivities
    from golem.grimoire.dreams.staging import load_journal
    from golem.models.golem import DreamPhaseInput
    from golem.models.interventions import FollowUp

    services = chain.golem(tmp_path)
    # two old low-utility volatile episodes and five newer high-utility range-bound ones: the ranking alone replays
    # range-bound ones
    for t in range(1, 8):
        volatile = t <= 2
        services.episodes.upsert(Episode(
            id=f"{GID}:tick:{t}", golem_id=GID, tick=t, created_at=STARTED,
            regime=MarketRegime.VOLATILE if volatile else MarketRegime.RANGE_BOUND, tier=Tier.T0,
            prediction_error=0.1, utility=0.1 if volatile else 0.9,
            summary=f"Tick {t}: {'volatile' if volatile else 'range bound'} regime, price 2000, held.",
        ))
    dreams = DreamActivities(services, ForkRegistry(services.data_dir))
    env = ActivityEnvironment()
    plain = env.run(dreams.nrem, DreamPhaseInput(golem_id=GID, tick=20, replay_count=3, forks=False))
    assert plain.items == 3 and not load_journal(services.data_dir, GID, 20).focus
    baseline = [r["tick"] for r in load_journal(services.data_dir, GID, 20).replayed]
    assert not {1, 2} & set(baseline), baseline  # the utility ranking alone does not replay them
    note = FollowUp(id="fu-dream", message="dream about the volatile regime", window="next-dream")
    env.run(dreams.nrem, DreamPhaseInput(golem_id=GID, tick=40, replay_count=3, forks=False, followups=[note]))
    journal = load_journal(services.data_dir, GID, 40)
    assert journal.focus == "replay focused on volatile (follow-up fu-dream)", journal.focus
    assert sorted(r["tick"] for r in journal.replayed[:2]) == [1, 2], journal.replayed


def test_one_layout_per_golem_reaches_every_store(chain, tmp_path):
    """The edge that starts a worker builds the golem's DataLayout once; the services, the cycle store, the safety
    service, the event store, the config versions and the telemetry use that object, never one rebuilt from a
    path, and two golems side by side (a fleet) each keep to their own."""
    a, b = chain.golem(tmp_path / "a"), chain.golem(tmp_path / "b")
    for s in (a, b):
        layout = s.layout
        assert s.data_dir == layout.root
        assert s.cycles.layout is layout and s.safety.layout is layout and s.events.store.layout is layout
        assert (layout.config_versions / f"{s.config_version}.json").is_file()
        assert s.cycles.index_path.is_relative_to(layout.root) and s.safety.audit.path.is_relative_to(layout.root)
        assert span_exporter(layout, {}).out.path == layout.traces
    assert a.layout.root != b.layout.root
    assert not b.events.store.path.is_relative_to(a.layout.root)
