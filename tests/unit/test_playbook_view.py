"""PLAYBOOK.md is a view of the admitted semantic store — learned rules, dream guards and distilled
heuristics pass the admission gate; quarantined, superseded and decayed entries stay out; the 0.7 / 0.4
hysteresis and the heuristic id as the rule's entry id are kept. Real SQLite + LanceDB in temp dirs."""

from __future__ import annotations

import pytest

from golem.grimoire.store.embeddings import default_embedder
from golem.grimoire.playbook.heuristics import HeuristicStore
from golem.grimoire.playbook.compile import rewrite_playbook
from golem.grimoire.playbook.view import AdmittedView, PlaybookLinks, admitted_filter, follow_votes, offer
from golem.grimoire.semantic.store import EntrySource, EntryType, GrimoireEntry, SemanticStore
from golem.inference.strategy import rules_in
from golem.learning import curator
from tests.unit.test_learning import _outcomes
from tests.unit.test_offline_deliberator import EXAMPLE

PAID = "When the regime is volatile and the gate escalates to T2, acting has gained money over 12 trades"
LOST = "When the regime is volatile and the gate escalates to T2, acting has lost money over 12 trades"
TICK_S = 60.0


@pytest.fixture(scope="module")
def embedder():
    return default_embedder()


def _stores(tmp_path, embedder):
    return (HeuristicStore(tmp_path / "heuristics.sqlite"),
            SemanticStore(tmp_path / "semantic.sqlite", tmp_path / "semantic.lance", embedder))


def _at(hs: HeuristicStore, text: str, n: int = 3):
    """A heuristic with n supporting episodes: 0.5 + (n - 1) × 0.1."""
    for i in range(n):
        h = hs.add_or_reinforce(text, "global", f"ep-{abs(hash(text)) % 1000}-{i}")
    return h


def _compile(hs, sem, path, tick):
    view = AdmittedView()
    rev = rewrite_playbook(hs, path, tick=tick, history=False, keep=admitted_filter(hs, sem, tick, TICK_S, view))
    return rev, view


def test_playbook_compiles_only_admitted_in_force_undecayed_entries(tmp_path, embedder):
    hs, sem = _stores(tmp_path, embedder)
    # a learned rule, through the Curator's ADD (5 supporting outcomes → 0.9)
    report = curator.apply(curator.plan(50, _outcomes(5), [], {}, EXAMPLE), hs)
    rule_id = report.operations[0].entry_id
    superseded = _at(hs, "WHEN price_change_bps <= -400 THEN swap 5% WETH to USDC")
    decaying = _at(hs, "When the regime is calm and the gate settles at T0, holding has been the norm: 40 ticks")
    # a well-established contrary entry: the LOST heuristic (3 episodes) hits the hallucination firewall
    sem.put(GrimoireEntry(category=EntryType.HEURISTIC, content=PAID, confidence=0.9, validated_count=12,
                          source=EntrySource(golem_id="g"), created_tick=1))
    lost = _at(hs, LOST)
    not_yet = _at(hs, "WHEN health_factor < 1.9 THEN repay 5% debt", n=2)  # 0.6: below the 0.7 entry bar

    offered = offer(hs, sem, "g", 50)
    assert offered[lost.id] == "quarantined" and not_yet.id not in offered
    assert {offered[i] for i in (rule_id, superseded.id, decaying.id)} <= {"admitted", "admitted_low"}
    assert sem.get(rule_id).content == hs.get(rule_id).text  # the entry id is the heuristic id
    assert offer(hs, sem, "g", 50) == {}  # a retried step offers nothing again

    path = tmp_path / "PLAYBOOK.md"
    _, view = _compile(hs, sem, path, 50)
    assert view.excluded == {lost.id: "quarantined (pending)"}
    sem.supersede(superseded.id, 60)
    # 20 000 ticks of 60 s later (~14 days): the rule was voted on (accessed), the calm heuristic was not
    late = 20_000
    follow_votes(hs, sem, [rule_id], late)
    _, view = _compile(hs, sem, path, late)
    assert view.excluded[superseded.id] == "superseded at tick 60"
    assert view.excluded[decaying.id].startswith("decayed: effective confidence")
    assert view.excluded[lost.id] == "quarantined (pending)"
    # the quarantine review drops the row: offered again only once the heuristic rests on more evidence
    sem.resolve_quarantine(lost.id, "dropped", late, "still contradicted")
    assert offer(hs, sem, "g", late) == {}
    hs.add_or_reinforce(LOST, "global", "ep-more")
    assert offer(hs, sem, "g", late) == {lost.id: "quarantined"}  # the firewall still holds it
    (rule,) = rules_in(path.read_text(), "PLAYBOOK.md", EXAMPLE)
    assert rule.entry_id == rule_id  # provenance the deliberator records
    assert [line for line in path.read_text().splitlines() if line.startswith("- ")] == [
        line for line in path.read_text().splitlines() if rule_id in line]


