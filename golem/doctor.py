"""`golem doctor`'s report: which deliberator thinks and why, the models and prices, today's inference and gas spend
beside their budgets, the embedder and the Grimoire's write pause. The worker answers it for the CLI
(activities/doctor.py, so the report is the worker's view); `golem doctor --local` builds it in the shell."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from golem.layout import DataLayout

if TYPE_CHECKING:  # pydantic models load when the report is built
    from golem.models.config import GolemConfig


def today_spend(data_dir: Path, day: str) -> tuple[float, int, dict[str, int]]:
    """(inference USD spent today per the cycle records, ticks today, tier counts today); zeros without data."""
    if not DataLayout(data_dir).cycle_index.exists():
        return 0.0, 0, {}
    from golem.life.cycle_store import CycleStore

    store = CycleStore(data_dir)
    spend, ticks, tiers = 0.0, 0, dict[str, int]()
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
    """The report; `deliberator`: (the deliberator, why) a worker already selected (its view)."""
    from golem.inference.budget import apply_budget, budget_fraction
    from golem.inference.config import InferenceConfig
    from golem.deliberators import select_deliberator
    from golem.models.enums import Tier

    try:
        cfg = InferenceConfig.from_config(config)
    except ValueError as err:
        return f"inference config: {err}"
    delib, why = deliberator or select_deliberator(config, env, home=home, data_dir=data_dir, inference=cfg)
    hb = config.heartbeat
    now = datetime.now(timezone.utc)
    day = now.date().isoformat()
    spend, ticks, tiers = today_spend(data_dir, day)
    lines = [
        f"deliberator: {type(delib).__name__} — {why}",
        f"api key: ${cfg.api_key_env} is {'set' if env.get(cfg.api_key_env, '').strip() else 'not set'}",
        "models (USD per MTok: input / output / cache write / cache read):",
    ]
    if cfg.payment == "x402":  # the wallet pays; the key above is the gateway's (docs/how-to/x402.md)
        lines.insert(2, f"payment: x402, each call paid from the golem's wallet through {cfg.gateway_url} "
                        f"(at most ${cfg.max_payment_usd:g} a call); the gateway holds ${cfg.api_key_env}")
    for label, model in (("T1", cfg.t1_model), ("T2", cfg.t2_model), ("T2 ceiling (budget warning band)", cfg.t2_ceiling_model),
                         ("evaluator", cfg.evaluator_model or "the other tier's model")):
        p = cfg.prices.get(model)
        price = f"{p.input:g} / {p.output:g} / {p.write:g} / {p.read:g}" if p else ""
        lines.append(f"  {label:<32} {model:<20} {price}")
    lines += [
        f"budget: ${hb.max_daily_cost_usd:.2f}/day; warning {hb.cost_warning_threshold:.0%} (Sonnet ceiling), "
        f"soft cap {hb.cost_soft_cap_threshold:.0%} (no LLM calls), hard stop 100 %",
        f"today ({day} UTC): {ticks} ticks {dict(sorted(tiers.items())) or ''}, inference ${spend:.4f} "
        f"({budget_fraction(spend, hb):.0%} of the cap)",
    ]
    lines.append(gas_line(config, data_dir, now.timestamp()))
    allowed, note = apply_budget(Tier.T2, spend, hb)
    lines.append(f"a T2 tick now: {note or 'allowed'}"
                 + ("; the offline deliberator answers" if allowed == Tier.T0 else ""))
    lines.append(f"workspace allocations: T1 {sum(cfg.allocations_t1.values())} tokens, "
                 f"T2 {sum(cfg.allocations_t2.values())} tokens; timeout {cfg.timeout_seconds:g}s")
    lines += grimoire_lines(config, data_dir, llm=getattr(delib, "router", None) is not None)
    return "\n".join(lines)


def gas_line(config: GolemConfig, data_dir: Path, now: float) -> str:
    """Today's gas beside its daily partition, as the gas gate reads it (the risk store, same UTC day)."""
    from golem.safety.gas import GasPartition
    from golem.safety.limits import SafetyLimits
    from golem.safety.risk import RiskStore

    risk = SafetyLimits.from_config(config).risk
    spent, n = 0.0, 0
    if DataLayout(data_dir).risk.exists():
        _, spent, n = RiskStore(DataLayout(data_dir).risk).gas_spent_on_day(config.golem.id, now)
    p = GasPartition(budget_usd=risk.gas_budget_usd_per_day, emergency_fraction=risk.gas_emergency_fraction,
                     spent_usd=spent)
    routine = "open" if p.routine_left_usd > 0 else "spent: routine actions are deferred"
    return (f"gas today: ${spent:.4f} over {n} actions of the ${p.budget_usd:.2f}/day partition; routine share "
            f"${p.routine_cap_usd:.2f} {routine}; ${p.emergency_usd:.2f} ring-fenced for protective actions "
            f"(never deferred)")


def grimoire_lines(config: GolemConfig, data_dir: Path, *, llm: bool) -> list[str]:
    """The memory side: which embedder loads (offline), whether vector writes are paused, how admission rates
    future utility."""
    from golem.grimoire.store.embeddings import EmbedderUnavailable, identity_of, make_embedder
    from golem.grimoire.store.guard import WriteGuard

    g = config.grimoire
    try:
        emb = make_embedder(config)
        ident = identity_of(emb)
        floor = g.semantic_floor if g.semantic_floor is not None else emb.semantic_floor
        lines = [f"embedder: [grimoire] embedder = {g.embedder} → {ident.model} {ident.version} ({ident.dim}-d), "
                 f"retrieval abstains below cosine {floor:g}"]
    except EmbedderUnavailable as err:
        lines = [f"embedder: [grimoire] embedder = {g.embedder} is NOT available — {err}"]
    status = WriteGuard(DataLayout(data_dir).grimoire).status()
    if status["paused"]:
        pending = ", ".join(f"{k} {v}" for k, v in status["pending"].items())
        lines.append(f"grimoire vector writes: PAUSED ({', '.join(status['reasons'])}; queued: {pending}) — "
                     f"run `golem grimoire reembed`")
    else:
        lines.append("grimoire vector writes: flowing")
    lines.append("admission future utility: " + ("t1_model through the router, ~$0.001 per candidate"
                                                          if llm else "deterministic estimate (no LLM)"))
    return lines
