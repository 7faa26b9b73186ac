"""Deploy the embedded world once and reuse it: an Anvil state dump of a freshly deployed world.

Deploying the real protocols takes ~90 transactions. Tests and `golem run` on a fresh data dir would
redeploy every time; instead the first deploy is dumped with `anvil_dumpState` into a cache keyed by
everything that shapes the world (the published artifacts' package versions, our compiled contracts, the
deploy script, the Anvil build) and the chain id, and later Anvils `anvil_loadState` it. A stale key simply
redeploys.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from web3 import Web3
from web3.types import RPCEndpoint

from golem.chain.contracts import Deployment
from golem.world import deploy as deploy_mod
from golem.world import protocols
from golem.world.compile import ARTIFACTS_DIR
from golem.world.devchain import ANVIL_ADDRESSES, ANVIL_KEYS
from infra.anvil import anvil_binary

GOLEM_KEY_INDEX = 2  # Anvil dev account #2 is the golem (public, well-known dev key)


def cache_dir() -> Path:
    """`$GOLEM_WORLD_CACHE`, else `~/.cache/golem/world`."""
    env = os.environ.get("GOLEM_WORLD_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "golem" / "world"


def world_key() -> str:
    h = hashlib.sha256()
    for p in protocols.PACKAGES:
        h.update(f"{p}={protocols.package_version(p)};".encode())
    for path in sorted(ARTIFACTS_DIR.glob("*.json")) + [Path(deploy_mod.__file__)]:
        h.update(path.read_bytes())
    h.update(str(anvil_binary().stat().st_size).encode())
    return h.hexdigest()[:16]


def deploy_or_load(w3: Web3, rpc_url: str, *, use_cache: bool = True) -> tuple[Deployment, bool]:
    """The dev world on the (fresh) Anvil behind `w3`: loaded from the cached state dump when there is one,
    deployed (and then cached) otherwise. Returns (deployment, deployed_now)."""
    # the chain id too: a world deployed on an Anvil started with another chain id (an "external" RPC in the tests)
    # carries that id in its address book, and loaded elsewhere it would claim the wrong chain
    key = f"{world_key()}-{int(w3.eth.chain_id)}"
    state_path, dep_path = cache_dir() / f"{key}.state", cache_dir() / f"{key}.json"
    if use_cache and state_path.is_file() and dep_path.is_file():
        resp = w3.provider.make_request(RPCEndpoint("anvil_loadState"), [state_path.read_text().strip()])
        if resp.get("result") is True:
            dep = Deployment.model_validate_json(dep_path.read_text())
            if w3.eth.get_code(Web3.to_checksum_address(dep.addresses["AAVE_POOL"])):
                # Chain time resumes where the dump stopped, so the feeds' rounds are as fresh as when deployed
                # (a dump made days ago would otherwise show every feed stale at the first new block).
                w3.provider.make_request(RPCEndpoint("anvil_setTime"),
                                         [int(w3.eth.get_block("latest")["timestamp"]) + 1])
                return dep.model_copy(update={"rpc_url": rpc_url}), False
    dep = deploy_mod.deploy_world(
        w3, ANVIL_KEYS[0], ANVIL_ADDRESSES[GOLEM_KEY_INDEX], ANVIL_ADDRESSES[1],
        golem_key=ANVIL_KEYS[GOLEM_KEY_INDEX], rpc_url=rpc_url,
    )  # fmt: skip
    if use_cache:
        dump = w3.provider.make_request(RPCEndpoint("anvil_dumpState"), [])
        if isinstance(dump.get("result"), str):
            cache_dir().mkdir(parents=True, exist_ok=True)
            # the address book first, each file whole (a private temp file, then an atomic rename): two test
            # sessions deploying at once each write a complete pair, and a reader never sees half of one
            for path, text in ((dep_path, json.dumps(json.loads(dep.model_dump_json()))), (state_path, dump["result"])):
                tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
                tmp.write_text(text)
                tmp.replace(path)
    return dep, True
