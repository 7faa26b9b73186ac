"""The Episode fields (type, tool, outcome, chain, token pair, timestamp, importance,
consolidated, tools, emotional tag, gain): derivation from a DecisionCycleRecord, defaults for episodes without one,
storage round trip, consolidation marks, the migration of a table written by the previous schema, and JSONL
transfer. Real LanceDB in tmp dirs, the real WordLlama embedder."""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone

import lancedb
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from golem.grimoire.dreams.replay import replay_gain
from golem.grimoire.store.embeddings import default_embedder, identity_of
from golem.grimoire.episodes.model import (
    EMOTIONAL_TAGS,
    PAD_NEUTRAL_PLEASURE,
    PAD_NEUTRAL_RADIUS,
    Episode,
    EpisodeOutcome,
    EpisodeType,
    Importance,
    episode_from_record,
    episode_id,
    importance_of,
    outcome_of,
    pad_label,
)
from golem.grimoire.episodes.store import EpisodeStore
from golem.grimoire.semantic.store import SemanticStore
from golem.grimoire.transfer import export_lines, import_file
from golem.models import (
    ActionRecord,
    ActionStatus,
    Anomaly,
    ChainSnapshot,
    DecisionCycleRecord,
    MarketRegime,
    Observation,
    OutcomeRecord,
    PoolState,
    ProbeSeverity,
    Tier,
)
from golem.models.observation import ProbeResult
from golem.models.state import PADVector


@pytest.fixture(scope="module")
def embedder():
    return default_embedder()


def record(tick: int = 5, *, tier=Tier.T0, actions=(), outcome=None, anomalies=(), probes=(), reorged=(),
           sources=None, pad=(0.0, 0.0, 0.0), pe=0.05, timestamp="2026-03-01T12:00:00+00:00") -> DecisionCycleRecord:
    pool = PoolState(address="0x" + "11" * 20, token0="WETH", token1="USDC", reserve0=100.0, reserve1=250_000.0,
                     price=2500.0, tvl=500_000.0)
    snap = ChainSnapshot(chain_id=31337, block_number=100 + tick, block_timestamp=1_700_000_000 + tick,
                         gas_price_gwei=2.0, pool=pool, oracle_price=2500.0)
    return DecisionCycleRecord(
        tick=tick, timestamp=timestamp, golem_id="g1",
        observation=Observation(snapshot=snap, regime=MarketRegime.VOLATILE, probes=list(probes),
                                reorged_ticks=list(reorged)),
        regime=MarketRegime.VOLATILE, prediction_error=pe, deliberation_threshold=0.3, tier=tier, gating_reason="test",
        anomalies=list(anomalies), actions=list(actions), outcome=outcome,
        prediction_error_sources=sources or {}, pad_after=PADVector(pleasure=pad[0], arousal=pad[1], dominance=pad[2]),
    )


def action(i: int, tool: str, status=ActionStatus.EXECUTED) -> ActionRecord:
    return ActionRecord(action_index=i, action_type=tool.split("_")[0], tool_name=tool, status=status)


# ---- emotional tag (Mehrabian PAD octants) -----------------------------------------------------------
def test_pad_label_octants_and_neutral():
    assert pad_label(0.5, 0.5, 0.5) == "exuberant" and pad_label(-0.5, -0.5, -0.5) == "bored"
    assert pad_label(0.5, 0.5, -0.5) == "dependent" and pad_label(-0.5, -0.5, 0.5) == "disdainful"
    assert pad_label(0.5, -0.5, 0.5) == "relaxed" and pad_label(-0.5, 0.5, -0.5) == "anxious"
    assert pad_label(0.5, -0.5, -0.5) == "docile" and pad_label(-0.5, 0.5, 0.5) == "hostile"
    assert pad_label(0.05, -0.05, 0.05) == "neutral"  # inside the neutral radius
    assert pad_label(0.04, -0.5, 0.5) == "neutral" and pad_label(-0.04, -0.5, 0.5) == "neutral"  # no valence
    assert pad_label(PAD_NEUTRAL_RADIUS, 0.0, 0.0) == "exuberant"  # on it: an octant (zero counts as +)
    with pytest.raises(ValueError, match="finite"):
        pad_label(math.nan, 0.0, 0.0)


