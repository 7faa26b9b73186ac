"""Fuzzing RPC answers: a small HTTP proxy in front of the real Anvil hands the chain reader Anvil's
answer with one part broken — the whole body replaced (not JSON, null, huge, a different shape), one answer of
the batch replaced or dropped, one result of the wrong type or size, the block's fields mangled, an HTTP error.

Pass: `read_snapshot` (what the observe step runs) either returns a snapshot or raises ChainReadError naming the
read that failed (which the tick records as a failed tick); never another exception, never a hang."""

from __future__ import annotations

import json
import threading
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from golem.chain.reader import ChainReadError, read_snapshot
from golem.chain.web3client import make_web3
from golem.models.observation import ChainSnapshot
from infra.anvil import ANVIL_ADDRESSES

pytestmark = pytest.mark.integration

CASES: Counter[str] = Counter()
Mutator = Callable[[Any, bytes], tuple[int, bytes]]


class _Handler(BaseHTTPRequestHandler):
    server: "RpcProxy"

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        req = urllib.request.Request(self.server.upstream, data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            answer = resp.read()
        status = 200
        if self.server.mutate is not None:
            status, answer = self.server.mutate(json.loads(body), answer)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: Any) -> None:
        pass


class RpcProxy(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, upstream: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.upstream = upstream
        self.mutate: Mutator | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.fixture(scope="module")
def proxy(anvil) -> Iterator[RpcProxy]:
    p = RpcProxy(anvil.rpc_url)
    t = threading.Thread(target=p.serve_forever, daemon=True)
    t.start()
    try:
        yield p
    finally:
        p.shutdown()
        p.server_close()
        print("\nfuzz cases: RPC answers " + ", ".join(f"{k} {v}" for k, v in sorted(CASES.items())))


# ---- what a broken answer can look like -----------------------------------------------------------
_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
json_values = st.recursive(_scalars, lambda s: st.lists(s, max_size=4)
                           | st.dictionaries(st.text(max_size=6), s, max_size=4), max_leaves=12)
junk_results = (json_values | st.sampled_from(["0x", "0xzz", "0x-1", "0x" + "f" * 64, "0x" + "0" * 192,
                                              "0x" + "f" * 192, "0x" + "f" * 20_000, "1234", "", "0X10", "0x" + "1" * 63])
                | st.builds(lambda n: "0x" + "a" * n, st.integers(0, 400)))
whole_bodies = (st.binary(max_size=64) | st.sampled_from([b"", b"null", b"[]", b"{}", b"[null]", b'{"error": 5}',
                                                          b'{"jsonrpc":"2.0","id":1,"result":"0x1"}', b"[" * 5000])
                | st.builds(lambda v: json.dumps(v).encode(), json_values)
                | st.just(b'["' + b"x" * 2_000_000 + b'"]'))


@st.composite
def mutators(draw) -> tuple[str, Mutator]:
    kind = draw(st.sampled_from(["body", "answer", "result", "drop", "status", "block", "error"]))
    i = draw(st.integers(0, 200))
    if kind == "body":
        body = draw(whole_bodies)
        return kind, lambda req, ans: (200, body)
    if kind == "status":
        code, body = draw(st.sampled_from([429, 500, 502, 404])), draw(st.sampled_from([b"", b"busy", b"{}"]))
        return kind, lambda req, ans: (code, body)
    value = draw(json_values if kind == "answer" else junk_results)

    def mutate(req: Any, ans: bytes) -> tuple[int, bytes]:
        answers = json.loads(ans)
        if not isinstance(answers, list) or not answers:
            return 200, ans
        k = i % len(answers)
        if kind == "answer":
            answers[k] = value
        elif kind == "drop":
            del answers[k]
        elif kind == "error":
            answers[k] = {"jsonrpc": "2.0", "id": answers[k].get("id"), "error": value}
        elif kind == "block":
            blk = next((a for a in answers if isinstance(a.get("result"), dict)), None)
            if blk is not None:
                field = ["number", "timestamp", "baseFeePerGas", "hash"][i % 4]
                blk["result"][field] = value
        else:
            answers[k]["result"] = value
        return 200, json.dumps(answers).encode()

    return kind, mutate


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large])
@given(m=mutators())
def test_a_broken_rpc_answer_is_a_chain_read_error_or_a_snapshot(proxy, world, m):
    kind, mutate = m
    CASES[kind] += 1
    proxy.mutate = mutate
    try:
        snap = read_snapshot(make_web3(proxy.url, timeout=5), world, ANVIL_ADDRESSES[2])
    except ChainReadError as err:
        CASES["refused"] += 1
        assert str(err).strip() and len(str(err)) <= 400, "the error must say which read failed, briefly"
        return
    finally:
        proxy.mutate = None
    CASES["read anyway"] += 1
    assert isinstance(snap, ChainSnapshot)


def test_the_proxy_passes_the_real_chain_through(proxy, world):
    """The control: without a mutation, the reader through the proxy reads what it reads from Anvil directly."""
    direct = read_snapshot(make_web3(world.rpc_url), world, ANVIL_ADDRESSES[2])
    proxied = read_snapshot(make_web3(proxy.url), world, ANVIL_ADDRESSES[2])
    assert proxied.block_number == direct.block_number and proxied.pool == direct.pool


def test_a_block_mined_during_the_read_does_not_split_the_snapshot(proxy, w3, world_snapshot):
    """A block mined between the head read and the batch (here: a transfer to the golem, mined the moment the proxy
    has answered eth_blockNumber) is not seen: every read names the block the snapshot reports."""
    golem = ANVIL_ADDRESSES[2]
    before = read_snapshot(make_web3(world_snapshot.rpc_url), world_snapshot, golem)

    def mine_after_head(req: Any, ans: bytes) -> tuple[int, bytes]:
        calls = req if isinstance(req, list) else [req]
        if [c.get("method") for c in calls] == ["eth_blockNumber"]:
            w3.eth.send_transaction({"from": ANVIL_ADDRESSES[0], "to": golem, "value": 10**18})
        return 200, ans

    proxy.mutate = mine_after_head
    try:
        snap = read_snapshot(make_web3(proxy.url), world_snapshot, golem)
    finally:
        proxy.mutate = None
    after = read_snapshot(make_web3(world_snapshot.rpc_url), world_snapshot, golem)
    assert after.block_number == snap.block_number + 1 and after.native_balance_eth > before.native_balance_eth
    assert snap.block_number == before.block_number and snap.native_balance_eth == before.native_balance_eth
