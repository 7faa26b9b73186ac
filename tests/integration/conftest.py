"""Shared Anvil fixtures: one real Anvil and one deployed world per test session.

Tests that send transactions should use `world_snapshot` (evm_snapshot before, evm_revert
after) so they neither see nor leave state from other tests.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from web3 import Web3

from golem.chain.contracts import Deployment
from golem.chain.web3client import make_web3
from golem.models.config import GolemConfig
from golem.safety.service import SafetyService
from infra.anvil import AnvilProcess, free_port
from infra.world_cache import deploy_or_load


@pytest.fixture(scope="session")
def anvil(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AnvilProcess]:
    log_path: Path = tmp_path_factory.mktemp("anvil") / "anvil.log"
    proc = AnvilProcess(port=free_port(), log_path=log_path)
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="session")
def w3(anvil: AnvilProcess) -> Web3:
    return make_web3(anvil.rpc_url)


@pytest.fixture(scope="session")
def world(w3: Web3, anvil: AnvilProcess) -> Deployment:
    """The seeded dev world (Uniswap V2 + Aave V3 + feeds), the golem's position opened by the golem (key #2);
    deployed once and then loaded from the cached Anvil state dump (infra.world_cache)."""
    return deploy_or_load(w3, anvil.rpc_url)[0]


@pytest.fixture
def world_snapshot(w3: Web3, world: Deployment) -> Iterator[Deployment]:
    """The world, reverted to its pre-test state after the test."""
    snap = w3.provider.make_request("evm_snapshot", [])
    snap_id = snap.get("result")
    assert snap_id is not None, f"evm_snapshot failed: {snap}"
    try:
        yield world
    finally:
        reverted = w3.provider.make_request("evm_revert", [snap_id])
        assert reverted.get("result") is True, f"evm_revert failed: {reverted}"


@pytest.fixture
def svc(tmp_path) -> SafetyService:
    """A SafetyService (steps 5–8) over a fresh data dir, with no kill switch file in the way."""
    cfg = GolemConfig()
    cfg.probes.kill_switch_path = str(tmp_path / "no-killswitch")
    return SafetyService(cfg, tmp_path)
