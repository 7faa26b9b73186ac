"""Past one machine: a golem worker and the CLI reach Temporal over TLS and mTLS, configured in golem.toml's
[temporal]. The dev server serves plaintext only (`temporal server start-dev` has no TLS flags), so a TLS-terminating
proxy with certificates made at test time stands in front of it (tests/integration/tls_proxy.py); what is real:
the dev server, Anvil, the worker process, the SDK's TLS client (rustls) and Python's ssl server side."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomli_w
from temporalio.api.workflowservice.v1 import GetSystemInfoRequest

from golem.life.cycle_store import CycleStore
from golem.models.config import load_config
from infra.anvil import free_port
from infra.temporal import TemporalDevServer
from tests.integration.golem_rig import REPO, GOLEM_KEY, make_rig
from tests.integration.tls_proxy import Pki, TlsProxy, make_pki
from workers.client import FrontendUnreachable, connect, frontend


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def dev_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TemporalDevServer]:
    server = TemporalDevServer(tmp_path_factory.mktemp("temporal") / "temporal.sqlite", port=free_port(),
                               ui_port=free_port(), headless=True)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def tls_proxy(dev_server: TemporalDevServer, pki: Pki) -> Iterator[TlsProxy]:
    proxy = TlsProxy(dev_server.address, pki.server).start()
    yield proxy
    proxy.stop()


@pytest.fixture(scope="module")
def mtls_proxy(dev_server: TemporalDevServer, pki: Pki) -> Iterator[TlsProxy]:
    proxy = TlsProxy(dev_server.address, pki.server, client_ca=pki.ca.cert).start()
    yield proxy
    proxy.stop()


def _env(**extra: str) -> dict[str, str]:
    """The process environment without any GOLEM_TEMPORAL_* of the caller's: golem.toml alone says where to go."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOLEM_TEMPORAL_")}
    return {**env, **extra}


def _set_temporal(home: Path, temporal: dict[str, object]) -> None:
    import tomllib

    toml = home / "golem.toml"
    raw = tomllib.loads(toml.read_text())
    raw["temporal"] = temporal
    toml.write_text(tomli_w.dumps(raw))


def _golem(home: Path, data: Path, *args: str, env: dict[str, str] | None = None,
           timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli", "--home", str(home), "--data", str(data), *args],
                          capture_output=True, text=True, timeout=timeout, cwd=REPO, env=env or _env())


@pytest.mark.parametrize("mode", ["tls", "mtls"])
def test_a_golem_worker_over_tls_runs_a_tick(tmp_path: Path, pki: Pki, tls_proxy: TlsProxy,
                                              mtls_proxy: TlsProxy, mode: str) -> None:
    """`golem worker` reads [temporal] from golem.toml (the CA by a path relative to it; mTLS: a client certificate),
    connects through the TLS front and serves the golem: a GolemWorkflow started by a client built from the same
    section completes its tick, and the tick's record is on disk."""
    proxy = mtls_proxy if mode == "mtls" else tls_proxy
    rig = make_rig(tmp_path, f"tls-{mode}")
    try:
        certs = rig.home / "certs"
        certs.mkdir()
        (certs / "ca.pem").write_bytes(pki.ca.cert.read_bytes())
        temporal: dict[str, object] = {"address": proxy.address, "server_ca_cert": "certs/ca.pem",
                                       "server_name": "temporal.test"}
        if mode == "mtls":
            temporal |= {"client_cert": str(pki.client.cert), "client_key": str(pki.client.key)}
        _set_temporal(rig.home, temporal)
        rig.config = load_config(rig.home / "golem.toml")
        seen_before = len(proxy.handshakes)
        log = (rig.data_dir / "worker.log").open("ab")
        worker = subprocess.Popen([sys.executable, "-m", "cli", "--home", str(rig.home), "--data", str(rig.data_dir),
                                   "worker"], stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
                                  env=_env(GOLEM_PRIVATE_KEY=GOLEM_KEY, GOLEM_METRICS_PORT="0"))

        async def run() -> int:
            client = await connect(target=frontend(rig.config.temporal, env=_env()))
            handle = await rig.start_golem(client, max_ticks=1)
            final = await asyncio.wait_for(handle.result(), timeout=240)
            return int(final.tick)

        try:
            assert asyncio.run(run()) == 1
        finally:
            worker.terminate()
            worker.wait(30)
            log.close()
        assert CycleStore(rig.data_dir).count() >= 1, "the tick recorded its cycle"
        mine = proxy.handshakes[seen_before:]
        assert mine and all(h == "ok" for h in mine), mine  # the worker and the client went through TLS, accepted
        assert "worker serving golem-tls-" in (rig.data_dir / "worker.log").read_text()
    finally:
        rig.stop()


def _status(tmp_path: Path, temporal: dict[str, object]) -> subprocess.CompletedProcess[str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "golem.toml").write_text(tomli_w.dumps({"golem": {"id": "refused"}, "temporal": temporal}))
    return _golem(home, tmp_path, "status")


