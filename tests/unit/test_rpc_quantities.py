"""A JSON-RPC quantity wider than 256 bits is a ChainReadError naming the read, not an OverflowError deep in the
snapshot (found by the RPC fuzzer: an eth_gasPrice of 2^280 crashed `gas / 1e9`)."""

import pytest

from golem.chain.reader import ChainReadError, _quantity, _Read


def test_a_quantity_wider_than_256_bits_is_refused_with_the_read_named():
    read = _Read("eth_gasPrice", "eth_gasPrice", [])
    assert _quantity(read, hex((1 << 256) - 1)) == (1 << 256) - 1
    with pytest.raises(ChainReadError, match="eth_gasPrice: quantity 0x1000.* is wider than 256 bits"):
        _quantity(read, hex(1 << 280))
