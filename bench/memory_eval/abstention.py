"""Fit retrieval's abstention decision on the *tune* parts of both memory sets (the hand-written set's tune part and
the lives set's tune part; never a held-out or sealed question): each question's evidence (retrieval.
abstention_evidence) labelled answerable or not, a logistic model per feature subset, scored by cross-validation
grouped by life. Prints the best subsets; the chosen coefficients are written into golem/grimoire/retrieval.py.

    python bench/memory_eval/abstention.py [--embedder NAME] [--dump FILE] [--extend [2]] [--swap OLD=NEW] [--nested]
--extend: the model in code refitted plus each feature (2: each pair; --swap: NEW read for OLD); --nested: that
choice made with each lives path left out and checked on it. docs/design/grimoire.md."""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import eval_memory as ev  # noqa: E402
from memory_eval import extra_tune  # noqa: E402

from golem.grimoire.access import search  # noqa: E402
from golem.grimoire.retrieval import ABSTAIN_FEATURES, abstention_model  # noqa: E402
from golem.grimoire.store.embeddings import default_embedder, embedder_by_name  # noqa: E402


def evidence_rows(embedder_name: str | None = None) -> list[dict]:
    """(group, label, evidence) for every tune question of both sets and of the extra tune data (extra_tune.py: the
    shipped paths' other runs, and lives of new paths, each its own group)."""
    out = []
    env = ev.load(embedder_name)
    tune = [q for q in env["data"]["questions"] if q["split"] == "tune"]
    for n, q in enumerate(tune + extra_tune.written_questions()):
        res = search(env["eps"], env["sem"], q["text"], regime=q["regime"], tick=q["tick"], k=ev.K)
        out.append({"group": f"written-{n % 4}", "set": "written", "source": "written" if n < len(tune) else
                    "written-extra", "unanswerable": q["category"] == "abstention", "evidence": res.evidence,
                    "text": q["text"]})
    emb = default_embedder() if embedder_name is None else embedder_by_name(embedder_name)
    for source, (d, qs) in (("lives", ev.lives_questions("tune")), ("lives-extra", extra_tune.extra_lives()),
                            ("lives-new", extra_tune.new_lives())):
        for life in sorted({q["life"] for q in qs}):
            lenv = ev.load_life(d / f"{life}.jsonl.gz", emb)
            for q in qs:
                if q["life"] == life:
                    res = search(lenv["eps"], lenv["sem"], q["text"], regime=q["regime"], tick=q["tick"], k=ev.K)
                    out.append({"group": life.split("-", 1)[-1], "set": "lives", "source": source,
                                "unanswerable": q["category"] == "abstention", "evidence": res.evidence,
                                "text": q["text"]})
    return out


def fit(x: np.ndarray, y: np.ndarray, w: np.ndarray, l2: float) -> np.ndarray:
    """Weighted L2-regularised logistic regression by Newton's method: [bias, coefficients...]."""
    X = np.hstack([np.ones((len(x), 1)), x])
    beta = np.zeros(X.shape[1])
    reg = np.full(X.shape[1], l2)
    reg[0] = 0.0
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-X @ beta))
        g = X.T @ (w * (p - y)) + reg * beta
        H = (X * (w * p * (1 - p))[:, None]).T @ X + np.diag(reg) + 1e-9 * np.eye(X.shape[1])
        step = np.linalg.solve(H, g)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    return beta


def prob(beta: np.ndarray, x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-(beta[0] + x @ beta[1:])))


