"""DeFi-aware compaction of the owner's chat (the compaction extension at the session hook): the turns older than the
tail become a narrative beside the invariants the data dir holds; the T2 workspace's conversation source and
`golem chat` (real anthropic SDK on a fake Messages API) read it. Real SQLite cycle store and session files in tmp."""

from __future__ import annotations

import json
from pathlib import Path

import httpx2

from cli.main import main
from golem.deliberators import HomeContext
from golem.inference.compaction import CompactionLog, narrative
from golem.inference.session import SessionTree
from golem.layout import DataLayout
from golem.life.cycle_store import CycleStore
from golem.models.config import ExtensionsSection, GolemConfig
from golem.models.enums import BehavioralPhase, MarketRegime, Tier
from golem.models.observation import PositionState
from golem.models.record import DecisionCycleRecord
from golem.safety.experience import Assessment, Finding, ViabilityStore
from golem.safety.limits import SafetyLimits
from tests.unit.inference_fakes import FakeMessagesAPI, message
from tests.unit.test_offline_deliberator import decide_input

HOME = Path(__file__).resolve().parents[2] / "examples" / "golem-home"
RULE = "WHEN health_factor < 1.7 AND regime == volatile THEN repay 20% debt"


def _data(tmp: Path, turns: int) -> DataLayout:
    data = DataLayout(tmp)
    obs = decide_input().observation
    snap = obs.snapshot.model_copy(update={"positions": [PositionState(id="aave", collateral=12.5, debt=9_000.0,
                                                                       health_factor=1.912)]})
    CycleStore(tmp).persist(DecisionCycleRecord(
        tick=40, timestamp="2026-11-27T00:00:00+00:00", golem_id="t", observation=obs.model_copy(update={"snapshot": snap}),
        regime=MarketRegime.VOLATILE, prediction_error=0.2, deliberation_threshold=0.3, tier=Tier.T0,
        gating_reason="calm", phase=BehavioralPhase.CONSERVATION))
    data.playbook.parent.mkdir(parents=True, exist_ok=True)
    data.playbook.write_text(f"# PLAYBOOK\n\n- {RULE}\n")
    ViabilityStore(data.viability).record(Assessment(tick=40, findings=[Finding(
        kind="thin_liquidity", severity="critical", message="m", fix="f")]), "sha")
    tree = SessionTree.load(SessionTree.default_path(tmp))
    for i in range(turns):
        tree.append("user", f"Small talk number {i}. Nice weather." if i % 3 else f"Why did you repay ${i}00 USDC at tick {i}?")
        tree.append("golem", f"Answer {i}. " + "I looked at the pool, the oracle and the position, and judged that "
                    "nothing needed doing beyond what the rules already said, so I waited for the next tick. " * 3)
    return data


def test_the_narrative_keeps_turns_about_money_and_limits_before_chit_chat():
    turns = [("user", f"hello there {i}") for i in range(60)] + [("user", "Sell 2 WETH if the health factor drops.")]
    text = narrative(turns, budget=40)
    assert "user: Sell 2 WETH if the health factor drops." in text
    assert "turn(s) with nothing on money, positions or limits left out" in text
    assert narrative(turns, budget=40) == text  # deterministic


def test_older_turns_are_compacted_once_with_the_invariants_the_workspace_reads(tmp_path):
    data = _data(tmp_path, 10)  # 20 turns; the workspace reads the last 8
    cfg = GolemConfig()
    tail = HomeContext(HOME, tmp_path, cfg).conversation_tail(8)
    (role, text), rest = tail[0], tail[1:]
    assert role == "compaction" and len(rest) == 8 and rest[-1][1].startswith("Answer 9. I looked")
    assert text.startswith("[12 earlier turns, compacted ")
    assert SafetyLimits.from_config(cfg).policy_hash()[:16] in text and "phase conservation" in text
    assert "health_factor 1.912" in text and "collateral 12.5" in text and "debt 9000.0" in text
    assert "strategy thin_liquidity (critical)" in text and RULE in text
    assert "user: Why did you repay $000 USDC at tick 0?" in text  # the money turns are in the narrative
    log = CompactionLog(data.conversation.parent / "compactions.jsonl")
    (kept,) = [json.loads(x) for x in log.path.read_text().splitlines()]
    assert kept["compacted"] == 12 and kept["tokens_after"] < kept["tokens_before"]
    assert kept["compression_ratio"] == round(kept["tokens_after"] / kept["tokens_before"], 4)
    HomeContext(HOME, tmp_path, cfg).conversation_tail(8)  # the same path: read back, not compacted again
    assert len(log.path.read_text().splitlines()) == 1
    # switched off in golem.toml: the tail alone
    off = GolemConfig(extensions=ExtensionsSection(disabled=["compaction"]))
    assert [r for r, _ in HomeContext(HOME, tmp_path, off).conversation_tail(8)] == ["user", "golem"] * 4


def test_a_short_session_has_nothing_to_compact(tmp_path):
    _data(tmp_path, 3)
    assert [r for r, _ in HomeContext(HOME, tmp_path, GolemConfig()).conversation_tail(8)] == ["user", "golem"] * 3


def test_golem_chat_sends_the_compaction_to_the_model_as_data(tmp_path, monkeypatch, capsys):
    """`golem chat` through the real anthropic SDK: the model gets the tail as messages and the compaction of the
    turns before it in the system prompt."""
    _data(tmp_path, 10)
    api = FakeMessagesAPI(message([{"type": "text", "text": "I repaid because the health factor fell."}],
                                  model="claude-haiku-4-5"))
    import golem.inference.router as router_mod

    real = router_mod.make_client
    monkeypatch.setattr(router_mod, "make_client", lambda key, **kw: real(
        key, **{**kw, "http_client": httpx2.AsyncClient(transport=httpx2.MockTransport(api.handler))}))
    monkeypatch.setattr("golem.deliberators.make_client", router_mod.make_client)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-key")
    home = tmp_path / "home"
    home.mkdir()
    (home / "golem.toml").write_text('[golem]\nid = "t"\nhome = "."\n[inference]\nprovider = "anthropic"\n')
    (home / "STRATEGY.md").write_text((HOME / "STRATEGY.md").read_text())
    assert main(["chat", "what did we agree on limits?", "--home", str(home), "--data", str(tmp_path)]) == 0
    assert "I repaid because" in capsys.readouterr().out
    (body,) = api.requests
    earlier = [b["text"] for b in body["system"] if "earlier-conversation" in b["text"]]
    assert earlier and "[13 earlier turns, compacted" in earlier[0] and RULE in earlier[0]
    assert body["messages"][-1] == {"role": "user", "content": "what did we agree on limits?"}
