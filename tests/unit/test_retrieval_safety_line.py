"""An action question that states a quantity binds the rules drawing a line on it: among the applicable warnings and
MUST constraints that lead its answer, those come first ("HF is 1.25; ...?" → "keep the health factor at or above
1.3" ahead of a warning that merely shares the action's words; docs/design/grimoire.md, "The fifth round")."""

from __future__ import annotations

import pytest

from golem.grimoire.access import search
from golem.grimoire.episodes.store import EpisodeStore
from golem.grimoire.retrieval import line_quantities, stated_quantities
from golem.grimoire.semantic.store import EntrySource, EntryType, GrimoireEntry, SemanticStore
from golem.grimoire.store.embeddings import default_embedder

QUESTION = "Health factor is 1.25; should I rebalance the LP range first?"
# the decide step's own query states several quantities; the health factor is not the first
DECIDE = "Price is 1850.20 and health factor is 1.25; should I rebalance the LP range first?"


def test_line_quantities_reads_the_quantity_a_rule_puts_a_line_on() -> None:
    assert line_quantities("MUST keep the health factor at or above 1.3: below it, repay first.") == {"health factor"}
    assert line_quantities("Never swap when gas is above 80 gwei.") == {"gas"}
    assert line_quantities("During a gas spike, defer routine rebalancing swaps. Never defer a repay.") == frozenset()


def test_stated_quantities_reads_every_quantity_given_a_value_or_a_line() -> None:
    assert stated_quantities("regime volatile; price 1850.20; health factor 1.62") == {"price", "health factor"}
    assert stated_quantities("the last time HF fell below 1.5") == {"health factor"}
    assert stated_quantities("Should I swap now?") == frozenset()


@pytest.mark.parametrize("question", [QUESTION, DECIDE])
def test_the_rule_on_the_stated_quantity_leads_the_safety_slots(tmp_path, question):
    emb = default_embedder()
    eps = EpisodeStore(tmp_path / "e.lance", emb)
    sem = SemanticStore(tmp_path / "s.sqlite", tmp_path / "s.lance", emb)
    src = EntrySource(golem_id="h")
    sem.put_many([GrimoireEntry(id=i, category=c, content=t, tags=g, source=src, created_tick=5) for i, c, t, g in [
        ("range", EntryType.HEURISTIC, "Rebalance the LP range when price leaves the middle half of it.", ["lp"]),
        ("gas", EntryType.WARNING, "During a gas spike, defer routine LP rebalancing swaps: never rebalance the "
         "range while fees are that high.", ["gas", "lp"]),
        ("hf", EntryType.WARNING, "MUST keep the health factor at or above 1.3: below it, repay USDC first.",
         ["must", "health-factor"]),
        ("fees", EntryType.INSIGHT, "LP fees accrue per swap through the range.", ["lp"])]])
    res = search(eps, sem, question, regime="range_bound", tick=100, k=10)
    assert res.action and not res.abstained, res.reason
    safety = [i.id for i in res.items if i.safety]
    assert safety[:2] == ["hf", "gas"], [(i.id, i.final) for i in res.items]
    # without the rule the gas warning, nearer the question's wording, would lead
    gas, hf = (next(i for i in res.items if i.id == n) for n in ("gas", "hf"))
    assert gas.final > hf.final, (gas.final, hf.final)
