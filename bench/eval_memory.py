"""`make eval-memory`: does the Grimoire answer the question asked?

    python bench/eval_memory.py [--json OUT] [--questions] [--embedder NAME] [--only written|lives] [--no-sealed]

Two sets asked through `golem grimoire search --json`'s code beside BM25 and dense baselines: the hand-written set
(memory_eval/dataset.py; tune and held-out parts) and the lives set (memory_eval/lives.py; tune and sealed parts, the
sealed files checked against their sha256); then the search latency over a 10k-entry Grimoire. A figure, never a
pass/fail: docs/development/tests.md#what-each-benchmark-measures."""

from __future__ import annotations

import argparse
import gzip
import json
import math
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from memory_eval.dataset import CATEGORIES, build, write_jsonl  # noqa: E402
from memory_eval import lives as lives_set  # noqa: E402

from golem.grimoire.access import search as grimoire_search  # noqa: E402
from golem.grimoire.store.embeddings import default_embedder, embedder_by_name  # noqa: E402
from golem.grimoire.episodes.store import EpisodeStore  # noqa: E402
from golem.grimoire.semantic.store import SemanticStore  # noqa: E402
from golem.grimoire.transfer import import_file  # noqa: E402

K = 10
_TOKEN = re.compile(r"[a-z0-9]+")


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


class BM25:
    """Okapi BM25 over the entries' content (the issue's baseline): no time, regime or type awareness."""

    def __init__(self, docs: list[tuple[str, str]], k1: float = 1.2, b: float = 0.75) -> None:
        self.ids = [i for i, _ in docs]
        self.tf = [Counter(tokens(t)) for _, t in docs]
        self.len = [sum(c.values()) for c in self.tf]
        self.avg = sum(self.len) / max(1, len(self.len))
        df = Counter(w for c in self.tf for w in c)
        n = len(docs)
        self.idf = {w: math.log(1 + (n - d + 0.5) / (d + 0.5)) for w, d in df.items()}
        self.k1, self.b = k1, b

    def search(self, q: str, k: int = K) -> list[str]:
        qs = set(tokens(q))
        scores = []
        for i, tf in enumerate(self.tf):
            s = 0.0
            for w in qs:
                f = tf.get(w)
                if f:
                    s += self.idf[w] * f * (self.k1 + 1) / (f + self.k1 * (1 - self.b + self.b * self.len[i] / self.avg))
            if s > 0:
                scores.append((s, self.ids[i]))
        scores.sort(key=lambda t: (-t[0], t[1]))
        return [i for _, i in scores[:k]]


class Dense:
    """Cosine between the question and every entry's content, with the same embedder the Grimoire uses."""

    def __init__(self, docs: list[tuple[str, str]], embedder) -> None:
        self.ids = [i for i, _ in docs]
        self.m = embedder.embed([t for _, t in docs])
        self.embedder = embedder

    def search(self, q: str, k: int = K) -> list[str]:
        v = self.embedder.embed_query([q])[0]
        s = self.m @ v
        order = np.argsort(-s, kind="stable")[:k]
        return [self.ids[i] for i in order]


def score_question(q: dict, ranked: list[str], abstained: bool) -> dict:
    out: dict = {}
    top10 = ranked[:K]
    gold = q["gold"]
    if q["category"] == "abstention":
        out["abstain"] = float(abstained)
        return out
    out["false_abst"] = float(abstained)
    found = [any(i in g for i in top10[:5]) for g in gold]
    out["recall5"] = sum(found) / len(gold)
    gold_ids = {i for g in gold for i in g}
    first = next((r for r, i in enumerate(top10, 1) if i in gold_ids), None)
    out["mrr10"] = 1.0 / first if first else 0.0
    stale = set(q["stale"])
    if q["category"] == "knowledge_update":
        out["stale"] = float(any(i in stale for i in top10))
    if q["category"] == "as_of":
        wrong = next((r for r, i in enumerate(top10, 1) if i in stale), None)
        out["wrong_time"] = float(wrong is not None and (first is None or wrong < first))
    if q["category"] == "regime":
        out["regime1"] = float(bool(top10) and top10[0] in gold_ids)
    if q["action"]:
        out["warn3"] = float(any(i in gold_ids for i in top10[:3]))
    return out


def mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def summarise(rows: list[dict]) -> dict:
    keys = ["recall5", "mrr10", "stale", "wrong_time", "regime1", "warn3", "abstain", "false_abst"]
    return {k: mean([r.get(k) for r in rows]) for k in keys} | {"n": len(rows)}


def fmt(x):
    return "  –  " if x is None else f"{x:.2f}"


def load(embedder_name: str | None = None) -> dict:
    """The labelled set, imported into fresh stores through `golem grimoire import --as-is`'s code."""
    data = build()
    emb = default_embedder() if embedder_name is None else embedder_by_name(embedder_name)
    d = Path(tempfile.mkdtemp(prefix="eval-memory-"))
    path = write_jsonl(data, d / "set.jsonl")
    t0 = time.perf_counter()
    eps = EpisodeStore(d / "grimoire" / "episodes.lance", emb)
    sem = SemanticStore(d / "grimoire" / "semantic.sqlite", d / "grimoire" / "semantic.lance", emb)
    counts = import_file(path, eps, sem, as_is=True)
    return {"data": data, "emb": emb, "eps": eps, "sem": sem, "counts": counts,
            "import_seconds": time.perf_counter() - t0}


def ask_grimoire(env: dict, questions: list[dict], show: bool = False,
                 sources: tuple[str, ...] = ("entry",)) -> tuple[list[tuple[dict, dict]], list[float]]:
    rows, lat = [], []
    for q in questions:
        t0 = time.perf_counter()
        res = grimoire_search(env["eps"], env["sem"], q["text"], regime=q["regime"], tick=q["tick"], k=K)
        lat.append(time.perf_counter() - t0)
        ranked = [i.id for i in res.items if i.source in sources]
        rows.append((q, score_question(q, ranked, res.abstained or not res.items)))
        if show:
            print(f"{q['id']:22s} {q['split']:8s} abst={res.abstained!s:5s} {ranked[:5]}  gold={q['gold']}")
    return rows, lat


