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
from golem.world.deploy import deploy_world
from infra.anvil import ANVIL_ADDRESSES, ANVIL_KEYS, AnvilProcess, free_port


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
    """The seeded dev world (contracts.md), the golem's position opened by the golem (key #2)."""
    return deploy_world(
        w3,
        deployer_key=ANVIL_KEYS[0],
        golem_address=ANVIL_ADDRESSES[2],
        trader_address=ANVIL_ADDRESSES[1],
        golem_key=ANVIL_KEYS[2],
        rpc_url=anvil.rpc_url,
    )


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
