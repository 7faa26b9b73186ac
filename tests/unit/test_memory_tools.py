"""The deliberator's memory tools on real stores (LanceDB + SQLite, the bundled embedder): a search as of a past tick
finds what was in force then; a proposed entry lands in the quarantine, never in the knowledge in force."""

from __future__ import annotations

import pytest

from golem.chain.tools.schemas import ToolArgumentError
from golem.grimoire.access import open_stores
from golem.grimoire.memory_tools import MAX_PROPOSALS_PER_TICK, CombinedReads, MemoryReads
from golem.grimoire.semantic.store import EntrySource, EntryType, GrimoireEntry


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    episodes, semantic = open_stores(tmp_path_factory.mktemp("data"))
    src = EntrySource(golem_id="g")
    old = semantic.put(GrimoireEntry(category=EntryType.WARNING, content="The ETH/USD oracle lags the pool by two "
                                     "blocks in a crash; repay on the pool price, not the oracle.", valid_from=0,
                                     valid_until=50, source=src, created_tick=0, market_regime="volatile"))
    new = semantic.put(GrimoireEntry(category=EntryType.WARNING, content="The ETH/USD oracle lags the pool by six "
                                     "blocks in a crash since the feed's heartbeat changed; repay earlier.",
                       valid_from=50, source=src, created_tick=50, market_regime="volatile"))
    return episodes, semantic, old, new


def tools(stores, tick=80, golem_id="g"):
    episodes, semantic, *_ = stores
    return MemoryReads(episodes, semantic, golem_id=golem_id, tick=tick, regime="volatile")


def test_a_search_as_of_a_past_tick_finds_what_was_in_force_then(stores):
    *_, old, new = stores
    now = tools(stores).run("search_memory", {"query": "how far does the oracle lag the pool in a crash"})
    then = tools(stores).run("search_memory", {"query": "how far does the oracle lag the pool in a crash",
                                               "as_of_tick": 30})
    assert now["items"][0]["id"] == new.id and old.id not in [i["id"] for i in now["items"]]
    assert then["as_of_tick"] == 30 and then["items"][0]["id"] == old.id
    assert then["items"][0]["warning"] is True
    whole = tools(stores).run("read_memory", {"id": old.id})
    assert whole["valid_until_tick"] == 50 and "two blocks" in whole["content"]


def test_a_proposed_entry_lands_in_quarantine_once_and_is_not_in_force(stores):
    _, semantic, *_ = stores
    t = tools(stores, tick=81)
    ask = {"category": "warning", "content": "Gas spikes above 100 gwei came with every crash of this path so far."}
    out = t.run("propose_entry", ask)
    again = tools(stores, tick=81).run("propose_entry", ask)  # a retried decide proposes the same row
    assert out == again and out["quarantined"].startswith("prop-")
    row = semantic.quarantined_one(out["quarantined"])
    assert row["status"] == "pending" and "proposed by the model at tick 81" in row["reason"]
    assert semantic.get(out["quarantined"]) is None  # not in the knowledge the golem acts on
    assert len([r for r in semantic.quarantined("pending") if r["id"] == out["quarantined"]]) == 1
    for i in range(MAX_PROPOSALS_PER_TICK - 1):
        t.run("propose_entry", {"category": "insight", "content": f"another thought number {i} about gas"})
    with pytest.raises(ToolArgumentError, match="at most 2 proposals per tick"):
        t.run("propose_entry", {"category": "insight", "content": "one proposal too many this tick"})


def test_bad_arguments_say_what_to_fix(stores):
    t = tools(stores)
    with pytest.raises(ToolArgumentError, match="as_of_tick: a tick from 0 to now"):
        t.run("search_memory", {"query": "x", "as_of_tick": 999})
    with pytest.raises(ToolArgumentError, match="unexpected argument.*limit"):
        t.run("search_memory", {"query": "x", "limit": 3})
    with pytest.raises(ToolArgumentError, match="no episode or entry"):
        t.run("read_memory", {"id": "ep-nothing"})
    with pytest.raises(ToolArgumentError, match="category: one of"):
        t.run("propose_entry", {"category": "causal_link", "content": "a b c d e f g h i j"})
    with pytest.raises(ValueError, match="offered twice"):
        CombinedReads(t, tools(stores))


def test_a_proposed_entry_carries_the_ticks_regime_cell(stores):
    episodes, semantic, *_ = stores
    t = MemoryReads(episodes, semantic, golem_id="g", tick=82, regime="volatile", regime_tag="v5/down/gas-spike/liq-thin")
    out = t.run("propose_entry", {"category": "warning", "content": "Gas spikes with every crash on this path."})
    assert semantic.quarantined_one(out["quarantined"])["entry"].regime_tag == "v5/down/gas-spike/liq-thin"
