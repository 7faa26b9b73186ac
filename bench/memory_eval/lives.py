"""The second memory set: questions with answers known from a golem's own recorded lives (backtests), not written.

    python bench/memory_eval/lives.py --from BT_ROOT [--only tune|sealed] [--reseal]

Each path's life (<root>/{shipped,heldout}/<path>/golem/data) becomes one Grimoire import file (its export, with the
playbook's revisions as a chain of superseding heuristics scoped to the regime their text names) and questions
derived from its records. Split by path: shipped paths tune, held-out paths sealed (hashed; the eval refuses a
changed file). How the questions are derived: docs/design/grimoire.md#the-lives-set.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import random
import re
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

HERE = Path(__file__).resolve().parent / "lives"
SPLITS = {"tune": "shipped", "sealed": "heldout"}
# sha256 over the sealed part's files (name + bytes, sorted): written once when it was generated, checked by the
# eval, which refuses a changed sealed set.
SEALED_SHA256 = "47c4470599977801c78199bc87e9dda45e5e18b342ff70228a436288fc8aef83"

REGIME_WORDS = {
    "range_bound": ["range bound", "sideways", "ranging"],
    "trending_down": ["trending down", "falling", "downtrending"],
    "trending_up": ["trending up", "rising", "uptrending"],
    "volatile": ["volatile", "wild", "turbulent"],
}
_REGIME_OF_TEXT = {"range bound": "range_bound", "trending down": "trending_down", "trending up": "trending_up",
                   "volatile": "volatile", "unknown": "unknown"}
SCENARIO_WORDS = {
    "gas_spike": ["a gas price spike", "fees exploding", "base fee blowing up"],
    "pool_drained": ["the pool's liquidity vanishing", "a drained pool", "liquidity being pulled from the pair"],
    "liquidation_cascade": ["a wave of liquidations", "cascading liquidations"],
    "oracle_lag": ["the price feed falling behind", "a stale oracle"],
    "thin_pool": ["a thin pool", "shallow liquidity"],
    "deeper_crash": ["a deeper crash", "the fall going further"],
    "reverting_exit": ["an exit that reverts", "a failing exit transaction"],
}
SCENARIO_ACTIONS = {
    "gas_spike": ["Should I rebalance with a swap while gas is this expensive?",
                  "Is now a good time to send a swap, with fees this high?"],
    "pool_drained": ["Should I sell WETH into the pool now that its reserves are shrinking?",
                     "Can I exit the WETH position through the pool in one go right now?"],
    "liquidation_cascade": ["Should I add leverage while liquidations are piling up?"],
    "oracle_lag": ["Should I trade while the feed lags the pool price?"],
    "thin_pool": ["Should I swap a large amount with liquidity this shallow?"],
    "deeper_crash": ["Should I buy more WETH while the fall may deepen?"],
    "reverting_exit": ["Should I send the exit swap now, even if it may revert?"],
}
# Things a golem in this world can do or suffer; a life in which one never happened (no episode or entry mentions it)
# gets an abstention question about it.
NEVER_HAPPENED = [
    (r"liquidat(ed|ion of my)", ["What happened the last time my position got liquidated?",
                                 "How much did I lose when I was liquidated?"]),
    (r"\bborrow", ["How did borrowing more USDC work out last time?", "When did I last take on extra debt, and why?"]),
    (r"\bwithdr", ["What happened after I pulled WETH collateral out of the lending market?"]),
    (r"\bliquidity provi|\badd_liquidity|\blp\b", ["How did my liquidity position in the pool perform?"]),
    (r"\bbridg", ["What went wrong with the bridge transfer to the other chain?"]),
    (r"\bstak", ["How much did staking my ETH earn?"]),
    (r"\bflash", ["Did the flash loan arbitrage pay off?"]),
    (r"\bgovernance|\bvote", ["How did I vote on the last governance proposal?"]),
    (r"\bairdrop", ["What did I do with the airdropped tokens?"]),
    (r"\bdai\b.*(swap|sold|bought)|(swap|sold|bought).*\bdai\b", ["Why did I swap my DAI last time?"]),
]
_LINE = re.compile(r"^- (.+?) _\(confidence [^)]*?(h-[0-9a-f]+)\)_\s*$")
_HOLD = re.compile(r"When the regime is (range bound|trending down|trending up|volatile|unknown) and the gate "
                   r"(settles at|escalates to) (T\d)")
_HF = re.compile(r"Lowest health factor (\d+\.\d+)")
_REFLEX = re.compile(r"In an? (range bound|trending down|trending up|volatile|unknown) regime, acting \(([^)]*)\) at "
                     r"health factor ([\d.]+) was (positive|negative)")


def sealed_digest(directory: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(directory.iterdir()):
        if p.is_file():
            h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def export_life(data: Path) -> list[dict[str, Any]]:
    """The life's Grimoire as `golem grimoire export` writes it, read from a copy (opening never touches the
    original run's files)."""
    from golem.grimoire.access import open_stores
    from golem.grimoire.transfer import export_lines

    tmp = Path(tempfile.mkdtemp(prefix="lives-"))
    try:
        shutil.copytree(data / "grimoire", tmp / "grimoire")
        eps, sem = open_stores(tmp, None, on_model_switch="ignore")
        return [json.loads(line) for line in export_lines(eps, sem, golem_id="bt-golem", tick=0)]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def playbook_chains(data: Path) -> dict[str, list[tuple[int, str]]]:
    """Heuristic id → its distinct texts in revision order, each with the tick of the revision that first wrote it."""
    db = sqlite3.connect(f"file:{data / 'grimoire' / 'heuristics.sqlite'}?mode=ro", uri=True)
    chains: dict[str, list[tuple[int, str]]] = {}
    for tick, text in db.execute("SELECT tick, text FROM playbook_revisions WHERE tick IS NOT NULL ORDER BY revision"):
        for line in text.splitlines():
            m = _LINE.match(line.strip())
            if not m:
                continue
            body, hid = m.group(1).strip(), m.group(2)
            versions = chains.setdefault(hid, [])
            if not versions or versions[-1][1] != body:
                versions.append((int(tick), body))
    db.close()
    return chains


