"""The golem's DeFi topology in the knowledge graph, and the topology curiosity of each anomaly.

Nodes are contracts, tokens, pools and oracles; edges are oracle dependency, collateral backing, token flow and
positions, read from the protocols' own getters once per worker start and from each tick's snapshot for the golem's
own edges. Syncing is idempotent: an unchanged topology writes nothing, a changed one asserts the new facts and
invalidates the stale ones. Each anomaly gets the modifier of its entity's hop distance from the golem's positions
(gas, budget and kill switch concern no entity: 0). See docs/design/grimoire.md#knowledge-graph.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterable
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from golem.grimoire.semantic.graph import TOPOLOGY_MAX_HOPS, KnowledgeGraph, modifier_for_hops
from golem.layout import DataLayout
from golem.models.observation import Anomaly, ChainSnapshot

if TYPE_CHECKING:
    from web3 import Web3

    from golem.chain.contracts import Deployment

log = logging.getLogger("golem.topology")

# Predicates (snake_case; debt_token and holds_token are ours).
ORACLE_DEPENDENCY = "oracle_dependency"  # lending market → the oracle it prices with; oracle → each feed
COLLATERAL_BACKING = "collateral_backing"  # lending market → each token that may back debt
DEBT_TOKEN = "debt_token"  # lending market → each token it lends
HOLDS_TOKEN = "holds_token"  # pool → each of its tokens; golem → each token it holds a balance of
HAS_POSITION = "has_position"  # golem → a protocol it has a position in (lending market, pool)
# Many-valued predicates: a new object adds a fact instead of superseding the current one.
MULTI_VALUED = frozenset({HOLDS_TOKEN, HAS_POSITION, COLLATERAL_BACKING, DEBT_TOKEN, ORACLE_DEPENDENCY})
GOLEM_PREDICATES = (HAS_POSITION, HOLDS_TOKEN)

# Which entity a probe's event concerns (None: no protocol entity — chain gas, our budget, our switch).
PROBE_ENTITY_KIND: dict[str, str | None] = {
    "price_delta": "pool",
    "tvl_change": "pool",
    "rsi": "pool",
    "homeostatic_deviation": "pool",  # price level/return; a gas-driven deviation has no entity
    "circuit_breaker": "oracle",  # pool vs oracle: the oracle is the feed the lending market trusts
    "world_model_drift": "oracle",
    "feed_staleness": "oracle",
    "position_health": "position",  # the protocol of the weakest position
    "gas_price": None,
    "kill_switch": None,
    "credit_balance": None,
}


def entity_id(kind: str, key: str) -> str:
    """Canonical node id: `kind:address` for contracts (an entity is {kind, id}), `golem:<id>`."""
    if not kind or not key:
        raise ValueError(f"an entity needs a kind and an id, got {kind!r}, {key!r}")
    return f"{kind}:{key}"


def golem_entity(golem_id: str) -> str:
    return entity_id("golem", golem_id)


def position_entity(position_id: str) -> str | None:
    """The protocol node of a snapshot position id (`lending:<addr>` → lending market, `lp:<addr>` → pool)."""
    kind, _, addr = position_id.partition(":")
    mapped = {"lending": "lending_market", "lp": "pool"}.get(kind)
    return entity_id(mapped, addr) if mapped and addr else None


class TopologyFact(BaseModel):
    subject: str
    predicate: str
    object: str

    @property
    def exclusive(self) -> bool:
        return self.predicate not in MULTI_VALUED


class ProtocolTopology(BaseModel):
    """The protocol side of the graph, read once from the deployed contracts."""

    entities: dict[str, str] = Field(default_factory=dict)  # kind (pool, oracle, lending_market) → node id
    tokens: dict[str, str] = Field(default_factory=dict)  # symbol → token node id
    labels: dict[str, str] = Field(default_factory=dict)  # node id → deployment name (for people)
    facts: list[TopologyFact] = Field(default_factory=list)


def read_protocol_topology(w3: Web3, deployment: Deployment) -> ProtocolTopology:
    """Read the protocol edges from the protocols' own getters (not from our deployment script's intent):
    the Aave Pool's reserves (collateral where Aave lets a reserve back debt, debt where it may be borrowed),
    its oracle (PoolAddressesProvider.getPriceOracle) and each asset's feed (AaveOracle.getSourceOfAsset),
    and the Uniswap V2 pair's two tokens."""
    from golem.chain.contracts import MAIN_PAIR, contract

    by_address = {addr.lower(): key for key, addr in deployment.addresses.items()}

    def node(kind: str, address: str) -> str:
        return entity_id(kind, _checksum(address))

    provider = contract(w3, deployment, "AAVE_PROVIDER").functions
    aave = contract(w3, deployment, "AAVE_POOL").functions
    pair = contract(w3, deployment, MAIN_PAIR).functions
    lend_id = node("lending_market", provider.getPool().call())
    pool_id = node("pool", deployment.address(MAIN_PAIR))
    oracle_addr = provider.getPriceOracle().call()
    oracle_id = node("oracle", oracle_addr)
    oracle = contract(w3, deployment, "AAVE_ORACLE").functions
    data = contract(w3, deployment, "AAVE_DATA").functions if deployment.has("AAVE_DATA") else None
    facts = [TopologyFact(subject=lend_id, predicate=ORACLE_DEPENDENCY, object=oracle_id)]
    for asset in aave.getReservesList().call():
        token = node("token", asset)
        collateral = borrowable = True
        if data is not None:  # (decimals, ltv, lt, bonus, reserveFactor, usageAsCollateralEnabled, borrowingEnabled, ...)
            cfg = data.getReserveConfigurationData(asset).call()
            collateral, borrowable = bool(cfg[5]), bool(cfg[6])
        if collateral:
            facts.append(TopologyFact(subject=lend_id, predicate=COLLATERAL_BACKING, object=token))
        if borrowable:
            facts.append(TopologyFact(subject=lend_id, predicate=DEBT_TOKEN, object=token))
        source = oracle.getSourceOfAsset(asset).call()
        if int(source, 16):
            facts.append(TopologyFact(subject=oracle_id, predicate=ORACLE_DEPENDENCY, object=node("feed", source)))
    facts += [
        TopologyFact(subject=pool_id, predicate=HOLDS_TOKEN, object=node("token", pair.token0().call())),
        TopologyFact(subject=pool_id, predicate=HOLDS_TOKEN, object=node("token", pair.token1().call())),
    ]
    tokens = {sym: node("token", deployment.address(sym)) for sym in ("WETH", "USDC", "DAI") if deployment.has(sym)}
    labels = {}
    for f in facts:
        for nid in (f.subject, f.object):
            key = by_address.get(nid.partition(":")[2].lower())
            if key:
                labels[nid] = key
    labels.update({tid: sym for sym, tid in tokens.items()})
    return ProtocolTopology(entities={"pool": pool_id, "oracle": oracle_id, "lending_market": lend_id},
                            tokens=tokens, labels=labels, facts=facts)


