"""The lexical side both indexes share: a text's terms (stop words dropped, lightly stemmed, a few DeFi
synonyms folded), the proper names a question mentions, and an episode summary's terms, cached."""

from __future__ import annotations

import re


_WORD = re.compile(r"[a-z0-9]+(?:\.[0-9]+)?")
# Function words that carry no topic (a question's "what should I ..." must not match every entry).
STOPWORDS = frozenset(
    "a an the and or but if of to in on at by for with from into over under about as is are was were be been being "
    "do does did doing have has had i me my we our you your it its this that these those there here what which who "
    "whom whose when where why how should would could can will shall may might must not no so than then too very "
    "just any all each some more most such only own same other get got right now still back time point ago "
    "many much really".split())
# `must`/`not` are stop words for matching; a MUST constraint is recognised from the raw text (retrieval.is_safety_entry).


def stem(w: str) -> str:
    """A light suffix stripper (repaying → repay, prices → pric, liquidations → liquidation, hedged → hedg); enough to
    join a question's inflection to an entry's, and identical on both sides. A final e goes too, so price / prices /
    priced and hedge / hedged meet. Short words keep all but a plural s (fees → fee; gas, bus stay)."""
    if w[0].isdigit():
        return w
    if len(w) <= 4:
        return w[:-1] if len(w) == 4 and w.endswith("s") and not w.endswith(("ss", "us", "is")) else w
    for suf in ("ings", "ing", "ies", "ied", "ed", "es", "s"):
        if w.endswith(suf) and len(w) - len(suf) >= 3 and not w.endswith(("ss", "us", "is")):
            w = w[: -len(suf)] + ("y" if suf in ("ies", "ied") else "")
            break
    return w[:-1] if len(w) > 4 and w.endswith("e") else w


# The golem's domain vocabulary (ours): a few DeFi synonyms folded to one term on both sides, so a
# paraphrase that shares no word with an entry still shares a term ("pay down what I owe" ~ "repay the debt").
# Written from the world's vocabulary (README "The world"), kept small and generic.
_PHRASES = [(re.compile(p), r) for p, r in (
    (r"\bpa(?:y|ys|ying|id) (?:down|back|off)\b", "repay"),
    (r"\b(?:base|priority|transaction|network|tx) (fees?)\b", r"\1 gas"),  # a base fee is gas, and still a fee
    (r"\bblock ?space\b", "gas"),
)]
_ALIASES = {
    "eth": "weth", "ether": "weth",
    "owe": "debt", "owed": "debt", "owes": "debt", "owing": "debt", "loan": "debt", "loans": "debt",
    "post": "supply", "posting": "supply", "deposit": "supply", "deposits": "supply", "deposited": "supply",
    "liquidate": "liquidation", "liquidated": "liquidation", "liquidator": "liquidation",
    "liquidators": "liquidation", "liquidating": "liquidation",
    "feed": "oracle", "feeds": "oracle",
    "hf": "health factor",
    "tx": "transaction", "txs": "transaction",
}


def terms(text: str) -> list[str]:
    """Lexical terms of a text: lower-cased words (and decimals like 1.6), stop words dropped, stemmed."""
    low = text.lower()
    if "pa" in low or "fee" in low or "block" in low:  # what the phrases start with: skip three regexes otherwise
        for pat, rep in _PHRASES:
            low = pat.sub(rep, low)
    out: list[str] = []
    cache = _WORD_TERMS
    for w in _WORD.findall(low):
        if w[0].isdigit():
            out.append(w)  # numbers are kept as they are (and not cached: mostly unique)
            continue
        got = cache.get(w)
        if got is None:
            if len(cache) >= _WORD_TERMS_MAX:
                cache.clear()
            if w in STOPWORDS or len(w) < 2:
                got = ()
            else:
                alias = _ALIASES.get(w)
                got = (stem(w),) if alias is None else tuple(stem(a) for a in alias.split())
            cache[w] = got
        out += got
    return out


_WORD_TERMS: dict[str, tuple[str, ...]] = {}  # word → its terms (stop word: none; alias; stem)
_WORD_TERMS_MAX = 200_000


# Words spelled with a capital that name no entity: calendar words, the pronoun.
_NOT_ENTITIES = frozenset(
    "i monday tuesday wednesday thursday friday saturday sunday january february march april may june july august "
    "september october november december".split())
_CAPWORD = re.compile(r"(?<![\w/.-])([A-Za-z][A-Za-z0-9]*)")


def named_entities(text: str) -> list[str]:
    """Proper names a question mentions: capitalised or mixed-case words other than the first (Solana, Arbitrum,
    stETH, dYdX). All-capitals acronyms (USD, TVL, WETH) and calendar words are not counted — the golem's own
    queries are full of the former."""
    out = []
    for sentence in re.split(r"[.?!;:]\s+", text or ""):
        for n, m in enumerate(_CAPWORD.finditer(sentence)):
            w = m.group(1)
            if n == 0 or len(w) < 3 or w.isupper() or w.islower() or w.lower() in _NOT_ENTITIES:
                continue
            out.append(w)
    return out


_SUMMARY_TERMS: dict[str, frozenset[str]] = {}
# Episode summaries are immutable and a query without the in-memory index re-scores the same candidates: cache their
# terms. Ours: 4,096 (~11 MB at ~2.7 KB a summary); the episode index keeps its own postings and does not fill it
# (at 50,000 every episode of a fleet passed through here and the worker grew ~2.7 MB per golem per 1,000 ticks).
_SUMMARY_TERMS_MAX = 4_096


def summary_terms(text: str) -> frozenset[str]:
    """terms() of an episode summary, cached (cleared whole when it grows past _SUMMARY_TERMS_MAX)."""
    got = _SUMMARY_TERMS.get(text)
    if got is None:
        if len(_SUMMARY_TERMS) >= _SUMMARY_TERMS_MAX:
            _SUMMARY_TERMS.clear()
        got = _SUMMARY_TERMS[text] = frozenset(terms(text))
    return got