@given(st.tuples(*[st.floats(-1, 1)] * 3))
def test_pad_label_opposite_vector_is_opposite_octant(pad):
    label = pad_label(*pad)
    assert label in EMOTIONAL_TAGS
    if math.sqrt(sum(x * x for x in pad)) >= PAD_NEUTRAL_RADIUS and all(x != 0 for x in pad) \
            and abs(pad[0]) >= PAD_NEUTRAL_PLEASURE:
        opposite = {"exuberant": "bored", "dependent": "disdainful", "relaxed": "anxious", "docile": "hostile"}
        opposite |= {v: k for k, v in opposite.items()}
        assert pad_label(*(-x for x in pad)) == opposite[label]


# ---- outcome and importance rules -----------------------------------------------------------------------
def test_outcome_rule():
    assert outcome_of(0, True, 50.0) == EpisodeOutcome.DESCRIPTIVE  # no action: descriptive, whatever the pnl
    assert outcome_of(1, True, 3.2) == EpisodeOutcome.POSITIVE
    assert outcome_of(1, True, -3.2) == EpisodeOutcome.NEGATIVE
    assert outcome_of(1, True, 0.004) == EpisodeOutcome.NEUTRAL  # under a cent
    assert outcome_of(1, True, None) == EpisodeOutcome.NEUTRAL
    assert outcome_of(1, False, 3.2) == EpisodeOutcome.NEGATIVE  # did not verify
    assert outcome_of(2, True, 3.2, failed=True) == EpisodeOutcome.NEGATIVE


@pytest.mark.parametrize(("kw", "expected"), [
    ({}, Importance.ROUTINE),
    ({"tier": Tier.T2}, Importance.NOTABLE),
    ({"sources": {"regime_change": 0.4}}, Importance.NOTABLE),
    ({"actions": [action(0, "swap_exact_in")], "outcome": OutcomeRecord(verified=True, pnl_impact=1.0)},
     Importance.NOTABLE),
    ({"actions": [action(0, "swap_exact_in", ActionStatus.BLOCKED)]}, Importance.ROUTINE),  # blocked: never ran
    ({"anomalies": [Anomaly(probe="price_delta", severity=ProbeSeverity.HIGH, description="-12%")]}, Importance.CRITICAL),
    ({"anomalies": [Anomaly(probe="price_delta", severity=ProbeSeverity.LOW, description="-1%")]}, Importance.ROUTINE),
    ({"reorged": [3]}, Importance.CRITICAL),
    ({"actions": [action(0, "swap_exact_in", ActionStatus.FAILED)]}, Importance.CRITICAL),
    ({"probes": [ProbeResult(probe="kill_switch", severity=ProbeSeverity.HIGH)]}, Importance.EMERGENCY),
    ({"probes": [ProbeResult(probe="circuit_breaker", severity=ProbeSeverity.HIGH)]}, Importance.EMERGENCY),
    ({"probes": [ProbeResult(probe="circuit_breaker", severity=ProbeSeverity.LOW)]}, Importance.ROUTINE),
    ({"actions": [action(0, "swap_exact_in")],
      "outcome": OutcomeRecord(verified=False, invariant_violations=["lingering approval"])}, Importance.EMERGENCY),
])
def test_importance_rule(kw, expected):
    assert importance_of(record(**kw)) == expected


# ---- episode_from_record -------------------------------------------------------------------------------
def test_action_episode_fields():
    rec = record(tier=Tier.T2, pe=0.7, pad=(-0.4, 0.6, -0.3), actions=[
        action(1, "supply_collateral"), action(0, "swap_exact_in"), action(2, "repay", ActionStatus.BLOCKED)],
        outcome=OutcomeRecord(verified=True, pnl_impact=-14.5))
    ep = episode_from_record(rec)
    assert ep.episode_type == EpisodeType.ACTION
    assert ep.action_tools == ["swap_exact_in", "supply_collateral"]  # executed ones, in action order
    assert ep.tool == "swap_exact_in" and ep.actions == 2
    assert ep.outcome == EpisodeOutcome.NEGATIVE
    assert (ep.chain, ep.token_pair) == ("31337", "WETH/USDC")
    assert ep.timestamp_ms == int(datetime(2026, 3, 1, 12, tzinfo=timezone.utc).timestamp() * 1000)
    assert ep.importance == Importance.NOTABLE and ep.consolidated is False
    assert ep.emotional_tag == "anxious"  # -P +A -D
    assert ep.gain == pytest.approx(replay_gain(-14.5, 0.7)) == ep.utility