def test_hysteresis_kept_and_votes_reach_the_entry(tmp_path, embedder):
    hs, sem = _stores(tmp_path, embedder)
    hid = curator.apply(curator.plan(50, _outcomes(5), [], {}, EXAMPLE), hs).operations[0].entry_id
    offer(hs, sem, "g", 50)
    path = tmp_path / "PLAYBOOK.md"
    assert _compile(hs, sem, path, 50)[0].heuristics == 1
    hs.vote(hid, +5, 55)  # confidence 1.0, importance 7
    hs.vote(hid, -3, 60)  # 1.0 → 0.55: below the 0.7 entry bar, above the 0.4 exit: stays (hysteresis)
    follow_votes(hs, sem, [hid], 60)
    assert round(sem.get(hid).confidence, 2) == 0.55
    assert _compile(hs, sem, path, 60)[0].heuristics == 1
    assert hs.vote(hid, -2, 80).status == "candidate"  # 0.25 < 0.4: out (importance 2: a candidate row, not retired)
    follow_votes(hs, sem, [hid], 80)
    rev, _ = _compile(hs, sem, path, 80)
    assert rev.heuristics == 0 and round(sem.get(hid).confidence, 2) == 0.25


def test_a_dream_guard_at_0_7_reaches_the_playbook_through_the_gate(tmp_path, embedder):
    from golem.grimoire.dreams.integration import _guard_evidence
    from golem.grimoire.dreams.staging import StagedItem, StageKind, StageStatus, Trigger

    hs, sem = _stores(tmp_path, embedder)
    item = StagedItem(id="g1", cycle_tick=10, kind=StageKind.GUARD, content="guard", scenario="liquidation cascade",
                      status=StageStatus.VALIDATED, trigger=Trigger(health_below=2.0),
                      rule="WHEN health_factor < 2 THEN repay 25% debt")
    _guard_evidence(hs, item, "g", [11, 12])  # 0.5 + 2 × 0.1 = 0.7: a validated dream guard
    path = tmp_path / "PLAYBOOK.md"
    assert _compile(hs, sem, path, 20)[1].excluded  # not offered yet: not in PLAYBOOK.md
    assert rules_in(path.read_text(), "PLAYBOOK.md", EXAMPLE) == []
    (hid,) = offer(hs, sem, "g", 20)
    assert PlaybookLinks(hs).get(hid).entry_id is not None
    _compile(hs, sem, path, 20)
    assert [r.text for r in rules_in(path.read_text(), "PLAYBOOK.md", EXAMPLE)] == [
        "WHEN health_factor < 2 THEN repay 25% debt"]


def test_survival_counts_new_heuristics_still_compiled_a_horizon_later(tmp_path, embedder):
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "playbook_survival", Path(__file__).resolve().parents[2] / "bench" / "playbook_survival.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    hs, sem = _stores(tmp_path, embedder)
    rule = _at(hs, "WHEN health_factor < 1.9 THEN repay 5% debt")
    gone = _at(hs, "WHEN price_change_bps <= -400 THEN swap 5% WETH to USDC")
    offer(hs, sem, "g", 10)
    path = tmp_path / "PLAYBOOK.md"
    view = AdmittedView()
    rewrite_playbook(hs, path, tick=10, keep=admitted_filter(hs, sem, 10, TICK_S, view))
    sem.supersede(gone.id, 50)
    rewrite_playbook(hs, path, tick=60, keep=admitted_filter(hs, sem, 60, TICK_S, view))
    revs = mod.revisions(hs.path)
    assert [(t, ids) for t, ids in revs] == [(10, {rule.id, gone.id}), (60, {rule.id})]
    assert mod.survival(revs, last_tick=200) == {"new": 2, "judged": 2, "survived": 1, "rate": 0.5}
    assert mod.survival(revs, last_tick=100)["judged"] == 0  # entered 90 ticks before the end: not judged yet


def test_reinforcing_a_rule_never_rewrites_its_trigger_while_prose_takes_fresh_numbers(tmp_path):
    """A later dream's guard for the same situation ("HF < 1.5") reinforces the earlier one ("HF < 1.8") without
    lowering its trigger: a rule's numbers move only through the Curator's EDIT."""
    from golem.grimoire.playbook.heuristics import HeuristicStore

    store = HeuristicStore(tmp_path / "heuristics.sqlite")
    first = store.add_or_reinforce("WHEN health_factor < 1.8 THEN repay 25% debt", "global", "dream-59:cascade")
    later = store.add_or_reinforce("WHEN health_factor < 1.5 THEN repay 25% debt", "global", "dream-101:cascade")
    assert later.id == first.id and later.evidence_count == 2
    assert later.text == "WHEN health_factor < 1.8 THEN repay 25% debt"
    prose = store.add_or_reinforce("Holding has been the norm in 12 of 14 ticks", "global", "ep-1")
    again = store.add_or_reinforce("Holding has been the norm in 13 of 15 ticks", "global", "ep-2")
    assert again.id == prose.id and again.text == "Holding has been the norm in 13 of 15 ticks"


def test_prose_that_starts_with_when_is_not_a_rule():
    from golem.grimoire.playbook.heuristics import is_rule

    assert is_rule("WHEN health_factor < 1.8 THEN repay 25% debt")
    assert not is_rule("When gas > 50 gwei, defer swaps (seen 3 times).")
