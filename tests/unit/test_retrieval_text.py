"""The text side of retrieval — past ticks in a question, proper names, the lexical terms."""

from __future__ import annotations

from golem.grimoire.store.terms import named_entities, terms
from golem.grimoire.retrieval import past_tick_of


def test_past_tick_of_reads_the_earlier_tick_a_question_names():
    assert past_tick_of("Why did you repay at tick 8,000?", 40_000) == 8_000
    assert past_tick_of("what happened in tick #412", 40_000) == 412
    assert past_tick_of("undo the swap from 30 ticks ago", 40_000) == 39_970
    # the present, the future, no tick at all: not a question about the past
    assert past_tick_of("what is in force at tick 40000?", 40_000) is None
    assert past_tick_of("at tick 50000 reduce exposure", 40_000) is None
    assert past_tick_of("reduce exposure now", 40_000) is None
    assert past_tick_of("", 10) is None


def test_named_entities_are_proper_names_not_acronyms_or_sentence_starts():
    assert named_entities("How do Solana priority fees work?") == ["Solana"]
    assert named_entities("What is the staking yield on Lido stETH?") == ["Lido", "stETH"]
    assert named_entities("Why are swaps pricier on Saturday? The pool is thin.") == []
    # the golem's own query: acronyms and lower case only
    assert named_entities("regime volatile; price 1850.00; TVL 3.0 → 2.0; WETH/USD feed round 3") == []


def test_terms_fold_inflections_and_the_domain_synonyms_on_both_sides():
    assert terms("hedged") == terms("hedge") and terms("prices") == terms("price") == terms("priced")
    assert terms("supplying") == terms("supply") and terms("fees") == terms("fee")
    assert terms("pay down what I owe") == terms("repay debt")
    assert terms("post more ETH") == terms("supply more WETH")
    assert terms("the priority fee") == terms("fee gas") and terms("HF") == terms("health factor")  # a fee that is gas
    assert terms("how much and how many") == []