def rates(p: np.ndarray, y: np.ndarray, sets: np.ndarray, line: float, prefix: str = "") -> dict[str, float]:
    out = {}
    for s in sorted(set(sets)):
        m = sets == s
        for key, lab in (("abstain", 1), ("false", 0)):
            if (m & (y == lab)).any():
                out[f"{prefix}{s}_{key}"] = float((p[m & (y == lab)] >= line).mean())
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump", help="write the evidence rows here (JSON)")
    ap.add_argument("--load", help="read evidence rows from here instead of asking the sets")
    ap.add_argument("--embedder", default=None, help="fit for this embedder (default: wordllama)")
    ap.add_argument("--extend", nargs="?", type=int, const=1, default=0, choices=(1, 2),
                    help="the model in code plus one feature (2: plus each pair of features), constrained")
    ap.add_argument("--swap", help="OLD=NEW: with --extend, the model's feature OLD read as NEW (e.g. "
                    "agreement=agreement_tied); the bar stays the model in code")
    ap.add_argument("--nested", action="store_true", help="each lives path left out in turn: does --extend's "
                    "choice on the rest hold on it?")
    a = ap.parse_args()
    rows = json.loads(Path(a.load).read_text()) if a.load else evidence_rows(a.embedder)
    if a.dump:
        Path(a.dump).write_text(json.dumps(rows))
    y = np.array([float(r["unanswerable"]) for r in rows])
    sets = np.array([r["set"] for r in rows])
    sources = np.array([r.get("source", r["set"]) for r in rows])
    groups = np.array([r["group"] for r in rows])
    w = weights(sets, y)
    swap = dict([a.swap.split("=", 1)]) if a.swap else None
    if a.nested:
        nested(rows, y, sets, sources, groups, a.embedder, a.extend or 1, swap)
        return None
    if a.extend:
        return extend(rows, y, w, sources, groups, a.embedder, a.extend, swap)
    results = []
    for n in range(1, min(4, len(ABSTAIN_FEATURES)) + 1):
        for subset in itertools.combinations(ABSTAIN_FEATURES, n):
            x = np.array([[r["evidence"][f] for f in subset] for r in rows])
            for l2 in (0.1, 1.0):
                p = np.zeros(len(rows))
                for g in sorted(set(groups)):  # leave one life (a quarter of the written set) out
                    m = groups == g
                    beta = fit(x[~m], y[~m], w[~m], l2)
                    p[m] = prob(beta, x[m])
                for line in (0.5, 0.6, 0.7, 0.8):
                    r = rates(p, y, sets, line) | rates(p, y, sources, line, "part:")
                    # every part counts: abstaining across them, no part's false abstention above 0.05
                    worst_false = max(v for k, v in r.items() if k.startswith("part:") and k.endswith("_false"))
                    score = sum(v for k, v in r.items() if k.startswith("part:") and k.endswith("_abstain")) \
                        - 10 * max(0.0, worst_false - 0.05)
                    results.append((score, subset, l2, line, r))
    results.sort(key=lambda t: -t[0])
    # the model in retrieval.py, on every part: the bar a new fit must clear
    bias, coef, line = abstention_model(None if a.embedder is None else embedder_by_name(a.embedder).model_name)
    p = prob(np.array([bias, *coef.values()]), np.array([[r["evidence"][f] for f in coef] for r in rows]))
    now = rates(p, y, sources, line, "part:")
    print(f"in code (in-sample on the original tune parts): {json.dumps({k: round(v, 2) for k, v in now.items()})}")
    for score, subset, l2, line, r in results[:15]:
        beta = fit(np.array([[r_["evidence"][f] for f in subset] for r_ in rows]), y, w, l2)
        coef = ", ".join(f"{f} {b:+.2f}" for f, b in zip(subset, beta[1:]))
        print(f"{score:.3f} l2={l2} line={line} cv {json.dumps({k: round(v, 2) for k, v in r.items()})}  bias {beta[0]:+.2f}, "
              f"{coef}")


