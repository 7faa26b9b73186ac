"""CLI: `golem doctor` (which deliberator thinks, and why) and `golem chat` (the session sidecar)."""

from __future__ import annotations

import os
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:  # `golem --help` loads this module; pydantic models load when a command runs
    from golem.models.config import GolemConfig


def _today_spend(data_dir: Path, day: str) -> tuple[float, int, dict[str, int]]:
    """(inference USD spent today per the cycle records, ticks today, tier counts today); zeros without data."""
    index = data_dir / "cycles" / "index.sqlite"
    if not index.exists():
        return 0.0, 0, {}
    from golem.life.cycle_store import CycleStore

    store = CycleStore(data_dir)
    spend, ticks, tiers = 0.0, 0, {}
    for row in store.recent(5000):
        if not str(row.get("timestamp", "")).startswith(day):
            continue
        ticks += 1
        tiers[row["tier"]] = tiers.get(row["tier"], 0) + 1
        if row["tier"] != "T0":
            try:
                spend += store.load(row["tick"]).inference_cost
            except Exception:  # a record being written right now; the index row is enough to count it
                pass
    return spend, ticks, tiers


def doctor_report(config: GolemConfig, env: Mapping[str, str], home: Path, data_dir: Path,
                  deliberator: tuple[Any, str] | None = None) -> str:
    """The report; `deliberator`: (the deliberator, why) a worker already selected (its view, issue 12)."""
    from golem.cognition.budget import apply_budget, budget_fraction
    from golem.inference.config import InferenceConfig
    from golem.inference.llm import select_deliberator
    from golem.models.enums import Tier

    try:
        cfg = InferenceConfig.from_config(config)
    except ValueError as err:
        return f"inference config: {err}"
    delib, why = deliberator or select_deliberator(config, env, home=home, data_dir=data_dir, inference=cfg)
    hb = config.heartbeat
    now = datetime.now(timezone.utc)
    day = now.date().isoformat()
    spend, ticks, tiers = _today_spend(data_dir, day)
    lines = [
        f"deliberator: {type(delib).__name__} — {why}",
        f"api key: ${cfg.api_key_env} is {'set' if env.get(cfg.api_key_env, '').strip() else 'not set'}",
        "models (USD per MTok: input / output / cache write / cache read):",
    ]
    for label, model in (("T1", cfg.t1_model), ("T2", cfg.t2_model), ("T2 ceiling (§S12 warning band)", cfg.t2_ceiling_model),
                         ("evaluator", cfg.evaluator_model or "the other tier's model (rev. 2)")):
        p = cfg.prices.get(model)
        price = f"{p.input:g} / {p.output:g} / {p.write:g} / {p.read:g}" if p else ""
        lines.append(f"  {label:<32} {model:<20} {price}")
    lines += [
        f"budget: ${hb.max_daily_cost_usd:.2f}/day; warning {hb.cost_warning_threshold:.0%} (Sonnet ceiling), "
        f"soft cap {hb.cost_soft_cap_threshold:.0%} (no LLM calls), hard stop 100 %",
        f"today ({day} UTC): {ticks} ticks {dict(sorted(tiers.items())) or ''}, inference ${spend:.4f} "
        f"({budget_fraction(spend, hb):.0%} of the cap)",
    ]
    lines.append(_gas_line(config, data_dir, now.timestamp()))
    allowed, note = apply_budget(Tier.T2, spend, hb)
    lines.append(f"a T2 tick now: {note or 'allowed'}"
                 + ("; the offline deliberator answers" if allowed == Tier.T0 else ""))
    lines.append(f"workspace allocations: T1 {sum(cfg.allocations_t1.values())} tokens, "
                 f"T2 {sum(cfg.allocations_t2.values())} tokens; timeout {cfg.timeout_seconds:g}s")
    lines += _grimoire_lines(config, data_dir, llm=getattr(delib, "router", None) is not None)
    return "\n".join(lines)