def _checksum(address: str) -> str:
    from web3 import Web3

    if not Web3.is_address(address):
        raise ValueError(f"{address!r} is not an address")
    return Web3.to_checksum_address(address)


def golem_facts(golem_id: str, snapshot: ChainSnapshot, protocol: ProtocolTopology) -> list[TopologyFact]:
    """The golem's own edges in this snapshot: a position in each protocol it has collateral, debt or pool
    shares in, and every token it holds a balance of."""
    me = golem_entity(golem_id)
    out: list[TopologyFact] = []
    for pos in snapshot.positions:
        ent = position_entity(pos.id)
        if ent and (pos.collateral > 0 or pos.debt > 0):
            out.append(TopologyFact(subject=me, predicate=HAS_POSITION, object=ent))
    for sym, amount in sorted(snapshot.balances.items()):
        if amount > 0 and sym in protocol.tokens:
            out.append(TopologyFact(subject=me, predicate=HOLDS_TOKEN, object=protocol.tokens[sym]))
    return out


class SyncReport(BaseModel):
    asserted: list[str] = Field(default_factory=list)  # "subject predicate object"
    invalidated: list[str] = Field(default_factory=list)


def sync_facts(kg: KnowledgeGraph, desired: list[TopologyFact], *, block: int, tick: int,
               closed: Iterable[tuple[str, str]] = ()) -> SyncReport:
    """Make the current graph hold `desired`: assert what is missing (valid from `block`), and for every
    (subject, predicate) in `desired` or `closed` invalidate current objects no longer desired. One read
    when nothing changed; asserting a present fact never makes a new version."""
    pairs = {(f.subject, f.predicate) for f in desired} | set(closed)
    want = {(f.subject, f.predicate, f.object) for f in desired}
    current = kg.current_facts(sorted({s for s, _ in pairs}))
    have = {(f.subject, f.predicate, f.object) for f in current}
    report = SyncReport()
    for f in desired:
        key = (f.subject, f.predicate, f.object)
        if key not in have:
            kg.assert_fact(*key, block=block, tick=tick, confidence=1.0, exclusive=f.exclusive)
            have.add(key)
            report.asserted.append(" ".join(key))
    for fact in current:
        key = (fact.subject, fact.predicate, fact.object)
        if (fact.subject, fact.predicate) in pairs and key not in want:
            if kg.invalidate(fact.fact_id, block=block, tick=tick):  # may already be superseded above
                report.invalidated.append(" ".join(key))
    return report