def test_observation_and_regime_shift_episodes():
    obs = episode_from_record(record(pad=(0.02, 0.01, 0.0)))
    assert obs.episode_type == EpisodeType.OBSERVATION and obs.tool == "heartbeat" and obs.action_tools == []
    assert obs.outcome == EpisodeOutcome.DESCRIPTIVE and obs.importance == Importance.ROUTINE
    assert obs.emotional_tag == "neutral" and obs.gain == pytest.approx(replay_gain(None, 0.05))
    shift = episode_from_record(record(sources={"regime_change": 0.4, "price_divergence": 0.1}))
    assert shift.episode_type == EpisodeType.REGIME_SHIFT and shift.tool == "heartbeat"
    assert shift.importance == Importance.NOTABLE
    # acting during a regime shift: the richer type wins
    both = episode_from_record(record(sources={"regime_change": 0.4}, actions=[action(0, "swap_exact_in")]))
    assert both.episode_type == EpisodeType.ACTION


def test_episode_defaults_without_a_record():
    """Episodes built by hand (older exports, incidents) derive the new fields from the old ones."""
    ep = Episode(id="g1:tick:9", golem_id="g1", tick=9, created_at="2026-03-01T00:00:01Z", regime="volatile",
                 tier="T1", summary="a swap", actions=1, pnl_impact=4.0, outcome_verified=True, prediction_error=0.2)
    assert (ep.episode_type, ep.tool, ep.outcome) == (EpisodeType.ACTION, "unknown", EpisodeOutcome.POSITIVE)
    assert ep.timestamp_ms == 1772323201000 and ep.importance == Importance.NOTABLE
    assert ep.gain == pytest.approx(replay_gain(4.0, 0.2)) and ep.emotional_tag is None and not ep.consolidated
    naive = Episode(id="x", golem_id="g1", tick=0, created_at="2026-03-01T00:00:01", regime="volatile", tier="T0",
                    summary="quiet")
    assert naive.timestamp_ms == 1772323201000  # no offset: UTC
    assert (naive.episode_type, naive.tool, naive.importance) == (EpisodeType.OBSERVATION, "heartbeat", Importance.ROUTINE)
    with pytest.raises(ValueError, match="emotional_tag"):
        Episode.model_validate({**naive.model_dump(), "emotional_tag": "grumpy"})
    with pytest.raises(ValueError):
        Episode.model_validate({**naive.model_dump(), "importance": "urgent"})


# ---- the store ----------------------------------------------------------------------------------------------
def test_store_round_trip_idempotent_and_consolidation(tmp_path, embedder):
    store = EpisodeStore(tmp_path / "episodes.lance", embedder)
    eps = [episode_from_record(record(t, tier=Tier.T2 if t % 2 else Tier.T0, pad=(0.3, 0.3, 0.3))) for t in range(1, 6)]
    store.upsert_many(eps)
    store.upsert(episode_from_record(record(3, tier=Tier.T2, pad=(0.3, 0.3, 0.3))))  # a retried reflect: same id
    assert store.count() == 5
    assert store.get(eps[0].id) == eps[0]  # every field survives LanceDB
    assert [e.tick for e in store.unconsolidated()] == [1, 2, 3, 4, 5]
    assert store.mark_consolidated([eps[0].id, eps[2].id, eps[2].id]) == 2
    assert store.mark_consolidated([eps[0].id]) == 0  # already done: idempotent
    assert [e.tick for e in store.unconsolidated()] == [2, 4, 5]
    assert [e.tick for e in store.unconsolidated(limit=1)] == [2]
    assert store.get(eps[0].id).consolidated and not store.get(eps[1].id).consolidated
    # reinforce is a scalar update: strength grows, the vector stays the same
    before = store.table.search().where(f"id = '{eps[3].id}'").select(["vector"]).to_list()[0]["vector"]
    (got,) = store.reinforce([eps[3].id], tick=40, increment=0.5)
    after = store.table.search().where(f"id = '{eps[3].id}'").select(["vector"]).to_list()[0]["vector"]
    assert got.strength == 1.5 and got.last_accessed_tick == 40 and np.array_equal(before, after)
    row = store.table.search().where(f"id = '{eps[1].id}'").select(
        ["embedding_model", "embedding_version", "embedding_dim"]).to_list()[0]
    assert (row["embedding_model"], row["embedding_version"], row["embedding_dim"]) == tuple(identity_of(embedder))