def run(embedder_name: str | None = None, show_questions: bool = False) -> dict:
    """The hand-written set: its tune and held-out parts."""
    env = load(embedder_name)
    data = env["data"]
    docs = [(e["id"], e["content"]) for e in data["entries"]]
    baselines = {"BM25": BM25(docs), "dense": Dense(docs, env["emb"])}
    per: dict[str, list[tuple[dict, dict]]] = {}
    per["grimoire"], lat = ask_grimoire(env, data["questions"], show_questions)
    for name, b in baselines.items():
        per[name] = []
        for q in data["questions"]:
            r = b.search(q["text"])
            per[name].append((q, score_question(q, r, not r)))
    report = {"embedder": getattr(env["emb"], "model_name", "?"), "imported": env["counts"],
              "import_seconds": round(env["import_seconds"], 1),
              "latency_p50_ms": round(sorted(lat)[len(lat) // 2] * 1000, 1), "splits": {}}
    for split in ("tune", "held_out", "all"):
        report["splits"][split] = {}
        for name, rows in per.items():
            report["splits"][split][name] = aggregate(rows, split)
    return report


def lives_questions(split: str) -> tuple[Path, list[dict]]:
    """A part of the lives set; the sealed part only when its files hash to the recorded sha256."""
    d = lives_set.HERE / split
    if split == "sealed":
        got = lives_set.sealed_digest(d)
        if got != lives_set.SEALED_SHA256:
            raise SystemExit(f"the sealed lives set in {d} was changed (sha256 {got}, recorded "
                             f"{lives_set.SEALED_SHA256}): restore it with `git checkout {d}`; a new sealed set "
                             "is generated once and its hash recorded, never edited")
    qs = [json.loads(line) for line in (d / "questions.jsonl").read_text().splitlines() if line.strip()]
    return d, qs


def load_life(path: Path, emb) -> dict:
    """One recorded life's Grimoire, imported into fresh stores as `golem grimoire import --as-is` would."""
    d = Path(tempfile.mkdtemp(prefix="eval-lives-"))
    plain = d / "life.jsonl"
    plain.write_bytes(gzip.decompress(path.read_bytes()))
    lines = [json.loads(x) for x in plain.read_text().splitlines() if x.strip()]
    docs = [(x["id"], x["content"]) for x in lines if x["kind"] == "entry"] + \
           [(x["id"], x["summary"]) for x in lines if x["kind"] == "episode"]
    eps = EpisodeStore(d / "grimoire" / "episodes.lance", emb)
    sem = SemanticStore(d / "grimoire" / "semantic.sqlite", d / "grimoire" / "semantic.lance", emb)
    counts = import_file(plain, eps, sem, as_is=True)
    return {"eps": eps, "sem": sem, "docs": docs, "counts": counts}


def run_lives(splits: tuple[str, ...], embedder_name: str | None = None, show_questions: bool = False) -> dict:
    """The lives set: every life imported on its own, its questions asked of it (entries and episodes both answer)."""
    emb = default_embedder() if embedder_name is None else embedder_by_name(embedder_name)
    per: dict[str, list[tuple[dict, dict]]] = {"grimoire": [], "BM25": [], "dense": []}
    n_entries = n_episodes = 0
    t0 = time.perf_counter()
    for split in splits:
        d, qs = lives_questions(split)
        for life in sorted({q["life"] for q in qs}):
            env = load_life(d / f"{life}.jsonl.gz", emb)
            n_entries += env["counts"]["entries"]
            n_episodes += env["counts"]["episodes"]
            mine = [q for q in qs if q["life"] == life]
            rows, _ = ask_grimoire(env, mine, show_questions and split != "sealed", sources=("entry", "episode"))
            per["grimoire"] += rows
            for name, b in (("BM25", BM25(env["docs"])), ("dense", Dense(env["docs"], emb))):
                for q in mine:
                    r = b.search(q["text"])
                    per[name].append((q, score_question(q, r, not r)))
    report = {"embedder": getattr(emb, "model_name", "?"), "entries": n_entries, "episodes": n_episodes,
              "seconds": round(time.perf_counter() - t0, 1), "splits": {}}
    for split in splits:
        report["splits"][split] = {name: aggregate(rows, split) for name, rows in per.items()}
    return report


def latency_at(n_entries: int, embedder_name: str | None = None) -> dict:
    """Search latency over a Grimoire of `n_entries` entries (the hand-written set padded with its filler) and the
    set's 1,200 episodes: p50 / p90 over its questions asked twice, after one warm-up query builds the indexes."""
    base = len(build(n_filler=0)["entries"])
    data = build(n_filler=max(0, n_entries - base))
    emb = default_embedder() if embedder_name is None else embedder_by_name(embedder_name)
    d = Path(tempfile.mkdtemp(prefix="eval-latency-"))
    path = write_jsonl(data, d / "set.jsonl")
    eps = EpisodeStore(d / "grimoire" / "episodes.lance", emb)
    sem = SemanticStore(d / "grimoire" / "semantic.sqlite", d / "grimoire" / "semantic.lance", emb)
    counts = import_file(path, eps, sem, as_is=True)
    env = {"eps": eps, "sem": sem}
    ask_grimoire(env, data["questions"][:1])
    cpu = []
    for q in data["questions"] * 2:  # CPU time too: on a shared machine the wall clock measures the neighbours
        c0 = time.process_time()
        ask_grimoire(env, [q])
        cpu.append(time.process_time() - c0)
    _, lat = ask_grimoire(env, data["questions"] * 2)
    lat.sort()
    cpu.sort()
    return {"entries": counts["entries"], "episodes": counts["episodes"],
            "p50_ms": round(lat[len(lat) // 2] * 1000, 1), "p90_ms": round(lat[int(len(lat) * 0.9)] * 1000, 1),
            "cpu_p50_ms": round(cpu[len(cpu) // 2] * 1000, 1)}


def aggregate(rows: list[tuple[dict, dict]], split: str) -> dict:
    chosen = [m for q, m in rows if split == "all" or q["split"] == split]
    cats = {c: summarise([m for q, m in rows if q["category"] == c and (split == "all" or q["split"] == split)])
            for c in CATEGORIES}
    return {"overall": summarise(chosen), "categories": cats}


ROWS = [("recall@5 / MRR@10, all questions", lambda o: f"{fmt(o['overall']['recall5'])} / {fmt(o['overall']['mrr10'])}", "≥ 0.80 / ≥ 0.75"),
        ("knowledge update: a superseded entry returned", lambda o: fmt(o["categories"]["knowledge_update"]["stale"]), "≤ 0.05"),
        ("as of a past tick: wrong-time entry above the right one", lambda o: fmt(o["categories"]["as_of"]["wrong_time"]), "≤ 0.10"),
        ("regime-congruent entry ranked first", lambda o: fmt(o["categories"]["regime"]["regime1"]), "≥ 0.80"),
        ("a warning in the top 3 for an action question", lambda o: fmt(o["overall"]["warn3"]), "1.00"),
        ("abstains when nothing relevant exists / false abstention",
         lambda o: f"{fmt(o['categories']['abstention']['abstain'])} / {fmt(o['overall']['false_abst'])}",
         "≥ 0.80 / ≤ 0.05")]
SPECIAL = {"knowledge_update": ("stale", "superseded returned"), "as_of": ("wrong_time", "wrong-time above right"),
           "regime": ("regime1", "regime-congruent first"), "safety": ("warn3", "warning in top 3"),
           "abstention": ("abstain", "abstained")}


def print_split(title: str, s: dict) -> None:
    print(f"\n### {title} ({s['grimoire']['overall']['n']} questions)\n")
    print("| | Grimoire | BM25 | dense | goal |\n|---|---|---|---|---|")
    for label, f, goal in ROWS:
        print(f"| {label} | {f(s['grimoire'])} | {f(s['BM25'])} | {f(s['dense'])} | {goal} |")


def print_categories(title: str, s: dict) -> None:
    print(f"\n### per category, {title} (Grimoire | BM25 | dense)\n")
    print("| category | n | recall@5 | MRR@10 | category metric |\n|---|---|---|---|---|")
    for c in CATEGORIES:
        cs = [s[n]["categories"][c] for n in ("grimoire", "BM25", "dense")]
        if not cs[0]["n"]:
            continue
        trio = lambda k: " \\| ".join(fmt(x[k]) for x in cs)  # noqa: E731
        extra = f"{SPECIAL[c][1]}: {trio(SPECIAL[c][0])}" if c in SPECIAL else ""
        if c == "abstention":
            print(f"| {c} | {cs[0]['n']} | – | – | {extra} |")
        else:
            print(f"| {c} | {cs[0]['n']} | {trio('recall5')} | {trio('mrr10')} | {extra} |")


def print_report(rep: dict) -> None:
    if "written" in rep:
        w = rep["written"]
        print(f"## hand-written set: {w['imported']['entries']} entries, {w['imported']['episodes']} episodes, "
              f"embedder {w['embedder']}; import {w['import_seconds']} s; search p50 {w['latency_p50_ms']} ms")
        print_split("tune part", w["splits"]["tune"])
        print_split("held-out part", w["splits"]["held_out"])
        print_categories("all questions of the hand-written set", w["splits"]["all"])
    if "lives" in rep:
        v = rep["lives"]
        print(f"\n## lives set (recorded backtests, one Grimoire per path): {v['entries']} entries, {v['episodes']} "
              f"episodes in all, embedder {v['embedder']}; {v['seconds']} s")
        for split, s in v["splits"].items():
            print_split(f"{split} part (by path)", s)
            print_categories(f"{split} part", s)
    if "latency" in rep:
        lt = rep["latency"]
        print(f"\n## latency: Grimoire search over {lt['entries']} entries and {lt['episodes']} episodes: p50 "
              f"{lt['p50_ms']} ms, p90 {lt['p90_ms']} ms (goal p50 ≤ 30 ms); CPU time per query p50 {lt['cpu_p50_ms']} ms")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", help="also write the report as JSON here")
    ap.add_argument("--questions", action="store_true", help="print each question's top 5 (never the sealed part's)")
    ap.add_argument("--embedder", default=None, help="wordllama (default) | wordllama-64 | ...")
    ap.add_argument("--only", choices=["written", "lives"], help="one set only (and no latency run)")
    ap.add_argument("--no-sealed", action="store_true", help="the lives set's tune part only (while tuning)")
    ap.add_argument("--latency-entries", type=int, default=10_000)
    a = ap.parse_args()
    rep: dict = {}
    if a.only in (None, "written"):
        rep["written"] = run(a.embedder, a.questions)
    if a.only in (None, "lives"):
        rep["lives"] = run_lives(("tune",) if a.no_sealed else ("tune", "sealed"), a.embedder, a.questions)
    if a.only is None:
        rep["latency"] = latency_at(a.latency_entries, a.embedder)
    print_report(rep)
    if a.json:
        Path(a.json).write_text(json.dumps(rep, indent=2))


if __name__ == "__main__":
    main()