def golem_positions(kg: KnowledgeGraph, golem_id: str, block: int) -> list[str]:
    """The entities the golem has a position in or holds, per the graph at `block` ."""
    me = golem_entity(golem_id)
    return sorted({f.object for f in kg.query_at_block(me, block)
                   if f.subject == me and f.predicate in GOLEM_PREDICATES})


class TopologyView(BaseModel):
    """What the analyze step needs: the node of each probe's entity kind and hop distances from positions."""

    entities: dict[str, str] = Field(default_factory=dict)  # pool / oracle / lending_market → node id
    hops: dict[str, int] = Field(default_factory=dict)  # node id → hops from the nearest position (0 = one)
    positions: list[str] = Field(default_factory=list)
    block: int = 0

    def anomaly_entity(self, anomaly: Anomaly, snapshot: ChainSnapshot) -> str | None:
        kind = PROBE_ENTITY_KIND.get(anomaly.probe)
        if kind is None:
            return None
        if anomaly.probe == "homeostatic_deviation" and anomaly.description.endswith("(max: gas)"):
            return None  # the deviation is the gas price's: no protocol entity
        if kind == "position":
            hfs = [(p.health_factor, p.id) for p in snapshot.positions if p.health_factor is not None]
            return position_entity(min(hfs)[1]) if hfs else None
        return self.entities.get(kind)

    def annotate(self, anomalies: list[Anomaly], snapshot: ChainSnapshot) -> list[Anomaly]:
        """Each anomaly with its entity, hop distance and topology curiosity modifier."""
        out = []
        for a in anomalies:
            ent = self.anomaly_entity(a, snapshot)
            hops = self.hops.get(ent) if ent else None
            out.append(a.model_copy(update={"entity": ent, "topology_hops": hops,
                                            "topology_modifier": modifier_for_hops(hops)}))
        return out


def view_at(kg: KnowledgeGraph, golem_id: str, entities: dict[str, str], block: int) -> TopologyView:
    positions = golem_positions(kg, golem_id, block)
    hops = kg.distances_from(positions, TOPOLOGY_MAX_HOPS, block) if positions else {}
    return TopologyView(entities=entities, hops=hops, positions=positions, block=block)


