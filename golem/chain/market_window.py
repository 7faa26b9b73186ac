"""The last blocks of the world's WETH/USDC pair and ETH/USD feed, read at each block number in one JSON-RPC batch
(the node keeps their state): the threat detectors' input (golem.safety.threats, docs/design/safety.md#defi-threats)."""

from __future__ import annotations

from web3 import Web3

from golem.chain.contracts import FEED_DECIMALS, MAIN_PAIR, Deployment, decimals_of
from golem.chain.reader import ChainReadError, _calldata, _int256, _Read, _result, _send, _words, pair_token0
from golem.models.threats import MarketMark, MarketWindow

MAX_SPAN = 64  # blocks read at most, however far the head ran past the observation


def read_market_window(w3: Web3, deployment: Deployment, observed_block: int, blocks: int) -> MarketWindow:
    """The pair's reserves and the feed's answer at every block from `blocks` before the observed one to the head; a
    block the node cannot answer for (before the deployment, pruned history) is left out, so the verdicts say what
    they saw."""
    head = int(w3.eth.block_number)
    end = max(head, observed_block)
    start = max(0, min(observed_block, end) - blocks, end - MAX_SPAN)
    pair, feed = deployment.address(MAIN_PAIR), deployment.address("FEED_WETH")
    reads: list[_Read] = []
    for b in range(start, end + 1):
        reads.append(_Read(f"PAIR.getReserves()@{b}", "eth_call",
                           [{"to": pair, "data": _calldata("getReserves()")}, hex(b)]))
        reads.append(_Read(f"FEED_WETH.latestRoundData()@{b}", "eth_call",
                           [{"to": feed, "data": _calldata("latestRoundData()")}, hex(b)]))
    answers = _send(w3, reads)
    weth_first = pair_token0(deployment) == "WETH"
    weth_unit, usdc_unit = 10 ** decimals_of("WETH"), 10 ** decimals_of("USDC")
    marks = []
    for i, b in enumerate(range(start, end + 1)):
        res_read, feed_read = reads[2 * i], reads[2 * i + 1]
        try:
            r0, r1 = _words(res_read, _result(res_read, answers[2 * i]), 2)
            answer = _int256(_words(feed_read, _result(feed_read, answers[2 * i + 1]), 5)[1])
        except ChainReadError:
            continue
        weth, usdc = (r0, r1) if weth_first else (r1, r0)
        marks.append(MarketMark(block=b, reserve_weth=weth / weth_unit, reserve_usdc=usdc / usdc_unit,
                                feed_price=answer / 10**FEED_DECIMALS))
    return MarketWindow(marks=marks)