# the schema episodes/store.py wrote before the Episode Struct fields (kept here verbatim as the migration's input)
OLD_FIELDS = [
    ("id", pa.string(), False), ("golem_id", pa.string(), False), ("tick", pa.int64(), False),
    ("created_at", pa.string(), False), ("regime", pa.string(), False), ("tier", pa.string(), False),
    ("summary", pa.string(), False), ("prediction_error", pa.float64(), False), ("actions", pa.int64(), False),
    ("pnl_impact", pa.float64(), True), ("outcome_verified", pa.bool_(), True), ("utility", pa.float64(), False),
    ("confidence", pa.float64(), False), ("strength", pa.float64(), False), ("decay_class", pa.string(), False),
    ("quality", pa.float64(), False), ("last_accessed_tick", pa.int64(), False), ("retention", pa.float64(), False),
    ("access_count", pa.int64(), False), ("strategy", pa.string(), True), ("dream_validated", pa.bool_(), False),
    ("last_replayed_tick", pa.int64(), True),
]


def _old_table(path, embedder, rows):
    schema = pa.schema([pa.field(n, t, nullable=nl) for n, t, nl in OLD_FIELDS]
                       + [pa.field("vector", pa.list_(pa.float32(), 256), nullable=False)],
                       metadata={"golem.embedder": "wordllama-l2_supercat-256", "golem.dim": "256"})
    vecs = embedder.embed([r["summary"] for r in rows])
    data = pa.Table.from_pylist(rows, schema=pa.schema([f for f in schema if f.name != "vector"]))
    data = data.append_column(schema.field("vector"), pa.FixedSizeListArray.from_arrays(
        pa.array(vecs.reshape(-1)), 256)).replace_schema_metadata(schema.metadata)
    lancedb.connect(str(path)).create_table("episodes", data=data)
    return vecs


def _old_row(tick, summary, **kw):
    row = {"id": f"g0:tick:{tick}", "golem_id": "g0", "tick": tick, "created_at": "2026-02-01T10:00:00+00:00",
           "regime": "volatile", "tier": "T1", "summary": summary, "prediction_error": 0.3, "actions": 0,
           "pnl_impact": None, "outcome_verified": None, "utility": 0.3, "confidence": 0.6, "strength": 1.5,
           "decay_class": "tactical", "quality": 0.5, "last_accessed_tick": tick, "retention": 0.9, "access_count": 2,
           "strategy": None, "dream_validated": False, "last_replayed_tick": None}
    return {**row, **kw}


