"""`golem doctor` and `golem chat` through the real CLI parser, on a real cycle store (SQLite) in tmp."""

from __future__ import annotations

from pathlib import Path

from cli.main import main
from golem.doctor import doctor_report
from golem.inference.session import SessionTree
from golem.life.cycle_store import CycleStore
from golem.models.config import GolemConfig, HeartbeatSection, InferenceSection
from golem.models.enums import MarketRegime, Tier
from golem.models.record import DecisionCycleRecord, DeliberationRecord
from tests.unit.test_offline_deliberator import decide_input

HOME = Path(__file__).resolve().parents[2] / "examples" / "golem-home"


def test_doctor_reports_deliberator_models_prices_budget(tmp_path):
    cfg = GolemConfig(inference=InferenceSection(provider="anthropic", t2_model="claude-opus-4-6"),
                      heartbeat=HeartbeatSection(max_daily_cost_usd=4.0))
    text = doctor_report(cfg, {}, HOME, tmp_path)
    assert "OfflineDeliberator" in text and "ANTHROPIC_API_KEY is not set" in text
    assert "claude-opus-4-6" in text and "5 / 25 / 6.25 / 0.5" in text and "$4.00/day" in text
    assert "embedder: [grimoire] embedder = wordllama → wordllama-l2_supercat-256" in text
    assert "below cosine 0.3" in text and "vector writes: flowing" in text and "deterministic estimate" in text
    text = doctor_report(cfg, {"ANTHROPIC_API_KEY": "sk-do-not-print"}, HOME, tmp_path)
    assert "LLMDeliberator" in text and "is set" in text and "sk-do-not-print" not in text
    assert "t1_model through the router" in text
    paid = GolemConfig(inference=InferenceSection(provider="anthropic", payment="x402", max_payment_usd=0.05))
    text = doctor_report(paid, {}, HOME, tmp_path)
    assert "payment: x402, each call paid from the golem's wallet through http://127.0.0.1:8402 (at most $0.05" in text
    assert "no golem key to pay with" in text  # the CLI holds no key: only a worker can pay


def test_doctor_shows_a_missing_embedder_and_a_drift_pause(tmp_path, monkeypatch):
    import sys

    from golem.grimoire.store.guard import WriteGuard
    from golem.models.config import GrimoireSection

    monkeypatch.setitem(sys.modules, "fastembed", None)  # as on a machine without the [nomic] extra
    cfg = GolemConfig(grimoire=GrimoireSection(embedder="nomic-embed-text-v1.5"))
    WriteGuard(tmp_path / "grimoire").pause("drift", {"status": "critical"})
    text = doctor_report(cfg, {}, HOME, tmp_path)
    assert "nomic-embed-text-v1.5 is NOT available" in text and "pip install 'golem[nomic]'" in text
    assert "vector writes: PAUSED (drift" in text and "golem grimoire reembed" in text


def test_chat_offline_answers_from_records_and_keeps_a_verified_tree(tmp_path, capsys):
    inp = decide_input()
    CycleStore(tmp_path).persist(DecisionCycleRecord(
        tick=7, timestamp="2025-01-01T00:00:00+00:00", golem_id="t", observation=inp.observation,
        regime=MarketRegime.VOLATILE, prediction_error=0.7, deliberation_threshold=0.3, tier=Tier.T2,
        gating_reason="steer", deliberation=DeliberationRecord(model="offline-deliberator", tier=Tier.T2,
                                                               decision="repay 2000 USDC", reasoning_summary="hf low")))
    common = ["--home", str(HOME), "--data", str(tmp_path)]
    assert main(["chat", "what did you do?", *common]) == 0
    out = capsys.readouterr().out
    assert out.startswith("(offline:") and "tick 7" in out and "repay 2000 USDC" in out
    tree = SessionTree.load(SessionTree.default_path(tmp_path))
    assert [r for r, _ in tree.tail(10)] == ["user", "golem"] and tree.verify_integrity()[0]
    first = tree.order[0]
    assert main(["chat", "and if I steer?", "--branch", first[:6], "--kind", "pre_steer", *common]) == 0
    assert main(["chat", "--verify", *common]) == 0
    assert SessionTree.load(SessionTree.default_path(tmp_path)).nodes[tree.order[0]].branch is None
    assert main(["chat", "--navigate", "nope", *common]) == 2


def test_golem_show_fires_the_debug_hook_onto_the_event_fabric(tmp_path, capsys):
    """`golem show N` is the owner asking what the golem thought: the observability member of the debug hook records
    it with the tick's regime, phase, tier and cost; switched off, nothing is recorded."""
    from golem.events.store import EventStore

    inp = decide_input()
    CycleStore(tmp_path).persist(DecisionCycleRecord(
        tick=7, timestamp="2025-01-01T00:00:00+00:00", golem_id="t", observation=inp.observation,
        regime=MarketRegime.VOLATILE, prediction_error=0.7, deliberation_threshold=0.3, tier=Tier.T2,
        gating_reason="steer", total_cost=0.0123))
    assert main(["show", "7", "--brief", "--home", str(HOME), "--data", str(tmp_path)]) == 0
    (e,) = EventStore(tmp_path).read(kinds=["heartbeat.debug_requested"], limit=5)
    assert e.tick == 7 and e.payload["view"] == "brief" and e.payload["tier"] == "T2"
    assert e.payload["regime"] == "volatile" and e.payload["cost_usd"] == 0.0123
    home = tmp_path / "home"
    home.mkdir()
    (home / "golem.toml").write_text('[golem]\nid = "t"\n[extensions]\ndisabled = ["observability"]\n')
    assert main(["show", "7", "--home", str(home), "--data", str(tmp_path)]) == 0
    assert len(EventStore(tmp_path).read(kinds=["heartbeat.debug_requested"], limit=5)) == 1