def build_life(name: str, data: Path, split: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(import lines, questions) for one recorded life."""
    rng = random.Random(f"lives:{name}")
    lines = export_life(data)
    header = lines[0] | {"golem_id": f"bt-{name}"}
    episodes = sorted((x for x in lines if x["kind"] == "episode"), key=lambda e: e["tick"])
    entries = [x for x in lines if x["kind"] == "entry"]
    edges = [x for x in lines if x["kind"] == "causal_edge"]
    now = max(e["tick"] for e in episodes)
    header["tick"] = now
    regime_at = {e["tick"]: e["regime"] for e in episodes}

    # The playbook as it was revised: one entry per distinct text of a heuristic, superseded by the next.
    kept = [e for e in entries if "playbook" not in e["tags"]]
    chains: dict[str, list[dict[str, Any]]] = {}
    template = next((e for e in entries if "playbook" in e["tags"]), None)
    for hid, versions in playbook_chains(data).items():
        for n, (tick, body) in enumerate(versions):
            m = _HOLD.search(body)
            scope = _REGIME_OF_TEXT[m.group(1)] if m else None
            until = versions[n + 1][0] if n + 1 < len(versions) else None
            e = {"kind": "entry", "id": f"pb-{hid[2:10]}-v{n + 1}", "category": "heuristic", "content": body,
                 "confidence": 0.9, "quality_score": 0.7, "validated_count": 0, "contradicted_count": 0,
                 "decay_class": "tactical", "market_regime": None if scope == "unknown" else scope,
                 "valid_from": tick, "valid_until": until, "parent_episode_ids": [], "tags": ["playbook", "global"],
                 "provenance": "self_learned", "source": (template or {}).get("source", {"golem_id": "bt-golem"}),
                 "created_tick": tick, "last_accessed_at": tick}
            kept.append(e)
            chains.setdefault(hid, []).append(e)
    entries = kept
    texts = [e["content"].lower() for e in entries] + [e["summary"].lower() for e in episodes]

    qs: list[dict[str, Any]] = []

    def add(category: str, text: str, gold: list[list[str]], *, stale: list[str] = (), regime: str | None = None,
            action: bool = False, tick: int | None = None) -> None:
        t = now if tick is None else tick
        qs.append({"id": f"{name}-{category}-{sum(q['category'] == category for q in qs) + 1}", "life": name,
                   "category": category, "text": text, "regime": regime or regime_at.get(t, "unknown"), "tick": t,
                   "gold": gold, "stale": list(stale), "action": action, "split": split})

    def rw(regime: str) -> str:
        return rng.choice(REGIME_WORDS[regime])

    # knowledge update and as of: the playbook's heuristics that were revised
    for hid, chain in sorted(chains.items()):
        m = _HOLD.search(chain[0]["content"])
        if len(chain) < 2 or not m or m.group(1) == "unknown":
            continue
        regime, gate, tier = _REGIME_OF_TEXT[m.group(1)], m.group(2), m.group(3)
        acting = "acting" in chain[-1]["content"]
        subject = (f"acting when the gate {'escalates to' if gate.startswith('esc') else 'settles at'} {tier}"
                   if acting else f"{'quiet ' if tier == 'T0' else ''}{tier} ticks")
        asks = [f"What does my playbook say now about {subject} in a {rw(regime)} market?",
                f"Current rule for {subject} when the market is {rw(regime)}?",
                f"How many ticks of evidence does the latest playbook cite for {subject} in {rw(regime)} conditions?"]
        add("knowledge_update", rng.choice(asks), [[chain[-1]["id"]]], stale=[e["id"] for e in chain[:-1]])
        n = rng.randrange(len(chain) - 1)
        lo, hi = chain[n]["valid_from"], chain[n + 1]["valid_from"]
        at = rng.randrange(lo, hi)
        asks = [f"As of tick {at}, what did my playbook say about {subject} in a {rw(regime)} market?",
                f"Back at tick {at}, what rule did I follow for {subject} when the market was {rw(regime)}?"]
        add("as_of", rng.choice(asks), [[chain[n]["id"]]], stale=[e["id"] for e in chain[n + 1:]])

    # as of: the last time the health factor fell below a line in a regime
    for regime in REGIME_WORDS:
        hit = [(e["tick"], float(m.group(1))) for e in episodes if e["regime"] == regime
               for m in [_HF.search(e["summary"])] if m]
        for line in (1.5, 1.6, 1.7, 1.8, 2.0):
            below = [t for t, hf in hit if hf < line]
            if below:
                break
        else:
            continue
        last = below[-1]
        if len(below) < 2 or last < now // 4 or last > now - 5:
            continue
        asks = [f"What happened the last time my health factor fell below {line} while the market was {rw(regime)}?",
                f"The most recent time health factor dipped under {line} in a {rw(regime)} market: what did I see and do?"]
        add("as_of", rng.choice(asks), [[f"bt-golem:tick:{last}"]], stale=[f"bt-golem:tick:{t}" for t in below[:-1]])

    # single hop: a reflexion on an action, asked in other words (its cited episodes answer it too)
    reflexions = [(e, m) for e in entries for m in [_REFLEX.search(e["content"])] if m and m.group(1) != "unknown"]
    for e, m in rng.sample(reflexions, min(3, len(reflexions))):
        regime, tools, hf, sign = _REGIME_OF_TEXT[m.group(1)], m.group(2), float(m.group(3)), m.group(4)
        what = "trade" if tools == "swap" else tools.replace(", ", " and ")
        asks = [f"Did my {what} at a health factor around {hf:.2f} in a {rw(regime)} market pay off?",
                f"How did the {what} I made near health factor {hf:.2f} during the {rw(regime)} stretch turn out?",
                f"Was it worth acting ({what}) at HF {hf:.2f} when prices were {rw(regime)}?"]
        # every reflexion on the same regime and health factor answers it (and the episodes they cite)
        same = [x for x, r in reflexions if r.group(1) == m.group(1) and f"{float(r.group(3)):.2f}" == f"{hf:.2f}"]
        add("single_hop", rng.choice(asks), [[i for x in same for i in (x["id"], *x["parent_episode_ids"])]],
            regime=regime)

    # single hop: what a dream rehearsal found; safety: an action the rehearsal warns against
    def scenario_of(e: dict[str, Any]) -> str | None:
        m = re.search(r"dream rehearsal of ([a-z_]+)", e["content"]) or re.search(r"dream rehearsal \(([a-z ]+)\)",
                                                                                 e["content"])
        return m.group(1).replace(" ", "_") if m else None

    warnings: dict[str, list[str]] = {}
    guards: dict[str, list[str]] = {}
    for e in entries:
        s = scenario_of(e)
        if s in SCENARIO_WORDS and e["category"] in ("warning", "heuristic"):
            (warnings if e["category"] == "warning" else guards).setdefault(s, []).append(e["id"])
    for s, ids in sorted(warnings.items()):
        asks = [f"What did rehearsing {rng.choice(SCENARIO_WORDS[s])} on a fork show me?",
                f"When I dreamed of {rng.choice(SCENARIO_WORDS[s])}, what went wrong?"]
        add("single_hop", rng.choice(asks), [ids])
        add("safety", rng.choice(SCENARIO_ACTIONS[s]), [ids], action=True)
        if s in guards:
            add("multi_hop", f"Which guard did the rehearsal of {rng.choice(SCENARIO_WORDS[s])} propose, and what "
                f"did that rehearsal find?", [guards[s], ids])

    # multi hop: the rule against acting in a regime and the reflexions that taught it
    for hid, chain in sorted(chains.items()):
        m = _HOLD.search(chain[-1]["content"])
        if not m or "acting has lost money" not in chain[-1]["content"]:
            continue
        regime = _REGIME_OF_TEXT[m.group(1)]
        evidence = [e["id"] for e, r in reflexions if _REGIME_OF_TEXT[r.group(1)] == regime and r.group(4) == "negative"]
        if regime == "unknown" or not evidence:
            continue
        asks = [f"Why do I now hold back from trading when the market is {rw(regime)}, and what experience taught me "
                f"that?", f"What rule keeps me out of trades in a {rw(regime)} market, and which trades showed it?"]
        add("multi_hop", rng.choice(asks), [[e["id"] for e in chain], evidence])

    # regime: one rule with variants per regime, asked without naming the regime (the tick's regime decides)
    by_shape: dict[tuple[str, str, bool], dict[str, dict[str, Any]]] = {}
    for hid, chain in chains.items():
        m = _HOLD.search(chain[-1]["content"])
        if not m or m.group(1) == "unknown":
            continue
        shape = (m.group(2), m.group(3), "acting" in chain[-1]["content"])
        by_shape.setdefault(shape, {})[_REGIME_OF_TEXT[m.group(1)]] = chain[-1]
    for (gate, tier, acting), variants in sorted(by_shape.items()):
        if len(variants) < 2:
            continue
        asks = ([f"Has acting paid off when the gate escalates to {tier} in this market?",
                 f"Should I act or wait when a {tier} escalation comes in current conditions?"] if acting else
                [f"What have I usually done on a {tier} tick in this kind of market?",
                 f"Is holding the norm on {tier} ticks in the market we are in now?"])
        for regime in sorted(variants)[:2]:
            others = [v["id"] for r, v in variants.items() if r != regime]
            add("regime", rng.choice(asks), [[variants[regime]["id"]]], stale=[], regime=regime)
            qs[-1]["other_regime"] = others

    # abstention: something that never happened in this life (no episode or entry mentions it)
    never = [(pat, asks) for pat, asks in NEVER_HAPPENED if not any(re.search(pat, t) for t in texts)]
    for pat, asks in rng.sample(never, min(3, len(never))):
        add("abstention", rng.choice(asks), [])
    out_lines = [header, *episodes, *entries, *edges]
    return out_lines, qs


def write_split(root: Path, split: str, out: Path) -> list[dict[str, Any]]:
    out.mkdir(parents=True, exist_ok=True)
    for p in out.iterdir():
        p.unlink()
    questions: list[dict[str, Any]] = []
    for life in sorted((root / SPLITS[split]).iterdir()):
        data = life / "golem" / "data"
        if not (data / "grimoire" / "heuristics.sqlite").exists():
            continue
        lines, qs = build_life(life.name, data, split)
        blob = "".join(json.dumps(x, sort_keys=True) + "\n" for x in lines).encode()
        (out / f"{life.name}.jsonl.gz").write_bytes(gzip.compress(blob, mtime=0))
        questions += qs
    (out / "questions.jsonl").write_text("".join(json.dumps(q, sort_keys=True) + "\n" for q in questions))
    return questions


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--from", dest="root", required=True, help="a backtest output root holding shipped/ and heldout/")
    ap.add_argument("--only", choices=list(SPLITS), help="write one split only")
    ap.add_argument("--reseal", action="store_true", help="overwrite the sealed part (a new sealed set)")
    a = ap.parse_args()
    for split in [a.only] if a.only else list(SPLITS):
        if split == "sealed" and SEALED_SHA256 and not a.reseal:
            print("sealed: kept (written once; --reseal writes a new sealed set, whose new hash then replaces "
                  "SEALED_SHA256 with a note saying why)")
            continue
        qs = write_split(Path(a.root), split, HERE / split)
        print(f"{split}: {len(qs)} questions from {len({q['life'] for q in qs})} lives")
        if split == "sealed":
            print(f"sealed sha256 {sealed_digest(HERE / split)} (write it into SEALED_SHA256)")


if __name__ == "__main__":
    main()
