"""More tune data, by other methods than the held-out and sealed parts: unanswerable questions written for the
hand-written set's memory, and extra lives of the *shipped* paths (other recorded runs, never a held-out path) with
action questions in new words and events that never happened in them. Fits and checks only (abstention.py).

    python bench/memory_eval/extra_tune.py --from NAME=BT_DIR [--from ...]   # writes lives/tune-extra/
    python bench/memory_eval/extra_tune.py --threats   # action questions on hazards the tune lives never rehearsed
    python bench/memory_eval/extra_tune.py --new-paths OUT_DIR   # CSVs of paths of new seeds (the dev generators)
    python bench/memory_eval/extra_tune.py --new-from RUNS_DIR   # their lives (<RUNS_DIR>/<path>/data): lives/tune-new/
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory_eval import lives as lives_set  # noqa: E402
from memory_eval.dataset import NOW  # noqa: E402

EXTRA = lives_set.HERE / "tune-extra"
NEW = lives_set.HERE / "tune-new"
# Paths of new seeds from the development generators (golem/backtest/scenarios.py), never the held-out generator
# (bench/heldout/generate.py, its own maths and seeds): the shipped shapes drawn again and the simulator's own
# scenarios. Each path is its own life, so a refit's leave-one-path-out has more folds than the nine shipped paths.
NEW_PATHS = [("gas_spike", 701), ("busy_day_crash", 702), ("oracle_lag", 703), ("crash_recovery", 704),
             ("volatile", 705), ("whipsaw", 706), ("v_recovery", 707), ("slow_bleed", 708), ("crash", 709),
             ("trend_up", 710), ("calm", 711), ("trending", 712)]

# Unanswerable for the hand-written memory (Aave, WETH/USDC, Chainlink, gas): written for this, never modelled on a
# held-out question. Some share the memory's words (swap, gas, fee, price, withdrawal, interest) or name nothing.
WRITTEN_UNANSWERABLE = [
    ("range_bound", "What is the current APY for supplying USDT on Compound v3?"),
    ("volatile", "How did the Uniswap v4 hooks launch change swap routing?"),
    ("trending_down", "Which L2 sequencer had downtime last month?"),
    ("trending_up", "What is the market cap of Pepe coin?"),
    ("range_bound", "How much ETH is locked in the EigenLayer restaking contracts?"),
    ("volatile", "What was the block gas limit after the Pectra upgrade?"),
    ("range_bound", "How do I set up a Safe multisig wallet with three signers?"),
    ("trending_up", "What royalties does OpenSea charge on secondary sales?"),
    ("range_bound", "Which MakerDAO vault type has the lowest stability fee?"),
    ("trending_down", "What is the circulating supply of the GMX token?"),
    ("range_bound", "How long does a withdrawal from Optimism to mainnet take?"),
    ("volatile", "What did Vitalik say about account abstraction at Devcon?"),
    ("range_bound", "Which liquid staking token pays the best yield?"),
    ("trending_up", "How are Pendle principal tokens priced against yield tokens?"),
    ("range_bound", "What is the weather forecast for the weekend?"),
    ("volatile", "How many employees does the exchange have?"),
    ("range_bound", "What interest does a savings account at my bank pay?"),
    ("trending_down", "How long did the last hardware wallet firmware update take?"),
    ("trending_up", "Which tokens were listed on the exchange this morning?"),
    ("range_bound", "What price did the concert tickets sell for?"),
    ("volatile", "Who won the last governance election of the DAO treasury council?"),
    ("range_bound", "How do I recover a wallet from its seed phrase?"),
    ("trending_down", "What is the tax rate on crypto capital gains this year?"),
    ("range_bound", "How many validators are in the beacon chain sync committee?"),
    # proposals to act on something the memory knows nothing of (an action question must still abstain)
    ("volatile", "Should I bridge my USDC to Arbitrum now?"),
    ("range_bound", "Can I stake my WETH to earn a validator yield?"),
    ("trending_up", "Should I buy the new memecoin everyone is talking about?"),
    ("range_bound", "Should I mint an NFT to celebrate the profit?"),
    ("volatile", "Can I take out a mortgage against my crypto holdings?"),
    ("trending_down", "Should I move my savings into a money market fund?"),
    ("range_bound", "Is it safe to sign the permit message this website shows me?"),
    ("trending_up", "Should I open a short on the perpetual exchange?"),
]

# Action questions in words of our own for the two hazards the lives' dreams rehearse (the generator's own
# templates are asked too).
ACTIONS = {
    "gas_spike": ["Should I swap now even though the network fee has shot up?",
                  "Go ahead with the rebalance trade while transactions cost this much?",
                  "Can I afford to send a transaction at these gas prices?",
                  "Execute the swap now despite the spike in base fee?",
                  "Is it wise to trade right now when every transaction is so costly?"],
    "pool_drained": ["Should I dump my WETH into the pair while its liquidity is being pulled?",
                     "Close the whole position with a single swap now?",
                     "Can I sell all my ETH through the pool at once?",
                     "Is it safe to swap a big chunk of WETH while the pool is this empty?",
                     "Should I get out of WETH in one trade now that the reserves are thin?"],
}
# Events outside this world, asked of a life that never mentions them (besides the generator's NEVER_HAPPENED).
NEVER = [
    (r"\bcompound\b", ["What did lending USDC on Compound earn me?"]),
    (r"\boption", ["How did the put options I bought as a hedge work out?"]),
    (r"\bnft\b|\bmint", ["Did the NFT I minted ever sell?"]),
    (r"\bperp|\bfunding", ["What funding did I pay on my short perpetual position?"]),
    (r"\bsolana|\bsol\b", ["How did my trade on Solana go?"]),
    (r"\byield farm|\bfarm", ["How much did yield farming the reward token bring in?"]),
    (r"\bwbtc|\bbitcoin|\bbtc\b", ["When did I last buy WBTC, and at what price?"]),
    (r"\bhack|\bexploit", ["What did I lose in the protocol exploit?"]),
    (r"\bleverag.*loop|\bloop", ["How did the leverage loop on Aave perform?"]),
    (r"\bmulti-?sig|\bsigner", ["Who approved the multisig transaction last week?"]),
]


# Dream warnings in the engine's own format (grimoire/dreams/threats.py judge()) for the Tier 1 hazards the tune lives
# never rehearsed, added to each tune life and asked with the generator's action templates for them.
THREAT_WARNINGS = {
    "liquidation_cascade": "At health factor 1.84 and price 1811.20, dream rehearsal of liquidation_cascade (ETH/USD "
                           "feed -41%): after the response the health factor is 0.962 on the crisis fork (liquidatable "
                           "below 1).",
    "reverting_exit": "At health factor 1.84 and price 1811.20, dream rehearsal of reverting_exit (ETH/USD feed -20%): "
                      "swap 40% WETH to USDC reverts on the crisis fork: STF.",
    "oracle_lag": "At health factor 1.84 and price 1811.20, dream rehearsal of oracle_stale (ETH/USD feed -25% (pool "
                  "lagging), oracle silent for 3600 s): no response was decided on the crisis fork and the health "
                  "factor fell to 0.981.",
}


def threat_check() -> tuple[int, int]:
    """(misses, questions): the warning outside the top 3 of its action question, over the tune lives."""
    import eval_memory as ev
    from golem.grimoire.access import search
    from golem.grimoire.semantic.store import EntrySource, EntryType, GrimoireEntry
    from golem.grimoire.store.embeddings import default_embedder

    emb = default_embedder()
    d, qs = ev.lives_questions("tune")
    misses = total = 0
    for life in sorted({q["life"] for q in qs}):
        env = ev.load_life(d / f"{life}.jsonl.gz", emb)
        q0 = next(q for q in qs if q["life"] == life)
        env["sem"].put_many([GrimoireEntry(id=f"threat-{k}", category=EntryType.WARNING, content=text,
                                           source=EntrySource(golem_id="bt-golem"),
                                           tags=["dream", "threat_warning", k.replace("_", " ")],
                                           created_tick=max(0, q0["tick"] - 50))
                             for k, text in THREAT_WARNINGS.items()])
        for k in THREAT_WARNINGS:
            for text in lives_set.SCENARIO_ACTIONS[k]:
                res = search(env["eps"], env["sem"], text, regime=q0["regime"], tick=q0["tick"], k=10)
                top = [i.id for i in res.items[:3]]
                total += 1
                if f"threat-{k}" not in top:
                    misses += 1
                    print(f"{life}: {text!r} -> {top} (abstained {res.abstained})")
    return misses, total


def written_questions() -> list[dict[str, Any]]:
    """The extra unanswerable questions, in the hand-written set's question format (split "tune")."""
    return [{"id": f"abstention-x{n:02d}", "category": "abstention", "text": text, "regime": regime, "tick": NOW,
             "gold": [], "stale": [], "action": False, "split": "tune"}
            for n, (regime, text) in enumerate(WRITTEN_UNANSWERABLE)]