def weights(sets: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Each set weighs the same, and within it answerable and unanswerable questions weigh the same."""
    w = np.ones(len(y))
    for s in ("written", "lives"):
        for lab in (0.0, 1.0):
            m = (sets == s) & (y == lab)
            w[m] = 0.25 * len(y) / max(1, m.sum())
    return w


def candidates(rows: list[dict[str, Any]], y: np.ndarray, w: np.ndarray, sources: np.ndarray, groups: np.ndarray,
               model: tuple[float, dict[str, float], float], size: int = 1,
               swap: dict[str, str] | None = None) -> tuple[dict[str, float], list[tuple[Any, ...]]]:
    """The model's figures on `rows` and every candidate refit on them, best first (see extend)."""
    bias, coef, line = model
    now = rates(prob(np.array([bias, *coef.values()]), np.array([[r["evidence"][f] for f in coef] for r in rows])),
                y, sources, line)
    base = tuple((swap or {}).get(f, f) for f in coef)
    out = []
    others = [f for f in ABSTAIN_FEATURES if f not in base and f not in coef]
    for extra in [()] + [tuple(c) for n in range(1, size + 1) for c in itertools.combinations(others, n)]:
        subset = base + extra
        x = np.array([[r["evidence"][f] for f in subset] for r in rows])
        for l2 in (0.03, 0.1, 0.3, 1.0):
            p = np.zeros(len(rows))
            for g in sorted(set(groups)):
                m = groups == g
                p[m] = prob(fit(x[~m], y[~m], w[~m], l2), x[m])
            beta = fit(x, y, w, l2)
            pin = prob(beta, x)
            for ln in (0.6, 0.65, 0.7, 0.75, 0.8):
                ins, cv = rates(pin, y, sources, ln), rates(p, y, sources, ln)
                keeps = all(r[k] >= now[k] - 1e-9 if k.endswith("_abstain") else r[k] <= now[k] + 1e-9
                            for r in (ins, cv) for k in now)
                score = sum(v for k, v in cv.items() if k.endswith("_abstain")) - 10 * cv["written_false"] \
                    - 10 * max(0.0, cv["lives_false"] - 0.05) \
                    - 10 * max(0.0, cv.get("lives-extra_false", 0.0) - now.get("lives-extra_false", 0.0))
                out.append((keeps, score, subset, l2, ln, cv, ins, beta))
    out.sort(key=lambda t: (not t[0], -t[1]))
    return now, out


def extend(rows: list[dict[str, Any]], y: np.ndarray, w: np.ndarray, sources: np.ndarray, groups: np.ndarray,
           embedder: str | None, size: int = 1, swap: dict[str, str] | None = None) -> None:
    """The model in code plus each other feature (size 2: each pair), and its own features alone, refitted; a
    candidate keeps when every tune part's abstention and false abstention, in-sample and in cross-validation, is at
    least as good as with the model in code. Ranked by cross-validated abstention, false abstention penalised.
    `swap` {old: new}: the candidates read feature new where the model reads old."""
    model = abstention_model(None if embedder is None else embedder_by_name(embedder).model_name)
    now, out = candidates(rows, y, w, sources, groups, model, size, swap)
    print(f"in code: {json.dumps({k: round(v, 3) for k, v in now.items()})}")
    for keeps, score, subset, l2, ln, cv, ins, beta in out[:10]:
        print(f"keeps={keeps} {score:.3f} l2={l2} line={ln} bias {beta[0]:+.2f}, "
              + ", ".join(f"{f} {b:+.2f}" for f, b in zip(subset, beta[1:]))
              + f"\n   cv {json.dumps({k: round(v, 3) for k, v in cv.items()})}"
              + f"\n   in-sample {json.dumps({k: round(v, 3) for k, v in ins.items()})}")


def nested(rows: list[dict[str, Any]], y: np.ndarray, sets: np.ndarray, sources: np.ndarray, groups: np.ndarray,
           embedder: str | None, size: int = 1, swap: dict[str, str] | None = None) -> dict[str, list[int]]:
    """Does the rule that keeps a refit hold on a path it did not see? Each lives path in turn (with one written
    fold) is left out, extend's rule chooses on the rest, and the choice and the model in code are counted on the
    path left out: [abstained, unanswerable, false abstentions, answerable] for lives and written questions."""
    model = abstention_model(None if embedder is None else embedder_by_name(embedder).model_name)
    paths = sorted({g for g, s in zip(groups, sets) if s == "lives"})
    tot = {n: [0, 0, 0, 0, 0, 0, 0, 0] for n in ("code", "chosen")}
    for i, path in enumerate(paths):
        out_m = (groups == path) | (groups == f"written-{i % 4}")
        tr = [r for r, m in zip(rows, out_m) if not m]
        _, out = candidates(tr, y[~out_m], weights(sets[~out_m], y[~out_m]), sources[~out_m], groups[~out_m], model,
                            size, swap)
        kept = [c for c in out if c[0]]
        left_out = [r for r, m in zip(rows, out_m) if m]

        def x(fs: Any) -> np.ndarray:
            return np.array([[r["evidence"][f] for f in fs] for r in left_out])
        probs = {"code": (prob(np.array([model[0], *model[1].values()]), x(model[1])), model[2])}
        if kept:
            probs["chosen"] = (prob(kept[0][7], x(kept[0][2])), kept[0][4])
        line = f"{path}: " + ("nothing keeps" if not kept else f"chose {kept[0][2]} l2={kept[0][3]} line={kept[0][4]}")
        for name in ("code", "chosen"):
            p, ln = probs.get(name, probs["code"])
            yy, lives = y[out_m], sets[out_m] == "lives"
            got = [int(((p >= ln) & part & (yy == lab)).sum()) if k == 0 else int((part & (yy == lab)).sum())
                   for part in (lives, ~lives) for lab in (1, 0) for k in (0, 1)]
            tot[name] = [a + b for a, b in zip(tot[name], got)]
            line += f" | {name}: lives {got[0]}/{got[1]} abstain, {got[2]}/{got[3]} false; written {got[4]}/{got[5]}, "
            line += f"{got[6]}/{got[7]}"
        print(line, flush=True)
    for name, t in tot.items():
        print(f"{name}: paths left out, lives {t[0] / max(1, t[1]):.3f} abstain / {t[2] / max(1, t[3]):.3f} false; "
              f"written {t[4] / max(1, t[5]):.3f} / {t[6]} false of {t[7]}")
    return tot

if __name__ == "__main__":
    main()