def _gas_line(config: GolemConfig, data_dir: Path, now: float) -> str:
    """Today's gas beside the §S10 partition, as the gas gate reads it (the risk store, same UTC day)."""
    from golem.safety.gas import GasPartition
    from golem.safety.limits import SafetyLimits
    from golem.safety.risk import RiskStore

    risk = SafetyLimits.from_config(config).risk
    spent, n = 0.0, 0
    if (data_dir / "risk.sqlite").exists():
        _, spent, n = RiskStore(data_dir / "risk.sqlite").gas_spent_on_day(config.golem.id, now)
    p = GasPartition(budget_usd=risk.gas_budget_usd_per_day, emergency_fraction=risk.gas_emergency_fraction,
                     spent_usd=spent)
    routine = "open" if p.routine_left_usd > 0 else "spent: routine actions are deferred"
    return (f"gas today: ${spent:.4f} over {n} actions of the ${p.budget_usd:.2f}/day partition; routine share "
            f"${p.routine_cap_usd:.2f} {routine}; ${p.emergency_usd:.2f} ring-fenced for protective actions "
            f"(never deferred)")


def _grimoire_lines(config: GolemConfig, data_dir: Path, *, llm: bool) -> list[str]:
    """The memory side: which embedder loads (offline), whether vector writes are paused, how admission rates
    future utility."""
    from golem.grimoire.embeddings import EmbedderUnavailable, identity_of, make_embedder
    from golem.grimoire.guard import WriteGuard

    g = config.grimoire
    try:
        emb = make_embedder(config)
        ident = identity_of(emb)
        floor = g.semantic_floor if g.semantic_floor is not None else emb.semantic_floor
        lines = [f"embedder: [grimoire] embedder = {g.embedder} → {ident.model} {ident.version} ({ident.dim}-d), "
                 f"retrieval abstains below cosine {floor:g}"]
    except EmbedderUnavailable as err:
        lines = [f"embedder: [grimoire] embedder = {g.embedder} is NOT available — {err}"]
    status = WriteGuard(Path(data_dir) / "grimoire").status()
    if status["paused"]:
        pending = ", ".join(f"{k} {v}" for k, v in status["pending"].items())
        lines.append(f"grimoire vector writes: PAUSED ({', '.join(status['reasons'])}; queued: {pending}) — "
                     f"run `golem grimoire reembed`")
    else:
        lines.append("grimoire vector writes: flowing")
    lines.append("admission future utility (rev. 3): " + ("t1_model through the router, ~$0.001 per candidate"
                                                          if llm else "deterministic estimate (no LLM)"))
    return lines


WORKER_WAIT_SECONDS = 8.0


async def _ask_worker(args, golem_id: str) -> str | None:
    """The worker's own report (DoctorWorkflow on its task queue), or None when no worker answers."""
    import asyncio
    import uuid

    from golem.cli import _address
    from workers.client import connect
    from workflows.doctor import DoctorWorkflow

    try:
        client = await connect(_address(args))
    except Exception:  # no Temporal: there is no worker to ask either
        return None
    wid = f"golem-{golem_id}-doctor-{uuid.uuid4().hex[:8]}"
    handle = await client.start_workflow(DoctorWorkflow.run, golem_id, id=wid, task_queue=f"golem-{golem_id}",
                                         execution_timeout=timedelta(seconds=60))
    try:
        return await asyncio.wait_for(handle.result(), WORKER_WAIT_SECONDS)
    except asyncio.TimeoutError:
        await handle.terminate("no worker answered golem doctor")
        return None


def cmd_doctor(args) -> int:
    import asyncio

    from golem.cli import _config

    config = _config(args)
    if not getattr(args, "local", False):
        report = asyncio.run(_ask_worker(args, config.golem.id))
        if report is not None:
            print(report)
            return 0
        print(f"no worker answered on task queue golem-{config.golem.id} within {WORKER_WAIT_SECONDS:g}s (is `golem "
              "run` up? is Temporal reachable?); below is this shell's view, which may differ from the worker's (its environment, "
              "its config version)\n")
    home = Path(args.home)
    if config.golem.home and not Path(config.golem.home).is_absolute():
        home = (home / config.golem.home).resolve()
    print(doctor_report(config, os.environ, home, Path(args.data)))
    return 0


# ---- chat ----------------------------------------------------------------------------------
def state_digest(data_dir: Path) -> str:
    """What the golem can say about itself without a model: its latest records."""
    index = data_dir / "cycles" / "index.sqlite"
    if not index.exists():
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


