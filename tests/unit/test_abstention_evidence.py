"""The abstention evidence's tie-aware agreement: a lexical tie (one shared word) is not broken in dense order, so it
cannot agree with the dense list by construction (docs/design/grimoire.md, "The third round")."""

from __future__ import annotations

from golem.grimoire.retrieval import abstention_evidence


def evidence(pool):
    return abstention_evidence(pool, ["who", "won", "night"], frozenset({"night"}), "who won last night", None, None,
                               0.30)


def test_a_lexical_tie_agrees_with_the_dense_list_only_by_its_share():
    # eight candidates hold the question's one known word alike; the pool lists them in dense order
    tied = [(0.3 - 0.01 * n, 0.3 - 0.01 * n, 0.1) for n in range(8)] + [(0.1, 0.05, 0.0)] * 4
    ev = evidence(tied)
    assert ev["agreement"] == 1.0  # the tie broken in pool (dense) order: the two top 5s are the same by construction
    assert abs(ev["agreement_tied"] - 5 * (5 / 8) / 5) < 1e-9, ev  # each tied candidate holds 5/8 of a place


def test_a_lexical_order_of_its_own_agrees_in_full():
    ordered = [(0.3 - 0.01 * n, 0.3 - 0.01 * n, 0.5 - 0.05 * n) for n in range(8)]
    ev = evidence(ordered)
    assert ev["agreement"] == ev["agreement_tied"] == 1.0, ev
    # a tie inside the top 5 holds its places in full; only a group across the fifth place is shared
    inner = [(0.3 - 0.01 * n, 0.3 - 0.01 * n, 0.5 if n < 3 else 0.4 - 0.05 * n) for n in range(8)]
    assert evidence(inner)["agreement_tied"] == 1.0

