"""The observe step keeps the golem's real DeFi topology in the knowledge graph
(docs/design/grimoire.md#knowledge-graph) and gives each anomaly its topology curiosity modifier, which the analyze
step adds to the prediction error — on a real Anvil with the deployed dev world."""

from __future__ import annotations

import sqlite3

import pytest

from activities.tick import TickActivities
from golem.chain.contracts import contract
from golem.grimoire.semantic.graph import KnowledgeGraph, topology_curiosity_modifier
from golem.grimoire.semantic.topology import golem_positions
from golem.grimoire.semantic.topology import address_labels, topology_report
from golem.models.config import GolemConfig
from golem.models.enums import MarketRegime
from golem.models.state import GolemState
from golem.models.tick import AnalyzeInput, ObserveInput, TickContext
from golem.world.deploy import TxSender, wait_all
from infra.anvil import ANVIL_ADDRESSES, ANVIL_KEYS
from tests.integration.golem_rig import EXAMPLE_HOME
from workers.services import GolemServices

pytestmark = pytest.mark.integration

GOLEM_ID = "topo-golem"


@pytest.fixture
def acts(tmp_path, anvil, world_snapshot) -> TickActivities:
    data = tmp_path / "data"
    world_snapshot.save(data / "deployment.json")
    cfg = GolemConfig.model_validate({
        "golem": {"id": GOLEM_ID, "home": str(EXAMPLE_HOME)},
        "chain": {"rpc_url": anvil.rpc_url},
        "probes": {"kill_switch_path": str(tmp_path / "no-killswitch")},
    })
    return TickActivities(GolemServices(cfg, data))  # no key: reads the golem account's state, sends nothing


def ctx_for(acts: TickActivities, tick: int, state: GolemState) -> TickContext:
    return TickContext(golem_id=GOLEM_ID, tick=tick, config=acts.s.config, state=state,
                       started_at="2026-11-22T00:00:00+00:00")


def versions(kg: KnowledgeGraph) -> int:
    with sqlite3.connect(kg.db_path) as db:
        return db.execute("SELECT COUNT(*) FROM kg_facts").fetchone()[0]