async def llm_reply(deliberator: Any, tail: list[tuple[str, str]], digest: str) -> tuple[str, dict[str, Any]]:
    from golem.inference.router import BudgetRefusal
    from golem.models.enums import Tier

    router = deliberator.router
    system = [{"type": "text", "text": "You are a Golem, an autonomous DeFi agent, chatting with your owner. "
               "Answer briefly from your records. You cannot act from chat; tell the owner to use `golem steer`."},
              {"type": "text", "text": f"<data name=\"records\">{digest}</data>", "cache_control": {"type": "ephemeral"}}]
    messages = [{"role": "user" if role == "user" else "assistant", "content": text} for role, text in tail]
    try:
        plan = router.plan(Tier.T1, 0.0, sum(len(t) for _, t in tail) // 4 + 500)
    except BudgetRefusal as r:
        return offline_reply("", digest) + f" ({r.reason})", {}
    c = await router.complete(plan, system=system, messages=messages)
    text = "".join(b.text for b in c.message.content if b.type == "text")
    return text, {"model": c.model, "cost_usd": c.cost, "token_count": c.input_tokens + c.output_tokens}


def cmd_chat(args) -> int:
    from golem.cli import _config
    from golem.inference.llm import LLMDeliberator, select_deliberator
    from golem.inference.session import SessionError, SessionTree

    data = Path(args.data)
    tree = SessionTree.load(SessionTree.default_path(data))
    try:
        if args.verify:
            ok, problems = tree.verify_integrity()
            print("session intact" if ok else "session TAMPERED:\n  " + "\n  ".join(problems))
            return 0 if ok else 1
        if args.log:
            on_path = {n.id for n in tree.current_path()}
            for nid in tree.order:
                n = tree.nodes[nid]
                mark = "*" if nid == tree.head else ("|" if nid in on_path else " ")
                print(f"{mark} {n.id} {n.content_hash[:12]} {n.branch or 'trunk':<20} {n.role}: {n.text[:80]}")
            return 0
        if args.navigate:
            print(" → ".join(tree.navigate(args.navigate)))
            return 0
        if not args.message:
            print("golem chat: give a message (or --log, --verify, --navigate NODE)", file=sys.stderr)
            return 2
        if args.branch:
            tree.branch(args.branch, args.kind, args.label or args.message[:40], "user", args.message)
        else:
            tree.append("user", args.message)
    except SessionError as err:
        print(f"golem chat: {err}", file=sys.stderr)
        return 2
    config = _config(args)
    digest = state_digest(data)
    delib, _ = select_deliberator(config, os.environ, data_dir=data)
    if isinstance(delib, LLMDeliberator):
        try:
            import asyncio

            text, meta = asyncio.run(llm_reply(delib, tree.tail(delib.config.conversation_tail or 8), digest))
        except Exception as err:  # provider down: still answer, honestly
            text, meta = offline_reply(args.message, digest) + f" (model unavailable: {err})", {}
    else:
        text, meta = offline_reply(args.message, digest), {"model": "offline"}
    tree.append("golem", text, metadata=meta)
    print(text)
    return 0


def register(command) -> None:
    p = command("doctor", "which deliberator is active and why; models, prices, budget (as the worker sees them)")
    p.add_argument("--local", action="store_true", help="this shell's view, without asking the worker")
    p.set_defaults(fn=cmd_doctor)
    p = command("chat", "talk to the golem (session sidecar; the tail enters the next T2 workspace)")
    p.add_argument("message", nargs="?")
    p.add_argument("--log", action="store_true", help="list the conversation tree (* head, | current path)")
    p.add_argument("--verify", action="store_true", help="check the Merkle hash chain")
    p.add_argument("--navigate", metavar="NODE", help="move the head to a node (id or unique prefix)")
    p.add_argument("--branch", metavar="NODE", help="start a branch at a trunk node with this message")
    p.add_argument("--kind", default="sim", choices=["sim", "pre_steer", "dream"])
    p.add_argument("--label", help="branch label (hypothesis, pending steer or dream seed)")
    p.set_defaults(fn=cmd_chat)
