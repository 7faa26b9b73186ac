"""The short chaos run (`-m chaos`; `make chaos` is the 300-tick one): a live golem under volatile prices on
its own Temporal dev server, Anvil, simulator and worker subprocess, while the worker is SIGKILLed three times
(one of them inside execute, between sign and broadcast) and the dev server is killed and restarted on its
SQLite. No tick may be lost or doubled, every record must parse, the account's nonce must rise by exactly the
journaled intents, and the audit chain must verify (infra/chaos.py)."""

from __future__ import annotations

import hashlib

import pytest

from infra.chaos import ChaosPlan, ChaosRun

pytestmark = [pytest.mark.integration, pytest.mark.chaos]


async def test_short_chaos_run_loses_and_doubles_nothing(tmp_path, request):
    golem_id = "chaos" + hashlib.sha1(request.node.name.encode()).hexdigest()[:8]
    plan = ChaosPlan(ticks=30, worker_kills=3, execute_kills=1, temporal_restarts=1, anvil_restarts=0,
                     continue_as_new_ticks=10, seed=3, timeout_seconds=900)
    run = ChaosRun(plan, tmp_path, golem_id=golem_id)
    try:
        report = await run.run()
    finally:
        run.stop()
    print(report.summary())
    assert not report.problems, report.summary()
    # What the run claims it did, it did: the faults happened and the checks had something to check.
    assert report.worker_kills == 3 and report.worker_kills_after_sign == 1, report.summary()
    assert report.temporal_restarts == 1
    assert report.ticks_recorded + report.ticks_failed == 30 and report.records_valid >= 29
    assert report.intents_journaled >= 1 and report.nonce_delta == report.intents_on_chain
    assert report.continued_as_new >= 2  # 30 ticks at 10 per run
    assert report.audit_ok and report.audit_entries > 0