def test_observe_builds_the_topology_and_an_oracle_anomaly_gets_full_curiosity(acts, w3, world_snapshot):
    world = world_snapshot
    a = world.addresses
    kg = acts.topology().kg
    obs0 = acts.observe(ObserveInput(ctx=ctx_for(acts, 0, GolemState(golem_id=GOLEM_ID))))
    block0 = obs0.snapshot.block_number

    # The protocol edges as the contracts report them, and the golem's own, valid from the observed block.
    lending, pair, oracle_n = f"lending_market:{a['AAVE_POOL']}", f"pool:{a['PAIR_WETH_USDC']}", f"oracle:{a['AAVE_ORACLE']}"
    facts = {(f.subject, f.predicate, f.object) for ent in (lending, pair, oracle_n, f"golem:{GOLEM_ID}")
             for f in kg.query_at_block(ent, block0)}
    assert {
        (lending, "oracle_dependency", oracle_n),  # PoolAddressesProvider.getPriceOracle()
        (oracle_n, "oracle_dependency", f"feed:{a['FEED_WETH']}"),  # AaveOracle.getSourceOfAsset(WETH)
        (lending, "collateral_backing", f"token:{a['WETH']}"),  # every Aave reserve here may back debt ...
        (lending, "collateral_backing", f"token:{a['USDC']}"),
        (lending, "debt_token", f"token:{a['USDC']}"),  # ... and be borrowed
        (lending, "debt_token", f"token:{a['DAI']}"),
        (pair, "holds_token", f"token:{a['WETH']}"),
        (pair, "holds_token", f"token:{a['USDC']}"),
        (f"golem:{GOLEM_ID}", "has_position", lending),  # 10 WETH supplied, 8,000 USDC owed on Aave
        (f"golem:{GOLEM_ID}", "holds_token", f"token:{a['WETH']}"),
        (f"golem:{GOLEM_ID}", "holds_token", f"token:{a['USDC']}"),
        (f"golem:{GOLEM_ID}", "holds_token", f"token:{a['DAI']}"),
    } <= facts
    assert all(f.valid_from == block0 for ent in (f"golem:{GOLEM_ID}",) for f in kg.query_at_block(ent, block0))
    assert golem_positions(kg, GOLEM_ID, block0 - 1) == [], "nothing was known true before the observed block"

    # Observing again (the same topology, a retried activity) writes nothing new.
    n = versions(kg)
    acts.observe(ObserveInput(ctx=ctx_for(acts, 0, GolemState(golem_id=GOLEM_ID))))
    acts.observe(ObserveInput(ctx=ctx_for(acts, 1, GolemState(golem_id=GOLEM_ID))))
    assert versions(kg) == n

    # The feed's owner posts a round 15 % away from the pool: an oracle divergence and drift.
    feed = contract(w3, world, "FEED_WETH")
    before = feed.functions.latestAnswer().call()
    owner = TxSender.for_key(w3, ANVIL_KEYS[0])
    wait_all(w3, [("post_round", owner.call_fn(feed, "post_round", before * 115 // 100))])
    state = GolemState(golem_id=GOLEM_ID, regime=MarketRegime.RANGE_BOUND, price_history=[obs0.snapshot.pool.price],
                       last_oracle_price=before / 1e8, last_tvl=obs0.snapshot.pool.tvl)
    ctx = ctx_for(acts, 2, state)
    obs = acts.observe(ObserveInput(ctx=ctx))
    by_probe = {x.probe: x for x in obs.anomalies}
    for probe in ("circuit_breaker", "world_model_drift"):
        assert by_probe[probe].entity == oracle_n
        assert (by_probe[probe].topology_hops, by_probe[probe].topology_modifier) == (1, 1.0), by_probe[probe]
    assert all(x.topology_modifier == 0.0 for x in obs.anomalies if x.entity is None)

    # analyze: the modifier adds to the prediction error (and nothing else changed)
    analysis = acts.analyze(AnalyzeInput(ctx=ctx, observation=obs))
    related = sum(x.topology_modifier for x in obs.anomalies)
    assert related >= 2.0 and analysis.sources["topology"] == pytest.approx(min(related, 5) * 0.05)
    stripped = obs.model_copy(update={"anomalies": [x.model_copy(update={"topology_modifier": 0.0})
                                                    for x in obs.anomalies]})
    base = acts.analyze(AnalyzeInput(ctx=ctx, observation=stripped))
    assert base.sources["topology"] == 0.0
    assert analysis.prediction_error == pytest.approx(min(base.prediction_error + analysis.sources["topology"], 1.0))

    # An entity with no path to the golem's positions gets nothing: the trader's account, or a fresh contract.
    positions = golem_positions(kg, GOLEM_ID, obs.snapshot.block_number)
    assert lending in positions
    for unrelated in (f"address:{ANVIL_ADDRESSES[1]}", "pool:0x000000000000000000000000000000000000dEaD"):
        assert topology_curiosity_modifier(kg, unrelated, positions, obs.snapshot.block_number) == 0.0
    assert topology_curiosity_modifier(kg, oracle_n, positions, obs.snapshot.block_number) == 1.0
    assert topology_curiosity_modifier(kg, oracle_n, positions, block0 - 1) == 0.0  # older block

    # `golem grimoire topology --json` reports the same, with the deployment's names.
    report = topology_report(kg.db_path, GOLEM_ID, None, address_labels(acts.s.data_dir))
    assert report["block"] == block0  # the newest block at which the graph changed
    reachable = {r["label"]: (r["hops"], r["modifier"]) for r in report["reachable"]}
    assert reachable["AAVE_ORACLE"] == (1, 1.0) and reachable["PAIR_WETH_USDC"] == (1, 1.0)
    assert reachable["AAVE_POOL"] == (0, 1.0) and reachable["FEED_WETH"] == (2, 0.5)


def test_a_position_closed_on_chain_is_invalidated_and_kept_in_history(acts, w3, world_snapshot):
    world = world_snapshot
    kg = acts.topology().kg
    obs0 = acts.observe(ObserveInput(ctx=ctx_for(acts, 0, GolemState(golem_id=GOLEM_ID))))
    dai_node = f"token:{world.addresses['DAI']}"
    assert dai_node in golem_positions(kg, GOLEM_ID, obs0.snapshot.block_number)

    # The golem sends all its DAI away (its own key, as the owner could).
    dai = contract(w3, world, "DAI")
    balance = dai.functions.balanceOf(world.golem_account).call()
    me = TxSender.for_key(w3, ANVIL_KEYS[2])
    wait_all(w3, [("transfer DAI", me.call_fn(dai, "transfer", ANVIL_ADDRESSES[1], balance))])
    obs1 = acts.observe(ObserveInput(ctx=ctx_for(acts, 1, GolemState(golem_id=GOLEM_ID))))
    b1 = obs1.snapshot.block_number
    assert dai_node not in golem_positions(kg, GOLEM_ID, b1)
    assert dai_node in golem_positions(kg, GOLEM_ID, b1 - 1), "the fact stays true for the blocks it held"
    gone = [f for f in kg.query_as_known_at(f"golem:{GOLEM_ID}", 1) if f.object == dai_node]
    assert [(f.valid_from, f.valid_until) for f in gone] == [(obs0.snapshot.block_number, b1)]
    # what the golem believed at tick 0: it held DAI, with no end in sight
    believed = [f for f in kg.query_as_known_at(f"golem:{GOLEM_ID}", 0) if f.object == dai_node]
    assert [f.valid_until for f in believed] == [None]