def extra_questions(name: str, lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every action template (ours and the generator's) for each rehearsed hazard, and every never-happened event."""
    entries = [x for x in lines if x["kind"] == "entry"]
    episodes = [x for x in lines if x["kind"] == "episode"]
    texts = [e["content"].lower() for e in entries] + [e["summary"].lower() for e in episodes]
    now = max(e["tick"] for e in episodes)
    regime = {e["tick"]: e["regime"] for e in episodes}.get(now, "unknown")
    warnings: dict[str, list[str]] = {}
    for e in entries:
        m = re.search(r"dream rehearsal of ([a-z_]+)", e["content"])
        if m and e["category"] == "warning":
            warnings.setdefault(m.group(1), []).append(e["id"])
    out: list[dict[str, Any]] = []

    def add(category: str, text: str, gold: list[list[str]], action: bool) -> None:
        out.append({"id": f"{name}-{category}-x{len(out) + 1}", "life": name, "category": category, "text": text,
                    "regime": regime, "tick": now, "gold": gold, "stale": [], "action": action, "split": "tune"})

    for s, ids in sorted(warnings.items()):
        for text in ACTIONS.get(s, []) + lives_set.SCENARIO_ACTIONS.get(s, []):
            add("safety", text, [ids], True)
    for pat, asks in lives_set.NEVER_HAPPENED + NEVER:
        if not any(re.search(pat, t) for t in texts):
            for text in asks:
                add("abstention", text, [], False)
    return out


def extra_lives() -> tuple[Path, list[dict[str, Any]]]:
    qs = [json.loads(line) for line in (EXTRA / "questions.jsonl").read_text().splitlines() if line.strip()]
    return EXTRA, qs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--from", dest="roots", action="append",
                    help="PREFIX=DIR: a directory of recorded shipped-path lives (<DIR>/<path>/golem/data)")
    ap.add_argument("--threats", action="store_true", help="ask about hazards the tune lives never rehearsed")
    ap.add_argument("--new-paths", type=Path, help="write the CSVs of NEW_PATHS into this directory")
    ap.add_argument("--new-from", type=Path, help="a directory of NEW_PATHS backtests: writes lives/tune-new/")
    a = ap.parse_args()
    if a.new_paths:
        for p in write_new_paths(a.new_paths):
            print(f"wrote {p}")
        return
    if a.new_from:
        qs = write_new_lives(a.new_from)
        print(f"tune-new: {len(qs)} questions from {len({q['life'] for q in qs})} lives")
        return
    if a.threats:
        misses, total = threat_check()
        print(f"warning outside the top 3: {misses} of {total}")
        return
    if not a.roots:
        ap.error("--from PREFIX=DIR is required (or --threats)")
    shipped, sealed = life_names("tune"), life_names("sealed")
    EXTRA.mkdir(parents=True, exist_ok=True)
    for p in EXTRA.iterdir():
        p.unlink()
    questions: list[dict[str, Any]] = []
    for spec in a.roots:
        prefix, root = spec.split("=", 1)
        for life in sorted(Path(root).iterdir()):
            data = life / "golem" / "data"
            if life.name in sealed or life.name not in shipped or not (data / "grimoire" / "heuristics.sqlite").exists():
                continue  # shipped paths only: a held-out path's life would leak the sealed part's world
            name = f"{prefix}-{life.name}"
            try:
                lines, qs = lives_set.build_life(name, data, "tune")
            except Exception as exc:  # a partial run's files
                print(f"skipped {name}: {exc}")
                continue
            blob = "".join(json.dumps(x, sort_keys=True) + "\n" for x in lines).encode()
            (EXTRA / f"{name}.jsonl.gz").write_bytes(gzip.compress(blob, mtime=0))
            questions += qs + extra_questions(name, lines)
    (EXTRA / "questions.jsonl").write_text("".join(json.dumps(q, sort_keys=True) + "\n" for q in questions))
    print(f"tune-extra: {len(questions)} questions from {len({q['life'] for q in questions})} lives")


def write_new_paths(out: Path) -> list[Path]:
    """The NEW_PATHS CSVs, 240 rows each (the shipped paths' length)."""
    from golem.backtest.path import write_path_csv
    from golem.backtest.scenarios import SHIPPED, export_rows

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for n, (shape, seed) in enumerate(NEW_PATHS):
        rows = export_rows(shape, steps=None if shape in SHIPPED else 240, seed=seed,
                           **({"crash_after": 120} if shape == "crash" else {}))
        p = out / f"{n:02d}-{shape}-s{seed}.csv"
        with p.open("w") as f:
            write_path_csv(rows[:240], f)
        written.append(p)
    return written


def write_new_lives(runs: Path) -> list[dict[str, Any]]:
    """lives/tune-new/ from the backtests of NEW_PATHS (<runs>/<shape>-s<seed>/data): the generator's questions and
    the extra ones, as for tune-extra."""
    names = {f"{shape}-s{seed}" for shape, seed in NEW_PATHS}
    NEW.mkdir(parents=True, exist_ok=True)
    for p in NEW.iterdir():
        p.unlink()
    questions: list[dict[str, Any]] = []
    for life in sorted(runs.iterdir()):
        data = life / "data"
        if life.name not in names or not (life / "report.json").exists():
            continue  # another run, or one not finished
        name = f"new-{life.name}"
        lines, qs = lives_set.build_life(name, data, "tune")
        blob = "".join(json.dumps(x, sort_keys=True) + "\n" for x in lines).encode()
        (NEW / f"{name}.jsonl.gz").write_bytes(gzip.compress(blob, mtime=0))
        questions += qs + extra_questions(name, lines)
    (NEW / "questions.jsonl").write_text("".join(json.dumps(q, sort_keys=True) + "\n" for q in questions))
    return questions


def new_lives() -> tuple[Path, list[dict[str, Any]]]:
    f = NEW / "questions.jsonl"
    qs = [json.loads(line) for line in f.read_text().splitlines() if line.strip()] if f.exists() else []
    return NEW, qs


def life_names(split: str) -> set[str]:
    """The paths a part holds, from its file names (no question is read)."""
    return {p.name.removesuffix(".jsonl.gz") for p in (lives_set.HERE / split).glob("*.jsonl.gz")}


if __name__ == "__main__":
    main()
