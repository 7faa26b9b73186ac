"""The memory tools that reach the graphs, on real stores: link_causal proposes an edge (quarantined, in the causal
graph only once released through admission), read_topology reads the knowledge graph (as of a past tick too) and a
memory's causal neighbours."""

from __future__ import annotations

import pytest

from golem.chain.tools.schemas import ToolArgumentError
from golem.grimoire.access import open_stores
from golem.grimoire.memory_tools import MemoryReads
from golem.grimoire.semantic.admission import owner_release, proposed_edge
from golem.grimoire.semantic.graph import CausalGraph, KnowledgeGraph
from golem.grimoire.semantic.store import EntrySource, EntryType, GrimoireEntry


@pytest.fixture()
def stores(tmp_path):
    episodes, semantic = open_stores(tmp_path / "data")
    src = EntrySource(golem_id="g")
    gas = semantic.put(GrimoireEntry(category=EntryType.INSIGHT, content="Gas spikes above 100 gwei came with every "
                                     "sharp drop of the WETH price on this chain.", valid_from=0, source=src,
                                     created_tick=0))
    late = semantic.put(GrimoireEntry(category=EntryType.WARNING, content="Repays sent in a gas spike landed two "
                                      "blocks late and paid three times the usual gas.", valid_from=0, source=src,
                                      created_tick=0))
    return episodes, semantic, gas, late


def tools(stores, tick=40, block=1_000):
    episodes, semantic, *_ = stores
    return MemoryReads(episodes, semantic, golem_id="g", tick=tick, regime="volatile", block=block)


def test_a_proposed_causal_edge_waits_in_quarantine_and_joins_the_graph_once_released(stores):
    _, semantic, gas, late = stores
    t = tools(stores)
    out = t.run("link_causal", {"cause": gas.id, "effect": late.id, "weight": 0.6,
                                "reason": "the late repays all fell inside gas spikes"})
    row = semantic.quarantined_one(out["quarantined"])
    assert row["status"] == "pending" and "causal edge proposed by the model at tick 40" in row["reason"]
    assert proposed_edge(row["entry"]) == (gas.id, late.id, 0.6)
    graph = CausalGraph(semantic.db_path)
    assert graph.edges() == []  # a proposal, not a write: nothing in the graph yet
    assert t.run("read_topology", {"entity": gas.id})["consequences"] == []
    owner_release(semantic, out["quarantined"], tick=41)
    (edge,) = graph.edges()
    assert (edge["source_id"], edge["target_id"], edge["weight"]) == (gas.id, late.id, pytest.approx(0.6))
    seen = tools(stores, tick=42).run("read_topology", {"entity": late.id})
    assert [c["id"] for c in seen["causes"]] == [gas.id] and seen["consequences"] == []


def test_link_causal_refuses_what_it_cannot_check(stores):
    _, _, gas, late = stores
    t = tools(stores)
    with pytest.raises(ToolArgumentError, match="no episode or entry ep-nothing"):
        t.run("link_causal", {"cause": gas.id, "effect": "ep-nothing", "reason": "because it always happens"})
    with pytest.raises(ToolArgumentError, match="two different memories"):
        t.run("link_causal", {"cause": gas.id, "effect": gas.id, "reason": "because it always happens"})
    with pytest.raises(ToolArgumentError, match="weight: a number in"):
        t.run("link_causal", {"cause": gas.id, "effect": late.id, "weight": 3, "reason": "because it always happens"})


def test_read_topology_answers_as_known_now_and_at_a_past_tick(stores):
    _, semantic, *_ = stores
    kg = KnowledgeGraph(semantic.db_path)
    kg.assert_fact("pool:weth-usdc", "prices", "lending_market:aave", block=10, tick=5, exclusive=False)
    kg.assert_fact("lending_market:aave", "uses_oracle", "oracle:eth-usd", block=10, tick=5, exclusive=False)
    old = kg.assert_fact("pool:weth-usdc", "prices", "token:dai", block=10, tick=5, exclusive=False)
    kg.invalidate(old, block=500, tick=30)
    now = tools(stores).run("read_topology", {"entity": "pool:weth-usdc", "hops": 2})
    assert now["facts"] == ["pool:weth-usdc --prices--> lending_market:aave"]
    assert {"id": "oracle:eth-usd", "hops": 2} in now["neighbours"]
    then = tools(stores).run("read_topology", {"entity": "pool:weth-usdc", "as_of_tick": 20})
    assert "pool:weth-usdc --prices--> token:dai" in then["facts"] and then["as_of_tick"] == 20
    with pytest.raises(ToolArgumentError, match="nothing known about 'pool:nowhere'"):
        tools(stores).run("read_topology", {"entity": "pool:nowhere"})
