"""Domain mental models on real stores (SQLite + LanceDB, the bundled embedder): a Grimoire entry tagged mental-model
is offered to a T2 decision when it outranks every core model for the tick's situation, and only then."""

from __future__ import annotations

import pytest

from golem.cognition.mental_models import TAG, domain_model_entries, rank_domain_models
from golem.cognition.reflect import retrieval_query
from golem.cognition.retrieve import retrieve_for_decide
from golem.grimoire.access import open_stores
from golem.grimoire.semantic.store import EntrySource, EntryType, GrimoireEntry
from golem.learning.ledger import LearningLedger
from golem.models.config import GolemConfig
from golem.models.enums import Tier
from golem.models.state import GolemState
from golem.models.tick import RetrieveInput, TickContext
from tests.unit.test_safety_cage import obs

SRC = EntrySource(golem_id="g")


@pytest.fixture()
def stores(tmp_path):
    episodes, semantic = open_stores(tmp_path / "data")
    situation = retrieval_query(obs())
    fits = semantic.put(GrimoireEntry(
        category=EntryType.HEURISTIC, tags=[TAG], source=SRC, created_tick=0, valid_from=0,
        content=f"Loan buffer ladder ({situation}): keep the health factor two rungs above the repay line."))
    retired = semantic.put(GrimoireEntry(
        category=EntryType.HEURISTIC, tags=[TAG], source=SRC, created_tick=0, valid_from=0, valid_until=5,
        content=f"Old ladder ({situation}): one rung was enough."))
    unrelated = semantic.put(GrimoireEntry(
        category=EntryType.HEURISTIC, tags=[TAG], source=SRC, created_tick=0, valid_from=0,
        content="Options gamma scalping: rebalance delta on every move of the underlying's implied volatility."))
    return episodes, semantic, situation, fits, retired, unrelated, tmp_path


def test_a_domain_model_is_offered_only_when_it_outranks_every_core_model(stores):
    _, semantic, situation, fits, retired, unrelated, _ = stores
    ranked = rank_domain_models(semantic, situation, tick=10)
    assert [e.id for e, _, _ in ranked] == [fits.id]  # the retired one is out of force, the unrelated one ranks low
    (_, score, core_best), = ranked
    assert score > core_best
    (entry,) = domain_model_entries(semantic, situation, tick=10)
    assert entry.kind == TAG and entry.scores["best_core"] == pytest.approx(core_best, abs=1e-4)
    assert rank_domain_models(semantic, "options gamma scalping", tick=10)[0][0].id == unrelated.id


def test_a_t2_decision_gets_the_outranking_domain_models_first(stores):
    episodes, semantic, _, fits, *_, tmp = stores
    ctx = TickContext(golem_id="g", tick=10, config=GolemConfig(), state=GolemState(golem_id="g", tick=10))
    learning = LearningLedger(tmp / "learning.sqlite")
    t2 = retrieve_for_decide(RetrieveInput(ctx=ctx, observation=obs(), tier=Tier.T2), episodes, semantic, learning)
    assert t2.entries[0].id == fits.id and t2.entries[0].kind == TAG
    t1 = retrieve_for_decide(RetrieveInput(ctx=ctx, observation=obs(), tier=Tier.T1), episodes, semantic, learning)
    assert all(e.kind != TAG for e in t1.entries)  # T1 goes without mental models