def _one_line_error(proc: subprocess.CompletedProcess[str], *needles: str) -> str:
    err = proc.stderr.strip()
    assert proc.returncode != 0 and "Traceback" not in proc.stderr and len(err.splitlines()) == 1, proc.stderr
    for needle in needles:
        assert needle in err, (needle, err)
    return err


def test_clients_the_frontend_refuses_get_a_line_naming_the_key(tmp_path: Path, pki: Pki, tls_proxy: TlsProxy,
                                                                 mtls_proxy: TlsProxy) -> None:
    before = len(tls_proxy.handshakes)
    # No CA for a frontend whose certificate a private CA signed: refused by the client's verification.
    _one_line_error(_status(tmp_path, {"address": tls_proxy.address, "tls": True}),
                    f"cannot reach Temporal at {tls_proxy.address}", "not signed by a CA this client trusts",
                    "[temporal] server_ca_cert")
    # A CA that did not sign it: the same.
    _one_line_error(_status(tmp_path, {"address": tls_proxy.address, "server_ca_cert": str(pki.other_ca.cert)}),
                    "[temporal] server_ca_cert")
    # Plaintext to a TLS-only frontend.
    _one_line_error(_status(tmp_path, {"address": tls_proxy.address}), "[temporal] tls", tls_proxy.address)
    refused = tls_proxy.handshakes[before:]
    assert len(refused) >= 3 and not any(h == "ok" for h in refused), refused
    # mTLS required, no client certificate: the server side refuses the handshake.
    before = len(mtls_proxy.handshakes)
    _one_line_error(_status(tmp_path, {"address": mtls_proxy.address, "server_ca_cert": str(pki.ca.cert)}),
                    f"cannot reach Temporal at {mtls_proxy.address}", "[temporal] client_cert")
    assert mtls_proxy.handshakes[before:] and "refused" in mtls_proxy.handshakes[-1], mtls_proxy.handshakes
    # TLS to the plaintext dev server itself.
    _one_line_error(_status(tmp_path, {"address": tls_proxy.target, "server_ca_cert": str(pki.ca.cert)}),
                    "does not speak TLS", "[temporal] tls")


def test_worker_with_a_bad_temporal_section_stops_with_one_line(tmp_path: Path, pki: Pki,
                                                                 tls_proxy: TlsProxy) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "golem.toml").write_text(tomli_w.dumps({"golem": {"id": "bad-worker"}, "temporal": {
        "address": tls_proxy.address, "server_ca_cert": "missing/ca.pem"}}))
    proc = _golem(home, tmp_path, "worker", env=_env(GOLEM_PRIVATE_KEY=GOLEM_KEY, GOLEM_METRICS_PORT="0"))
    err = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "[temporal] server_ca_cert" in err and str(home / "missing" / "ca.pem") in err, err
    # unreachable: the address is named
    (home / "golem.toml").write_text(tomli_w.dumps({"golem": {"id": "bad-worker"}, "temporal": {
        "address": "127.0.0.1:1"}}))
    proc = _golem(home, tmp_path, "worker", env=_env(GOLEM_PRIVATE_KEY=GOLEM_KEY, GOLEM_METRICS_PORT="0"))
    err = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "cannot reach Temporal at 127.0.0.1:1" in err and "connection refused" in err, err


def test_an_api_key_comes_from_its_env_var_turns_tls_on_and_stays_out_of_everything(tmp_path: Path, pki: Pki,
                                                                                     tls_proxy: TlsProxy) -> None:
    """The key is read from the variable api_key_env names, sent by the SDK (Client.connect's api_key, which it
    sends as `authorization: Bearer` metadata), and turns TLS on by itself. Not asserted here: that the header
    reaches the frontend — the proxy sees only HPACK/Huffman-coded HTTP/2 and a dev server checks no key."""
    key = "tk-test-" + os.urandom(8).hex()
    home = tmp_path / "home"
    home.mkdir()
    (home / "golem.toml").write_text(tomli_w.dumps({"golem": {"id": "keyed"}, "temporal": {
        "address": tls_proxy.address, "server_ca_cert": str(pki.ca.cert), "api_key_env": "TEMPORAL_TEST_KEY"}}))
    cfg = load_config(home / "golem.toml")
    target = frontend(cfg.temporal, env={"TEMPORAL_TEST_KEY": key})
    assert target.api_key == key and target.tls is not False
    assert key not in repr(target) and key not in target.describe() and "$TEMPORAL_TEST_KEY" in target.describe()
    assert key not in cfg.model_dump_json() and "temporal" not in cfg.model_dump(), "never in a config version"

    async def run() -> None:
        client = await connect(target=target)
        assert client.api_key == key  # what the SDK sends on every call
        await client.workflow_service.get_system_info(GetSystemInfoRequest())

    before = len(tls_proxy.handshakes)
    asyncio.run(run())
    assert tls_proxy.handshakes[before:] and tls_proxy.handshakes[-1] == "ok"
    # without the variable: the command stops naming it, and never prints a key
    proc = _golem(home, tmp_path, "status", env=_env())
    _one_line_error(proc, "[temporal] api_key_env", "$TEMPORAL_TEST_KEY", "not set")
    # with it, the CLI gets through to the frontend (the golem does not exist: NOT_FOUND, not a connection error)
    proc = _golem(home, tmp_path, "status", env=_env(TEMPORAL_TEST_KEY=key))
    assert "cannot reach Temporal" not in proc.stderr and key not in proc.stderr + proc.stdout, proc.stderr


