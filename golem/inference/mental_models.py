"""The core mental models: thirteen reasoning scaffolds always in a T2 decision's cached system prompt; the model
names the ones it used in `decide` and the record keeps them (docs/design/inference.md#mental-models)."""

from __future__ import annotations

CORE_MODELS: dict[str, tuple[str, str]] = {  # id → (name, what it asks in this golem's world)
    "mm-first-principles": ("First principles", "Where does this return come from: fees traders pay, or an "
                            "incentive that will end?"),
    "mm-inversion": ("Inversion", "Pre-mortem: how would this position lose the owner's money, and is that path open?"),
    "mm-second-order": ("Second-order thinking", "And then what: who else sells when this price falls, and what "
                        "does their selling do to the pool and the oracle?"),
    "mm-probabilistic": ("Probabilistic thinking", "Weigh the scenarios (recovery, grind, gap down) and size for "
                         "their mix, not for the likeliest one."),
    "mm-margin-of-safety": ("Margin of safety", "Act only with a buffer to every line: health factor, slippage, gas, "
                            "reserves."),
    "mm-circle-of-competence": ("Circle of competence", "Stay with the protocols and tools this strategy knows; an "
                                "unfamiliar instrument is a risk of its own."),
    "mm-occams-razor": ("Occam's razor", "When signals conflict, prefer the simplest explanation that fits the chain."),
    "mm-compounding": ("Compounding", "Small fees and small lessons compound; so do small leaks of gas."),
    "mm-hanlons-razor": ("Hanlon's razor", "A depeg or a stale feed: a systemic failure, or a glitch that will pass?"),
    "mm-regret-minimization": ("Regret minimization", "Which error would the owner regret more here: selling too "
                               "early or holding too long?"),
    "mm-antifragility": ("Antifragility", "Prefer positions that lose little in disorder and can gain from it."),
    "mm-kelly": ("Kelly criterion", "Size by edge and odds; with no measured edge, size small."),
    "mm-causal": ("Causal reasoning", "Is this driver real or a pattern that happened to coincide? Say the mechanism."),
}


def core_models_text() -> str:
    lines = [f"- {mid} ({name}): {question}" for mid, (name, question) in CORE_MODELS.items()]
    return ("Mental models (reasoning scaffolds; name the ones you used in decide's `mental_models`, by id — a "
            "retrieved Grimoire entry tagged mental-model may be named by its id too):\n" + "\n".join(lines))
