"""What the golem says in `golem chat`: an answer from its records without a model (offline), or a short T1 reply
through the router with the records as cached context. Chat never acts: the owner steers with `golem steer`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from golem.layout import DataLayout


def state_digest(data_dir: Path) -> str:
    """What the golem can say about itself without a model: its latest records."""
    if not DataLayout(data_dir).cycle_index.exists():
        return "I have no decision records yet (no ticks in this data dir)."
    from golem.life.cycle_store import CycleStore

    store = CycleStore(data_dir)
    rows = store.recent(20)
    if not rows:
        return "I have no decision records yet."
    last = store.load(rows[0]["tick"])
    snap = last.observation.snapshot
    hf = last.observation.min_health_factor()
    parts = [
        f"Latest tick {last.tick} ({last.timestamp}): tier {last.tier.value}, regime {last.regime.value}, "
        f"phase {last.phase.value}. Pool price {snap.pool.price:.2f}, health factor "
        f"{hf:.3f}" if hf is not None else f"Latest tick {last.tick}: tier {last.tier.value}, regime {last.regime.value}",
    ]
    acted = next((store.load(r["tick"]) for r in rows if r["tier"] != "T0"), None)
    if acted is not None and acted.deliberation is not None:
        d = acted.deliberation
        parts.append(f"Last deliberation (tick {acted.tick}, {d.model}): {d.decision}. {d.reasoning_summary[:400]}")
    tiers: dict[str, int] = {}
    for r in rows:
        tiers[r["tier"]] = tiers.get(r["tier"], 0) + 1
    parts.append(f"Last {len(rows)} ticks by tier: {dict(sorted(tiers.items()))}.")
    return " ".join(parts)


def offline_reply(question: str, digest: str) -> str:
    return ("(offline: no model is configured, so this is not a conversation — here is what my records say.) "
            + digest + " Your message is kept in the chat session; send it as `golem steer` or `golem followup` "
            "to change what I do.")


async def llm_reply(deliberator: Any, tail: list[tuple[str, str]], digest: str,
                    earlier: str = "") -> tuple[str, dict[str, Any]]:
    """`earlier`: the compaction of the turns before `tail` (golem.usecases.conversation), read as data."""
    from golem.inference.router import BudgetRefusal
    from golem.models.enums import Tier

    router = deliberator.router
    system = [{"type": "text", "text": "You are a Golem, an autonomous DeFi agent, chatting with your owner. "
               "Answer briefly from your records. You cannot act from chat; tell the owner to use `golem steer`."},
              {"type": "text", "text": f"<data name=\"records\">{digest}</data>", "cache_control": {"type": "ephemeral"}}]
    if earlier:
        system.append({"type": "text", "text": f"<data name=\"earlier-conversation\">{earlier}</data>"})
    messages = [{"role": "user" if role == "user" else "assistant", "content": text} for role, text in tail]
    try:
        plan = router.plan(Tier.T1, 0.0, sum(len(t) for _, t in tail) // 4 + 500)
    except BudgetRefusal as r:
        return offline_reply("", digest) + f" ({r.reason})", {}
    c = await router.complete(plan, system=system, messages=messages)
    text = "".join(b.text for b in c.message.content if b.type == "text")
    return text, {"model": c.model, "cost_usd": c.cost, "token_count": c.input_tokens + c.output_tokens}
