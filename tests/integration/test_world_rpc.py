"""The replay driver's transport and calldata on a real Anvil: golem/world/rpc.py's lean provider answers as web3's
HTTPProvider does (single calls, batches, errors) and survives a connection the node dropped; deploy.calldata encodes
the simulator's calls to the bytes web3's encode_abi gives."""

from __future__ import annotations

import socket

import pytest

from golem.chain.contracts import contract
from golem.chain.web3client import make_web3
from golem.world.deploy import calldata, deploy_world
from golem.world.rpc import LeanHTTPProvider, lean_web3
from infra.anvil import ANVIL_ADDRESSES, ANVIL_KEYS, AnvilProcess, free_port

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def anvil(tmp_path_factory):
    node = AnvilProcess(port=free_port(), log_path=tmp_path_factory.mktemp("anvil") / "anvil.log")
    node.start()
    yield node
    node.stop()


def test_the_lean_provider_answers_as_web3s_does(anvil):
    lean, plain = lean_web3(anvil.rpc_url), make_web3(anvil.rpc_url)
    assert isinstance(lean.provider, LeanHTTPProvider)
    assert lean.eth.chain_id == plain.eth.chain_id
    assert lean.eth.get_block("latest") == plain.eth.get_block("latest")
    batch = [("eth_blockNumber", []), ("eth_chainId", []), ("no_such_method", [])]
    strip = [{k: v for k, v in a.items() if k != "id"} for a in plain.provider.make_batch_request(batch)]
    assert [{k: v for k, v in a.items() if k != "id"} for a in lean.provider.make_batch_request(batch)] == strip
    assert "error" in lean.provider.make_request("no_such_method", [])


def test_a_connection_the_node_dropped_is_made_again(anvil):
    w3 = lean_web3(anvil.rpc_url)
    first = w3.eth.block_number
    conn = w3.provider._local.conn  # the kept-alive connection of this thread
    conn.sock.shutdown(socket.SHUT_RDWR)  # as a node closing an idle connection leaves it
    assert w3.eth.block_number == first
    assert w3.provider._local.conn is not conn


def test_calldata_is_web3s_encoding(anvil):
    w3 = make_web3(anvil.rpc_url)
    w3.provider.make_request("anvil_setBlockTimestampInterval", [0])
    dep = deploy_world(w3, ANVIL_KEYS[0], ANVIL_ADDRESSES[2], ANVIL_ADDRESSES[1], golem_key=ANVIL_KEYS[2],
                       rpc_url=anvil.rpc_url)
    a = dep.addresses
    cases = [  # every call the simulator and the liquidator make
        ("USDC", "approve", [a["UNI_ROUTER"], 2**256 - 1]),
        ("USDC", "mint", [ANVIL_ADDRESSES[1], 10**12]),
        ("WETH", "deposit", []),
        ("FEED_WETH", "post_round", [200_000_000_000]),
        ("UNI_ROUTER", "swapExactTokensForTokens", [10**18, 0, [a["WETH"], a["USDC"]], ANVIL_ADDRESSES[1], 2**63]),
        ("AAVE_POOL", "liquidationCall", [a["WETH"], a["USDC"], ANVIL_ADDRESSES[2], 2**256 - 1, False]),
    ]
    for key, fn, args in cases:
        c = contract(w3, dep, key)
        assert calldata(c, fn, args) == c.encode_abi(fn, args=args), (key, fn)


def test_a_read_is_one_request(anvil):
    """web3 checks the chain id before every eth_call; make_web3 asks the node once, not on each read."""
    w3 = make_web3(anvil.rpc_url)
    sent = []
    manager = w3.provider._request_session_manager
    post = manager.make_post_request
    manager.make_post_request = lambda *a, **k: sent.append(1) or post(*a, **k)  # type: ignore[method-assign]
    for _ in range(5):
        w3.eth.call({"to": ANVIL_ADDRESSES[1], "data": "0x"})
    assert len(sent) <= 5 + 2, f"{len(sent)} HTTP requests for 5 reads"
    assert w3.eth.chain_id == 31337
