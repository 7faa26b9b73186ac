"""A scheduled strategy on real parts, decided by Claude (the real anthropic SDK, faked at the HTTP boundary) inside
the Temporal workflow on a real Anvil chain: `strategies/dca.md` has no rules, only a window (`from` / `until` on the
workflow's clock) and `after 1 action`. It waits; the tick its window opens is woken to T1 by the start alone; the
model searches memory now and as of a past tick, sells a little WETH and names the strategy its decision serves; the
sale is credited to `dca`, not to `watch` (active beside it all along), and `dca` completes on that tick
(docs/design/strategies.md)."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone

import pytest

from golem.events.store import EventStore
from golem.grimoire.access import open_stores
from golem.grimoire.semantic.store import EntrySource, EntryType, GrimoireEntry
from golem.life.cycle_store import CycleStore
from golem.models.enums import ActionStatus, Tier
from tests.integration.golem_rig import in_process_worker, make_rig, tool_results, wait_for, wait_for_record
from tests.unit.inference_fakes import FakeMessagesAPI, decide, message, tool_use

pytestmark = pytest.mark.integration

SALE = {"token_in": "WETH", "token_out": "USDC", "amount_in": 0.5}
QUERY = "does the pool's depth hold a sale in the morning window"
OLD = "The pool was shallow in the morning window: a sale of 1 WETH moved it 2 % (seen before tick 2)."
NEW = "The pool is deep in the morning window since the new liquidity: 1 WETH moves it 0.1 %."
OPENS_IN = 45  # seconds after the golem starts: its first ticks (the embedder loads) see the strategy waiting


def _dca(opens: datetime) -> str:
    until = opens + timedelta(minutes=10)
    return f"""# Strategy: take a little profit in the window
Sell about 0.5 WETH for USDC once, while the window is open; check what memory says about the pool first.

## Schedule
- from: {opens.strftime('%Y-%m-%dT%H:%M:%SZ')}
- until: {until.strftime('%Y-%m-%dT%H:%M:%SZ')}