@dataclass
class TopologyTracker:
    """Keeps a golem's topology in the graph and annotates each tick's anomalies (the observe step). The
    protocol edges are read from chain on first use (once per worker start), the golem's edges every tick."""

    kg: KnowledgeGraph
    w3: Web3
    deployment: Deployment
    protocol: ProtocolTopology | None = field(default=None)

    def observe(self, golem_id: str, snapshot: ChainSnapshot, tick: int, anomalies: list[Anomaly]) -> list[Anomaly]:
        """Sync the graph at the snapshot's block, then annotate. A graph that cannot be written or read
        (locked past the timeout) leaves the anomalies as they are: the modifier only ever adds."""
        if self.protocol is None:
            self.protocol = read_protocol_topology(self.w3, self.deployment)
        try:
            block = snapshot.block_number
            me = golem_entity(golem_id)
            desired = [*self.protocol.facts, *golem_facts(golem_id, snapshot, self.protocol)]
            report = sync_facts(self.kg, desired, block=block, tick=tick, closed=[(me, p) for p in GOLEM_PREDICATES])
            if report.asserted or report.invalidated:
                log.info("topology at block %d: +%s -%s", block, report.asserted, report.invalidated)
            view = view_at(self.kg, golem_id, self.protocol.entities, block)
        except sqlite3.Error as err:
            log.warning("topology curiosity skipped at tick %d: knowledge graph unavailable (%s)", tick, err)
            return anomalies
        return view.annotate(anomalies, snapshot)


# ---- facts from the LLM (a theta tick's analysis, `tkg_triples`) --------------------------------------------
# Relations the LLM may assert (snake_case). They are never the chain-derived ones
# above, so a model's hypothesis cannot supersede what the contracts say; and they are many-valued, so one
# never closes another. Ours: LLM facts start at confidence 0.4 (below the 0.5 of an observed one).
LLM_PREDICATES = ("token_flow", "price_source", "governance_control", "deployment", "is_router_for",
                  "liquidity_dependency")
LLM_FACT_CONFIDENCE = 0.4
MAX_LLM_FACTS = 5


class LLMFactOutcome(BaseModel):
    asserted: list[str] = Field(default_factory=list)  # "subject predicate object"
    refused: list[str] = Field(default_factory=list)  # why each refused proposal was refused


def known_entities(kg: KnowledgeGraph, block: int) -> set[str]:
    """Every entity in a fact true at `block`: the only names an LLM fact may use."""
    return {x for f in kg.facts_at_block(block) for x in (f.subject, f.object)}


def topology_brief(kg: KnowledgeGraph, block: int, limit: int = 30) -> str:
    """The facts true at `block`, one per line, for the LLM workspace (so it can name entities by id)."""
    facts = kg.facts_at_block(block)
    # One line per (subject, predicate), objects joined: an Aave market backs and lends every reserve and its
    # oracle has a feed per asset, so a line per fact would spend the workspace's budget on repetition.
    # The golem's own edges first, then the protocols nearest to them; the pair's tokens close the list.
    order = {"golem": 0, "lending_market": 1, "pool": 2, "oracle": 3}
    grouped: dict[tuple[str, str], list[str]] = {}
    for f in facts[:limit]:
        grouped.setdefault((f.subject, f.predicate), []).append(f.object)
    # Edges between protocols (positions, oracle, feeds) before the token lists, which the budget may cut.
    keys = sorted(grouped, key=lambda k: (all(o.startswith("token:") for o in grouped[k]),
                                          order.get(k[0].partition(":")[0], 9), k[0], k[1]))
    lines = [f"{subj} --{pred}--> {', '.join(grouped[(subj, pred)])}" for subj, pred in keys]
    if len(facts) > limit:
        lines.append(f"(+{len(facts) - limit} more facts)")
    return "\n".join(lines)