def test_old_table_migrates_keeping_every_row(tmp_path, embedder):
    path = tmp_path / "grimoire" / "episodes.lance"
    rows = [_old_row(1, "quiet range bound market"),
            _old_row(2, "swapped WETH for USDC after the crash", actions=1, pnl_impact=12.0, outcome_verified=True,
                     tier="T2", strategy="eth-dca"),
            _old_row(3, "swap reverted on slippage", actions=1, pnl_impact=-3.0, outcome_verified=False)]
    old_vecs = _old_table(path, embedder, rows)

    # an old table's vectors have no recorded version: the rows migrate, then "error" refuses to mix
    with pytest.raises(ValueError, match="version.*unknown.*golem grimoire reembed"):
        EpisodeStore(path, embedder, on_model_switch="error")
    kept = EpisodeStore(path, embedder, on_model_switch="ignore")
    assert kept.migrated == 0 and kept.count() == 3  # migrated by the first open already
    vec = kept.table.search().where("id = 'g0:tick:2'").select(["vector", "embedding_version"]).to_list()[0]
    assert np.allclose(vec["vector"], old_vecs[1]) and vec["embedding_version"] == "unknown"

    store = EpisodeStore(path, embedder)  # the worker's default: a full re-embed with the known version
    assert store.reembedded == 3 and store.count() == 3 and store.identity_mismatch() is None
    by_tick = {e.tick: e for e in store.all()}
    for r in rows:  # every old field survives
        ep = by_tick[r["tick"]]
        assert {k: getattr(ep, k) for k in ("summary", "strength", "retention", "access_count", "confidence",
                                             "pnl_impact", "strategy")} == \
               {k: r[k] for k in ("summary", "strength", "retention", "access_count", "confidence", "pnl_impact",
                                  "strategy")}
    assert [by_tick[t].episode_type for t in (1, 2, 3)] == [EpisodeType.OBSERVATION, EpisodeType.ACTION,
                                                             EpisodeType.ACTION]
    assert [by_tick[t].outcome for t in (1, 2, 3)] == [EpisodeOutcome.DESCRIPTIVE, EpisodeOutcome.POSITIVE,
                                                        EpisodeOutcome.NEGATIVE]
    assert [by_tick[t].importance for t in (1, 2, 3)] == [Importance.ROUTINE, Importance.NOTABLE, Importance.NOTABLE]
    assert by_tick[2].gain == pytest.approx(replay_gain(12.0, 0.3))
    assert all(e.timestamp_ms == 1769940000000 and not e.consolidated and e.chain is None and e.action_tools == []
               and e.tool in ("heartbeat", "unknown") for e in by_tick.values())
    # and the migrated store takes new writes
    store.upsert(episode_from_record(record(4)))
    assert store.count() == 4 and store.get("g1:tick:4").tool == "heartbeat"
    assert store.search("crash swap WETH USDC", k=1)[0][0].tick == 2


# ---- transfer ---------------------------------------------------------------------------------------------
def test_export_import_keeps_the_new_fields(tmp_path, embedder):
    src = EpisodeStore(tmp_path / "a" / "e.lance", embedder)
    sem = SemanticStore(tmp_path / "a" / "s.sqlite", tmp_path / "a" / "s.lance", embedder)
    ep = episode_from_record(record(7, tier=Tier.T2, pad=(0.5, -0.5, 0.5), actions=[action(0, "swap_exact_in")],
                                    outcome=OutcomeRecord(verified=True, pnl_impact=2.5)))
    src.upsert(ep)
    src.mark_consolidated([ep.id])
    lines = list(export_lines(src, sem, golem_id="g1", tick=7))
    header = json.loads(lines[0])
    assert header["embedder"] == identity_of(embedder).as_dict()
    f = tmp_path / "x.jsonl"
    old_style = {k: v for k, v in json.loads(lines[1]).items()
                 if k not in ("episode_type", "tool", "outcome", "chain", "token_pair", "timestamp_ms", "importance",
                              "consolidated", "action_tools", "emotional_tag", "gain")}
    old_style["id"] = episode_id("g1", 8)
    f.write_text("\n".join([*lines, json.dumps(old_style)]) + "\n")
    dst = EpisodeStore(tmp_path / "b" / "e.lance", embedder)
    import_file(f, dst, SemanticStore(tmp_path / "b" / "s.sqlite", tmp_path / "b" / "s.lance", embedder), as_is=True)
    assert dst.get(ep.id) == ep.model_copy(update={"consolidated": True})
    older = dst.get(episode_id("g1", 8))  # a line from before the new fields: derived defaults
    assert older.episode_type == EpisodeType.ACTION and older.outcome == EpisodeOutcome.POSITIVE
    assert older.tool == "unknown" and older.emotional_tag is None and not older.consolidated
    assert older.timestamp_ms == ep.timestamp_ms
