"""Construct a synchronous Web3 client for an RPC URL."""

from __future__ import annotations

from web3 import Web3
from web3.providers.rpc import HTTPProvider
from web3.types import RPCEndpoint

DEFAULT_TIMEOUT_S = 10.0


def make_web3(rpc_url: str, timeout: float = DEFAULT_TIMEOUT_S) -> Web3:
    """An HTTP Web3 client with a bounded request timeout (a hung node must not hang a tick)."""
    if not rpc_url.startswith(("http://", "https://")):
        raise ValueError(f"rpc_url must be an http(s) URL, got {rpc_url!r}")
    if timeout <= 0:
        raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
    # eth_chainId cached: web3's validation asks for it before every eth_call, a second round trip per read
    return Web3(HTTPProvider(rpc_url, request_kwargs={"timeout": timeout}, cache_allowed_requests=True,
                             cacheable_requests={RPCEndpoint("eth_chainId")}))