def assert_llm_facts(kg: KnowledgeGraph, proposals: list[tuple[str, str, str]], *, block: int,
                     tick: int) -> LLMFactOutcome:
    """Assert the relations the deciding model proposed, after checking each: a predicate from LLM_PREDICATES,
    two different entities the graph already knows at `block`, neither of them the golem itself (its positions
    come from chain only). Re-asserting a current fact is a no-op (assert_fact is idempotent)."""
    out = LLMFactOutcome()
    known = known_entities(kg, block)
    for i, (s, p, o) in enumerate(proposals[:MAX_LLM_FACTS]):
        what = f"fact {i} ({s} {p} {o})"
        if p not in LLM_PREDICATES:
            out.refused.append(f"{what}: predicate must be one of {', '.join(LLM_PREDICATES)}")
        elif s == o:
            out.refused.append(f"{what}: subject and object are the same entity")
        elif s.startswith("golem:") or o.startswith("golem:"):
            out.refused.append(f"{what}: the golem's own relations come from the chain, not from the model")
        elif s not in known or o not in known:
            unknown = [x for x in (s, o) if x not in known]
            out.refused.append(f"{what}: unknown entity {', '.join(unknown)} (use the ids in the topology)")
        else:
            kg.assert_fact(s, p, o, block=block, tick=tick, confidence=LLM_FACT_CONFIDENCE, exclusive=False)
            out.asserted.append(f"{s} {p} {o}")
    out.refused += [f"fact {i}: more than {MAX_LLM_FACTS} facts in one tick; ignored"
                    for i in range(MAX_LLM_FACTS, len(proposals))]
    return out


# ---- the owner's report (`golem grimoire topology`, read-only) ----------------------------------
def address_labels(data_dir: Path) -> dict[str, str]:
    """address (lower case) → address-book key, e.g. AAVE_POOL, WETH, from <data>/deployment.json; {} without one."""
    from golem.chain.contracts import Deployment, DeploymentError  # web3: only when a report is asked for

    path = DataLayout(data_dir).deployment
    if not path.is_file():
        return {}
    try:
        dep = Deployment.load(path)
    except DeploymentError:
        return {}
    return {addr.lower(): key for key, addr in dep.addresses.items()}


def _label(entity: str, labels: dict[str, str]) -> str:
    return labels.get(entity.partition(":")[2].lower(), "")


def topology_report(db_path: Path, golem_id: str, block: int | None, labels: dict[str, str]) -> dict[str, Any]:
    """The facts true at `block` (default: the newest block the graph has seen), the golem's positions and every
    entity within TOPOLOGY_MAX_HOPS of them with its hop distance and curiosity modifier, as a dict (what
    `golem grimoire topology --json` prints). Reads the SQLite file only. Raises ValueError with the fix when
    there is nothing to read."""
    db_path = Path(db_path)
    if not db_path.is_file():
        raise ValueError(f"{db_path} does not exist: no knowledge graph yet (start the golem, or pass --data)")
    try:
        with closing(sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)) as db:
            seen = [b for b in db.execute("SELECT MAX(valid_from), MAX(valid_until) FROM kg_facts").fetchone()
                    if b is not None]
    except sqlite3.OperationalError as err:
        raise ValueError(f"{db_path} has no knowledge graph table ({err}): let the golem run a tick first") from None
    if block is None:
        if not seen:
            raise ValueError(f"the knowledge graph in {db_path} is empty: let the golem observe a tick first")
        block = int(max(seen))
    if block < 0:
        raise ValueError(f"--block must be >= 0, got {block}")
    kg = KnowledgeGraph(db_path)
    positions = golem_positions(kg, golem_id, block)
    hops = kg.distances_from(positions, TOPOLOGY_MAX_HOPS, block) if positions else {}
    return {
        "golem_id": golem_id,
        "block": block,
        "positions": [{"entity": p, "label": _label(p, labels)} for p in positions],
        "facts": [f.model_dump() | {"subject_label": _label(f.subject, labels),
                                    "object_label": _label(f.object, labels)} for f in kg.facts_at_block(block)],
        "reachable": [{"entity": e, "label": _label(e, labels), "hops": h, "modifier": modifier_for_hops(h)}
                      for e, h in sorted(hops.items(), key=lambda kv: (kv[1], kv[0]))],
    }