## Completion
- after 1 action
"""


WATCH = "# Strategy: keep watch\nNo actions of its own; it is active all along.\n\n## Completion\n- after 3 actions\n"


async def test_a_scheduled_strategy_wakes_the_golem_claude_acts_for_it_and_it_completes(temporal_client, tmp_path):
    rig = make_rig(tmp_path, "dca-golem", "calm", theta=0.25, inference={"provider": "anthropic"})
    # memory: what was known about the pool before tick 2, and what replaced it from tick 2 on
    _, semantic = open_stores(rig.data_dir, rig.home)
    src = EntrySource(golem_id=rig.golem_id)
    old = semantic.put(GrimoireEntry(category=EntryType.INSIGHT, content=OLD, valid_from=0, valid_until=2,
                                     source=src, created_tick=0, market_regime="range_bound"))
    new = semantic.put(GrimoireEntry(category=EntryType.INSIGHT, content=NEW, valid_from=2, source=src,
                                     created_tick=2, market_regime="range_bound"))
    opens = datetime.fromtimestamp(int(time.time()) + OPENS_IN, timezone.utc)
    (rig.home / "strategies").mkdir()
    (rig.home / "strategies" / "dca.md").write_text(_dca(opens))
    (rig.home / "strategies" / "watch.md").write_text(WATCH)
    seen: dict[str, object] = {}

    async def reply(body):
        tools = {t["name"]: t for t in body.get("tools", [])}
        if "evaluate" in tools:
            return message([tool_use("evaluate", {"verdict": "good", "score": 0.6, "rationale": "sold as asked"})],
                           model=body["model"], input_tokens=300, output_tokens=40)
        if "reflect" in tools:
            return message([tool_use("reflect", {"insight": "The window's sale went through."})],
                           model=body["model"], input_tokens=300, output_tokens=40)
        if "Active strategy `dca`" not in json.dumps(body) or "acted" in seen:
            return message([decide("nothing to do", 0.6, False, strategy="watch")
                            if "strategy" in tools["decide"]["input_schema"]["properties"] else decide("nothing to do")],
                           model=body["model"])
        results = tool_results(body)
        if not results:  # round 1: what memory says, now and as it stood at tick 1
            seen["decide"] = tools["decide"]["input_schema"]["properties"]["strategy"]
            return message([tool_use("search_memory", {"query": QUERY, "as_of_tick": 1}, 1),
                            tool_use("search_memory", {"query": QUERY}, 2)], model=body["model"], input_tokens=1800)
        seen["then"], seen["now"] = (json.loads(r["content"]) for r in results)
        seen["acted"] = True  # round 2: the pool is deep now — sell, for dca
        return message([tool_use("swap", SALE, 3),
                        decide("dca's window is open and the pool is deep: sell 0.5 WETH", 0.7, True, strategy="dca")],
                       model=body["model"], input_tokens=2200, output_tokens=90)

    api = FakeMessagesAPI(*([reply] * 80))
    services, _ = rig.claude_services(api.handler)
    store = CycleStore(rig.data_dir)

    def dca(rec):
        return next(r for r in rec.strategies.runs if r.id == "dca")

    try:
        async with in_process_worker(temporal_client, rig, services=services):
            handle = await rig.start_golem(temporal_client, max_ticks=None)
            await wait_for(lambda: store.count() >= 1, OPENS_IN, "the first tick")
            started = await wait_for_record(
                store, lambda r: r.strategies is not None and any(e.strategy == "dca" and e.kind == "started"
                                                                  for e in r.strategies.events),
                "the tick dca started", timeout=OPENS_IN + 90, n=50)
            later = await wait_for_record(store, lambda r: r.tick >= started.tick + 2, "two ticks after it", n=50)
            await handle.terminate("test done")
    finally:
        rig.stop()
    records = {row["tick"]: store.load(row["tick"]) for row in store.recent(1000)}
    first = records[min(records)]
    # before the window dca waits (the first tick is before it); watch, with no schedule, is active from tick 1
    assert datetime.fromisoformat(first.timestamp) < opens and dca(first).status == "waiting"
    assert [e.strategy for e in first.strategies.events if e.kind == "started"] == ["watch"]
    assert all(dca(r).status == "waiting" for t, r in records.items() if t < started.tick)
    # the tick the window opens: dca has no rule to fire, so its start alone woke the golem (the reason says so)
    rec = started
    assert opens <= datetime.fromisoformat(rec.timestamp) < opens + timedelta(minutes=10)
    assert rec.wake is not None and rec.wake.rule_hits == [] and rec.wake.started == [
        f"dca: in season since {opens.isoformat()}"]
    assert rec.tier in (Tier.T1, Tier.T2) and "strategy dca: in season since" in rec.gating_reason, rec.gating_reason
    # Claude read memory now and as of tick 1: what was in force then, not what replaced it
    d = rec.deliberation
    assert d.model != "offline-deliberator" and d.tool_rounds == 2
    assert [(r.tool_name, r.arguments.get("as_of_tick")) for r in d.reads] == [("search_memory", 1),
                                                                               ("search_memory", None)]
    then_ids, now_ids = ([i["id"] for i in seen[k]["items"]] for k in ("then", "now"))
    assert seen["then"]["as_of_tick"] == 1 and old.id in then_ids and new.id not in then_ids
    assert new.id in now_ids and old.id not in now_ids
    # decide asked which strategy the decision serves; the model named dca, and the sale is credited to it
    assert seen["decide"]["enum"] == ["dca", "watch", "STRATEGY.md"]
    [sale] = rec.actions
    assert (sale.tool_name, sale.status) == ("swap", ActionStatus.EXECUTED) and sale.tx_hash
    assert d.strategy == "dca"
    assert [(c.action_index, c.tool, c.strategy, c.why) for c in d.credits] == [
        (sale.action_index, "swap", "dca", "the decision named it (decide.strategy)")]
    assert [(c.strategy, c.tool) for c in rec.strategies.credited] == [("dca", "swap")]
    # ... so dca completes on that very tick; watch (active beside it, not named) counts nothing
    done = dca(rec)
    assert done.status == "complete" and done.completed_tick == rec.tick and done.actions == 1
    assert "1 action(s) executed (line" in done.completion
    assert [(e.strategy, e.kind) for e in rec.strategies.events] == [("dca", "started"), ("dca", "completed")]
    watch = next(r for r in rec.strategies.runs if r.id == "watch")
    assert watch.status == "active" and watch.actions == 0
    # every call of the loop is paid for
    assert d.input_tokens >= 1800 + 2200 and d.cost > 0 and rec.inference_cost >= d.cost
    # complete stays complete: no later tick sold again
    after = [r for t, r in records.items() if t > rec.tick]
    assert after and all(dca(r).status == "complete" and not r.actions for r in after)
    events = [(e.kind, e.payload.get("strategy")) for e in EventStore(rig.data_dir).read(kinds=["strategies"])]
    assert ("strategies.started", "dca") in events and ("strategies.completed", "dca") in events
