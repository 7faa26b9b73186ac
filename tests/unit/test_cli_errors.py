"""User errors at the `golem` command line: one line on stderr (what, why, the fix), a non-zero exit and
never a traceback. Each case runs the real CLI in a subprocess, as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from golem.life.cycle_store import CycleStore
from golem.models.golem import TickFailure

REPO = Path(__file__).resolve().parents[2]


def golem(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli", *args], capture_output=True, text=True, cwd=REPO,
                          env=dict(os.environ, **(env or {})), timeout=120)


def assert_one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> str:
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def bad_home(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    return home


@pytest.mark.parametrize("command", [["doctor"], ["strategy-check"], ["run"], ["worker"]])
def test_invalid_config_is_one_line_naming_each_key(bad_home, tmp_path, command):
    (bad_home / "golem.toml").write_text(
        '[golem]\nid = "x"\n[clock]\ntheta_base_secs = 3\n[chain]\nconfirmations = -1\n')
    proc = golem("--home", str(bad_home), "--data", str(tmp_path / "data"), "--address", "127.0.0.1:1", *command)
    line = assert_one_line_error(proc, "golem.toml", "[clock.theta_base_secs] unknown key", "[chain.confirmations]")
    assert line.startswith("golem: ")
    assert not (tmp_path / "data").exists(), "`golem run` refused the config before starting anything"


def test_unparsable_and_missing_config(bad_home):
    (bad_home / "golem.toml").write_text("[golem\nid = 1\n")
    nothing = ("--data", str(bad_home / "no-data"), "--address", "127.0.0.1:1")  # no stored version to fall back on
    assert_one_line_error(golem("--home", str(bad_home), *nothing, "status"), "not valid TOML", "Fix the syntax")
    assert_one_line_error(golem("--home", str(bad_home / "nowhere"), *nothing, "status"), "not found", "Copy examples/")
    assert_one_line_error(golem("--home", str(bad_home), *nothing, "doctor"), "not valid TOML", "Fix the syntax")


def test_negative_tick_counts_and_ticks(tmp_path):
    assert_one_line_error(golem("--data", str(tmp_path), "ticks", "-n", "-5"), "golem ticks: -n must be >= 0",
                          "-n 5 lists")
    assert_one_line_error(golem("--data", str(tmp_path), "show", "-3"), "golem show: tick must be >= 0")


@pytest.mark.parametrize("command", [["ticks"], ["show", "3"], ["ticks", "--json"], ["grimoire", "stats"],
                                     ["grimoire", "search", "crash"]])
def test_missing_data_dir_is_named_and_not_created(tmp_path, command):
    missing = tmp_path / "typo"
    proc = golem("--data", str(missing), *command)
    assert_one_line_error(proc, f"no data directory at {missing}", "--data", "GOLEM_DATA")
    assert not missing.exists(), "a reading command must not create the data dir"


def test_status_without_temporal_is_one_line():
    proc = golem("--address", "127.0.0.1:1", "status")
    assert_one_line_error(proc, "cannot reach Temporal at 127.0.0.1:1", "connection refused", "golem run")


def test_closed_pipe_leaves_quietly(tmp_path):
    """`golem ticks | head`: the reader leaves early; no traceback, no 'Exception ignored', exit 141."""
    store = CycleStore(tmp_path)
    for tick in range(3000):
        store.record_failure(TickFailure(golem_id="g", tick=tick, workflow_id=f"golem-g-tick-{tick}",
                                         error="observe: connection refused " + "x" * 60, failed_at="2026-01-01"))
    proc = subprocess.Popen([sys.executable, "-m", "cli", "--data", str(tmp_path), "ticks", "-n", "3000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    first = proc.stdout.readline()
    proc.stdout.close()  # what `head -1` does
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141, err
    assert b"tick" in first and err == "", err


def test_strategy_check_without_chain_blames_no_rpc_and_with_chain_names_a_dead_one(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "STRATEGY.md").write_text((REPO / "examples" / "golem-home" / "STRATEGY.md").read_text())
    (home / "golem.toml").write_text('[golem]\nid = "sc"\n[chain]\nrpc_url = "http://127.0.0.1:1"\n')
    offline = golem("--home", str(home), "--data", str(tmp_path), "strategy-check")
    assert offline.returncode == 0, offline.stdout + offline.stderr
    assert ": ok" in offline.stdout and "rpc" not in offline.stdout.lower(), offline.stdout
    assert "--chain also tries" in offline.stdout
    dead = golem("--home", str(home), "--data", str(tmp_path), "strategy-check", "--chain")
    assert_one_line_error(dead, "golem strategy-check: cannot reach the chain RPC at http://127.0.0.1:1",
                          "rpc_url", "Without --chain")


def test_a_golem_toml_mid_edit_does_not_lock_the_owner_out_of_status(bad_home, tmp_path):
    """status, steer, pause, ... need only the golem's id: a golem.toml that does not validate (the owner is
    editing it; the golem runs on its applied version) gives a warning naming the key, and the command goes on to
    the running golem (here: no Temporal, so it stops there, one line). Not TOML at all: the id of the last version
    `golem run` stored in --data; without one, the file's error alone."""
    import json

    from golem.models.config import GolemConfig

    (bad_home / "golem.toml").write_text('[golem]\nid = "g7"\n[clock]\ntheta_base_seconds = "fast"\n')
    proc = golem("--home", str(bad_home), "--address", "127.0.0.1:1", "status")
    warning, error = proc.stderr.strip().splitlines()
    assert "[clock.theta_base_seconds]" in warning and "golem config apply" in warning and "[golem] section" in warning
    assert proc.returncode != 0 and "cannot reach Temporal at 127.0.0.1:1" in error and "Traceback" not in proc.stderr

    (bad_home / "golem.toml").write_text("[golem\n")
    data = tmp_path / "data"
    (data / "config-versions").mkdir(parents=True)
    cfg = GolemConfig.model_validate({"golem": {"id": "g7"}}).model_dump(mode="json")
    (data / "config-versions" / "abc.json").write_text(json.dumps({"version": "abc", "config": cfg}))
    proc = golem("--home", str(bad_home), "--data", str(data), "--address", "127.0.0.1:1", "steer", "repay now")
    warning, error = proc.stderr.strip().splitlines()
    assert "not valid TOML" in warning and f"last version stored in {data}" in warning
    assert "cannot reach Temporal" in error

    proc = golem("--home", str(bad_home), "--data", str(tmp_path / "empty"), "--address", "127.0.0.1:1", "status")
    assert_one_line_error(proc, "not valid TOML", "Fix the syntax")