def test_a_frontend_that_does_not_answer_is_named(pki: Pki) -> None:
    target = frontend({"address": f"127.0.0.1:{free_port()}", "server_ca_cert": str(pki.ca.cert)}, env={})
    with pytest.raises(FrontendUnreachable, match=rf"cannot reach Temporal at {target.address} .*connection refused"):
        asyncio.run(connect(target=target))


def test_a_frontend_coming_up_is_waited_for_when_asked(tls_proxy: TlsProxy) -> None:
    """wait_seconds (the worker's --wait-for-temporal, which `golem run` passes): a frontend that refuses connections
    for the first seconds (a dev server restarting) is tried again until it listens, instead of the worker crashing."""
    import time

    port = free_port()
    host, target_port = tls_proxy.target.rsplit(":", 1)

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def forward(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(host, int(target_port))
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    async def run() -> float:
        async def listen_later() -> asyncio.Server:
            await asyncio.sleep(2.5)
            return await asyncio.start_server(forward, "127.0.0.1", port)

        started = time.monotonic()
        later = asyncio.create_task(listen_later())
        client = await connect(f"127.0.0.1:{port}", wait_seconds=30)
        waited = time.monotonic() - started
        await client.workflow_service.get_system_info(GetSystemInfoRequest())
        (await later).close()
        return waited

    assert asyncio.run(run()) >= 2.0


def test_golem_run_on_a_configured_frontend_over_mtls_starts_no_dev_server(tmp_path: Path, pki: Pki,
                                                                          mtls_proxy: TlsProxy) -> None:
    """`golem run` with [temporal] naming a frontend (here: over mTLS) starts Anvil, the simulator, the worker and the
    dashboard but no dev server; the golem and its heartbeat-monitor start on that frontend and the golem ticks."""
    import shutil
    import signal
    import time
    import tomllib

    from tests.integration.golem_rig import EXAMPLE_HOME

    home, data = tmp_path / "home", tmp_path / "data"
    home.mkdir()
    for name in ("STRATEGY.md", "HEARTBEAT.md"):
        shutil.copy(EXAMPLE_HOME / name, home / name)
    raw = tomllib.loads((EXAMPLE_HOME / "golem.toml").read_text())
    gid = f"run-mtls-{os.getpid()}"
    raw["golem"].update(id=gid, home=".")
    raw["chain"]["rpc_url"] = f"http://127.0.0.1:{free_port()}"
    raw["clock"].update(theta_base_seconds=0.5, theta_min_seconds=0.25, theta_max_seconds=1.5)
    raw["temporal"] = {"address": mtls_proxy.address, "server_ca_cert": str(pki.ca.cert),
                       "client_cert": str(pki.client.cert), "client_key": str(pki.client.key)}
    (home / "golem.toml").write_text(tomli_w.dumps(raw))
    # (a dev server, if one were wrongly started, on ports of its own: not the owner's 7233)
    env = _env(GOLEM_DASHBOARD_PORT=str(free_port()), GOLEM_METRICS_PORT=str(free_port()), PYTHONUNBUFFERED="1",
               GOLEM_TEMPORAL_PORT=str(free_port()), GOLEM_TEMPORAL_UI_PORT=str(free_port()))
    log = data / "logs" / "golem-run.log"
    before = len(mtls_proxy.handshakes)
    run = subprocess.Popen([sys.executable, "-m", "cli", "run", "--home", str(home), "--data", str(data), "--quiet"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, cwd=REPO, env=env,
                           start_new_session=True)

    def wait(cond, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if cond():
                return
            assert run.poll() is None, f"golem run exited {run.returncode}: {log.read_text()[-3000:]}"
            time.sleep(0.5)
        raise AssertionError(f"timed out waiting for {what}: {log.read_text()[-3000:] if log.exists() else ''}")

    try:
        wait(lambda: log.exists() and f"golem '{gid}'" in log.read_text(), 300, "the golem to start")
        text = log.read_text()
        assert f"Temporal: the frontend at {mtls_proxy.address} (namespace default, mTLS)" in text, text
        assert "starting Temporal dev server" not in text and not (data / "temporal.sqlite").exists()
        assert "heartbeat-monitor" in text and "started" in text
        wait(lambda: CycleStore(data).count() >= 2, 180, "two recorded ticks")
        dashboard = (data / "logs" / "dashboard.log").read_text()
        assert "dashboard: http" in dashboard and "not reachable" not in dashboard, dashboard  # it reached Temporal
        assert all(h == "ok" for h in mtls_proxy.handshakes[before:]) and len(mtls_proxy.handshakes) - before >= 3
    finally:
        with contextlib.suppress(ProcessLookupError):  # it may have stopped by itself (a failure above)
            os.killpg(run.pid, signal.SIGINT)
        try:
            run.wait(60)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(run.pid, signal.SIGKILL)
            run.wait(10)
