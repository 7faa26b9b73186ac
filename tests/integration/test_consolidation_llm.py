"""The delta cycle rates its candidates' future utility with Claude, through the real
anthropic SDK faked only at the HTTP boundary: on the Temporal dev server the cost of those calls reaches
the golem's daily spend; and a 529 from the provider leaves the cycle running on the deterministic estimate."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime

import httpx2
import pytest
from temporalio.testing import ActivityEnvironment

from activities.consolidation import ConsolidationActivities
from golem.grimoire.semantic.admission import AdmissionAction, admit
from golem.grimoire.episodes.model import Episode, episode_id
from golem.grimoire.semantic.store import EntrySource, EntryType, GrimoireEntry
from golem.inference.admission_utility import RATING_TOOL
from golem.deliberators import select_deliberator
from golem.life.cycle_store import CycleStore
from golem.models.golem import ConsolidationInput
from tests.integration.golem_rig import GOLEM_KEY, in_process_worker, make_rig
from tests.unit.inference_fakes import FakeMessagesAPI, decide, error, message, tool_use
from workers.services import GolemServices
from workflows.consolidation import DeltaConsolidationWorkflow

pytestmark = pytest.mark.integration

RATING_USAGE = (410, 40)  # input, output tokens of each fake rating reply


def haiku_cost(input_tokens: int, output_tokens: int) -> float:
    return (input_tokens * 1.0 + output_tokens * 5.0) / 1e6  # claude-haiku-4-5 list price per MTok


def with_fake_claude(services: GolemServices, rig, api: FakeMessagesAPI) -> GolemServices:
    deliberator, why = select_deliberator(
        rig.config, {"ANTHROPIC_API_KEY": "sk-test-not-a-key"}, home=rig.home, data_dir=services.data_dir,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(api.handler)),
    )
    services.use_deliberator(deliberator, why)
    assert why.startswith("anthropic")
    return services


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    rig = make_rig(tmp_path_factory.mktemp("consolidation-llm"), "util-golem", "calm", theta=0.25,
                   inference={"provider": "anthropic"})
    yield rig
    rig.stop()


async def test_delta_rates_utility_with_claude_and_the_cost_reaches_the_daily_spend(temporal_client, rig):
    async def reply(body):
        tools = {t["name"] for t in body.get("tools", [])}
        if RATING_TOOL in tools:
            assert body["tool_choice"] == {"type": "tool", "name": RATING_TOOL}
            return message([tool_use(RATING_TOOL, {"utility": 0.9, "reason": "a recurring, conditioned pattern"})],
                           model=body["model"], input_tokens=RATING_USAGE[0], output_tokens=RATING_USAGE[1])
        if "evaluate" in tools:
            return message([tool_use("evaluate", {"verdict": "neutral", "score": 0.5, "rationale": "held"})],
                           model=body["model"], input_tokens=300, output_tokens=30)
        return message([decide("nothing to do", 0.6, False, decision="hold")], model=body["model"],
                       input_tokens=2000, output_tokens=80)

    api = FakeMessagesAPI(*([reply] * 60))
    services = with_fake_claude(rig.services(), rig, api)
    async with in_process_worker(temporal_client, rig, services=services):
        handle = await rig.start_golem(temporal_client, max_ticks=11)  # the delta cycle runs before tick 10
        state = await handle.result()

    delta = await temporal_client.get_workflow_handle_for(
        DeltaConsolidationWorkflow.run, f"golem-{rig.golem_id}-delta-10").result()
    ratings = [b for b in api.requests if b.get("tool_choice", {}).get("name") == RATING_TOOL]
    assert ratings, "the delta cycle asked Claude about its distilled candidates"
    assert {b["model"] for b in ratings} == {"claude-haiku-4-5"}  # T1 → Haiku-class
    adm = delta.admission
    assert adm.utility_source == "llm" and adm.llm_calls == len(ratings) == adm.utility_llm
    assert adm.utility_fallbacks == [] and adm.candidates >= 3 and adm.admitted >= 1
    assert adm.admitted + adm.admitted_low + adm.merged + adm.skipped + adm.quarantined + adm.rejected == adm.candidates
    assert delta.inference_cost_usd == pytest.approx(len(ratings) * haiku_cost(*RATING_USAGE))

    cycles = CycleStore(rig.data_dir)
    tick_costs = sum(cycles.load(t).inference_cost for t in range(11))
    assert state.tick == 11
    assert state.daily_spend_usd == pytest.approx(tick_costs + delta.inference_cost_usd)
    assert state.total_inference_usd == pytest.approx(tick_costs + delta.inference_cost_usd)
    stored = [e for e in services.semantic.all() if e.category == EntryType.HEURISTIC]
    assert stored and all(e.parent_episode_ids for e in stored)

    history = await temporal_client.get_workflow_handle(f"golem-{rig.golem_id}").fetch_history()
    markers = [e.marker_recorded_event_attributes for e in history.events if e.HasField("marker_recorded_event_attributes")]
    assert any("delta-inference-spend" in str(m.details) for m in markers), "the spend change is patch-guarded"


async def test_an_overloaded_provider_leaves_the_delta_on_the_estimate(rig, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(rig.data_dir / "deployment.json", data / "deployment.json")
    api = FakeMessagesAPI(*[error(529, "overloaded_error", "Overloaded")] * 4)
    services = with_fake_claude(GolemServices(rig.config, data, private_key=GOLEM_KEY), rig, api)
    gid = rig.golem_id
    now = datetime.now(UTC).isoformat()
    services.episodes.upsert_many([
        Episode(id=episode_id(gid, t), golem_id=gid, tick=t, created_at=now, regime="volatile", tier="T1",
                summary=f"Tick {t}: volatile, escalated to T1, held", prediction_error=0.4) for t in range(4)])
    # A quarantined contradiction whose confident opponent has since been superseded: released at this review.
    src = EntrySource(golem_id=gid)
    base = GrimoireEntry(category=EntryType.INSIGHT, content="Pool fees on WETH/USDC rise above 30 bps when volume "
                         "is high", confidence=0.9, validated_count=6, source=src, created_tick=1)
    admit(services.semantic, base, tick=1)
    contra = GrimoireEntry(category=EntryType.INSIGHT, content="Pool fees on WETH/USDC fall below 30 bps when "
                           "volume is high", parent_episode_ids=[episode_id(gid, 2)], source=src, created_tick=2)
    assert admit(services.semantic, contra, tick=2).action == AdmissionAction.QUARANTINED
    services.semantic.supersede(base.id, 3)

    beats: list[str] = []
    env = ActivityEnvironment()
    env.on_heartbeat = lambda *details: beats.append(str(details[0]) if details else "")
    result = await env.run(ConsolidationActivities(services).consolidate,
                           ConsolidationInput(golem_id=gid, tick=4, config=rig.config, daily_spend_usd=0.25))

    assert 1 <= len(api.requests) <= 2  # the first 529 stops further calls (at most the one already in flight)
    adm = result.admission
    assert adm.utility_source == "estimate" and adm.llm_calls == 0 and result.inference_cost_usd == 0.0
    assert adm.utility_fallbacks and all("529" in fb.reason for fb in adm.utility_fallbacks)
    assert adm.candidates == 4 and adm.distinct == 1
    review = result.quarantine_review
    assert (review.reviewed, review.released) == (1, 1) and review.outcomes[0].id == contra.id
    assert "superseded" in review.outcomes[0].reason
    assert services.semantic.quarantined_one(contra.id)["status"] == "released"
    assert {"decay", "distill", "score", "quarantine review", "admit", "upkeep", "playbook"} <= set(beats)
