"""golem.toml's [temporal] and its GOLEM_TEMPORAL_* overrides, resolved by workers.client.frontend(): precedence,
paths relative to golem.toml, TLS on by itself with a certificate or an API key, and a bad setting named by its key
before any connection. The connections themselves: tests/integration/test_temporal_tls.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import tomli_w
from temporalio.service import TLSConfig

from golem.models.config import ConfigError, GolemConfig, TemporalSection, load_config
from golem.models.config_version import config_version
from workers.client import TemporalConfigError, frontend

REPO = Path(__file__).resolve().parents[2]
PEM_CERT = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
PEM_KEY = b"-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n"


def _home(tmp_path: Path, temporal: dict[str, object]) -> Path:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "golem.toml").write_text(tomli_w.dumps({"golem": {"id": "t"}, "temporal": temporal}))
    return home / "golem.toml"


def test_defaults_are_the_local_dev_server_in_plain():
    target = frontend(None, env={})
    assert (target.address, target.namespace, target.tls, target.api_key, target.remote) == (
        "127.0.0.1:7233", "default", False, None, False)


def test_precedence_is_toml_then_environment_then_address():
    section = TemporalSection(address="toml-host:7233", namespace="prod")
    assert frontend(section, env={}).address == "toml-host:7233" and frontend(section, env={}).remote
    env = {"GOLEM_TEMPORAL_ADDRESS": "env-host:7233", "GOLEM_TEMPORAL_NAMESPACE": "staging"}
    assert (frontend(section, env=env).address, frontend(section, env=env).namespace) == ("env-host:7233", "staging")
    assert frontend(section, env=env, address="flag-host:7233").address == "flag-host:7233"
    assert frontend(None, env={"GOLEM_TEMPORAL_TLS": "true"}).tls is True  # the system's roots


def test_certificate_paths_resolve_against_golem_toml_and_turn_tls_on(tmp_path):
    toml = _home(tmp_path, {"address": "t.internal:7233", "server_ca_cert": "certs/ca.pem", "server_name": "t.test",
                            "client_cert": "certs/me.pem", "client_key": "certs/me-key.pem"})
    certs = toml.parent / "certs"
    certs.mkdir()
    (certs / "ca.pem").write_bytes(PEM_CERT)
    (certs / "me.pem").write_bytes(PEM_CERT)
    (certs / "me-key.pem").write_bytes(PEM_KEY)
    cfg = load_config(toml)
    assert cfg.temporal.server_ca_cert == str(certs / "ca.pem")
    target = frontend(cfg.temporal, env={})
    assert isinstance(target.tls, TLSConfig)
    assert (target.tls.server_root_ca_cert, target.tls.client_cert, target.tls.client_private_key,
            target.tls.domain) == (PEM_CERT, PEM_CERT, PEM_KEY, "t.test")
    assert "mTLS" in target.describe()


def test_an_api_key_is_read_from_its_variable_and_turns_tls_on():
    target = frontend(TemporalSection(address="ns.acct.tmprl.cloud:7233", namespace="ns.acct",
                                      api_key_env="TEMPORAL_API_KEY"), env={"TEMPORAL_API_KEY": "secret-k"})
    assert target.api_key == "secret-k" and target.tls is True
    assert "secret-k" not in repr(target) and "secret-k" not in target.describe()


def test_the_section_is_not_part_of_the_config_version():
    plain = GolemConfig()
    remote = GolemConfig(temporal=TemporalSection(address="t:7233", api_key_env="K"))
    assert "temporal" not in remote.model_dump()
    assert config_version(plain, "s") == config_version(remote, "s")


@pytest.mark.parametrize(("temporal", "env", "needles"), [
    ({"client_key": "k.pem"}, {}, ["[temporal] client_key", "without client_cert"]),
    ({"client_cert": "c.pem"}, {}, ["[temporal] client_cert", "without client_key"]),
    ({"tls": False, "server_ca_cert": "ca.pem"}, {}, ["[temporal] tls = false", "server_ca_cert"]),
    ({"tls": False, "api_key_env": "K"}, {}, ["[temporal] tls = false", "api_key_env", "in clear"]),
    ({"tls": False, "address": "ns.acct.tmprl.cloud:7233"}, {}, ["Temporal Cloud", "only speaks TLS"]),
    ({"address": "https://t:7233"}, {}, ["[temporal] address", "without a scheme"]),
    ({"address": "t"}, {}, ["[temporal] address", "host:port"]),
    ({"api_key_env": "tk_abc.def-ghi"}, {}, ["[temporal] api_key_env"]),  # a key pasted where its variable's name goes
    ({"api_key_env": "TEMPORAL_API_KEY"}, {}, ["[temporal] api_key_env", "$TEMPORAL_API_KEY", "not set"]),
    ({}, {"GOLEM_TEMPORAL_TLS": "maybe"}, ["GOLEM_TEMPORAL_TLS", "true or false"]),
    ({}, {"GOLEM_TEMPORAL_CLIENT_KEY": "/k.pem"}, ["client_key", "without client_cert"]),
    ({"server_ca_cert": "/nowhere/ca.pem"}, {}, ["[temporal] server_ca_cert", "/nowhere/ca.pem", "no file"]),
])
def test_a_bad_setting_is_named_before_any_connection(temporal, env, needles):
    with pytest.raises(TemporalConfigError) as err:
        frontend(temporal, env=env)
    for needle in needles:
        assert needle in str(err.value), (needle, str(err.value))


def test_a_file_that_is_not_pem_is_named(tmp_path):
    (tmp_path / "ca.pem").write_text("not a certificate")
    with pytest.raises(TemporalConfigError, match=r"\[temporal\] server_ca_cert .*is not a PEM certificate"):
        frontend({"server_ca_cert": str(tmp_path / "ca.pem")}, env={})
    (tmp_path / "c.pem").write_bytes(PEM_CERT)
    with pytest.raises(TemporalConfigError, match=r"\[temporal\] client_key .*is not a PEM private key"):
        frontend({"client_cert": str(tmp_path / "c.pem"), "client_key": str(tmp_path / "c.pem")}, env={})


def test_load_config_names_a_bad_temporal_key(tmp_path):
    with pytest.raises(ConfigError, match=r"\[temporal\].*client_key is set without client_cert"):
        load_config(_home(tmp_path, {"client_key": "k.pem"}))
    with pytest.raises(ConfigError, match=r"\[temporal.adress\] unknown key"):
        load_config(_home(tmp_path, {"adress": "t:7233"}))


def _golem(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    base = {k: v for k, v in os.environ.items() if not k.startswith("GOLEM_TEMPORAL_")}
    return subprocess.run([sys.executable, "-m", "cli", *args], capture_output=True, text=True, cwd=REPO,
                          env={**base, **(env or {})}, timeout=120)


@pytest.mark.parametrize("command", [["status"], ["doctor"], ["pause"]])
def test_cli_commands_name_a_bad_temporal_key_in_one_line(tmp_path, command):
    toml = _home(tmp_path, {"address": "t.internal:7233", "server_ca_cert": "certs/missing.pem"})
    proc = _golem("--home", str(toml.parent), "--data", str(tmp_path), *command)
    err = proc.stderr.strip()
    assert proc.returncode != 0 and "Traceback" not in err and len(err.splitlines()) == 1, err
    assert "[temporal] server_ca_cert" in err and str(toml.parent / "certs" / "missing.pem") in err


def test_golem_run_with_a_frontend_configured_starts_no_dev_server(tmp_path):
    """A configured frontend is where the golem runs: `golem run` checks it first and, unreachable, stops naming it —
    with no dev server started and nothing of one in the data dir."""
    toml = _home(tmp_path, {"address": "127.0.0.1:1"})
    data = tmp_path / "data"
    proc = _golem("--home", str(toml.parent), "--data", str(data), "run")
    err = proc.stderr.strip()
    assert proc.returncode != 0 and "Traceback" not in err, err
    assert "cannot reach Temporal at 127.0.0.1:1" in err and "connection refused" in err, err
    assert not data.exists(), "checked before anything started: no data dir, no dev server, no Anvil"
    assert "starting Temporal dev server" not in proc.stdout


@pytest.mark.parametrize("status", [
    'Status { code: Unavailable, message: "transport error", source: Some(tonic::transport::Error(Transport, '
    'hyper::Error(Io, Custom { kind: InvalidData, error: "received fatal alert: CertificateRequired" }))) }',
    'Status { code: Unknown, message: "h2 protocol error: error reading a body from connection" }',
    'Status { code: Cancelled, message: "operation was canceled", source: Some(tonic::transport::Error(Transport)) }',
])
def test_a_dropped_first_call_over_tls_without_a_client_certificate_names_client_cert(status):
    """A frontend that requires mTLS refuses a certificate-less client after the TLS 1.3 handshake: depending on
    timing the refusal reaches the client as any of these transport failures of its first call."""
    from workers.client import why_refused

    err = RuntimeError(f"Failed client connect: `get_system_info` call error after connection: {status}")
    why = why_refused(frontend({"address": "frontend.example:7233", "tls": True}, env={}), err)
    assert "[temporal] client_cert" in why, why
    # a key the server turned down is an answer, not a dropped connection: not blamed on a missing certificate
    denied = RuntimeError('Failed client connect: `get_system_info` call error after connection: Status { code: '
                          'PermissionDenied, message: "Request unauthorized." }')
    assert "client_cert" not in why_refused(frontend({"address": "frontend.example:7233", "tls": True}, env={}), denied)


async def test_a_frontend_not_healthy_yet_is_waited_for_like_one_not_listening(monkeypatch):
    """A dev server just started answers "Frontend is not healthy yet" for a moment (a backtest's own server failed
    its first connection so in the suite): connect() tries again within wait_seconds instead of failing."""
    from temporalio.client import Client

    from workers import client as client_mod

    starting = RuntimeError('Failed client connect: `get_system_info` call error after connection: Status { code: '
                            'Unavailable, message: "Frontend is not healthy yet", metadata: MetadataMap { headers: '
                            '{"content-type": "application/grpc"} }, source: None }')
    assert client_mod.why_refused(frontend({"address": "127.0.0.1:7233"}, env={}), starting) == client_mod.STARTING
    calls = []

    async def fake_connect(*args, **kwargs):  # the SDK's Client.connect: not healthy twice, then connected
        calls.append(args[0])
        if len(calls) < 3:
            raise starting
        return "client"

    monkeypatch.setattr(Client, "connect", fake_connect)
    real_sleep = client_mod.asyncio.sleep
    monkeypatch.setattr(client_mod.asyncio, "sleep", lambda s: real_sleep(0))
    assert await client_mod.connect("127.0.0.1:7233", wait_seconds=30.0) == "client" and len(calls) == 3
    calls.clear()
    with pytest.raises(client_mod.FrontendUnreachable, match="not healthy yet"):  # no waiting asked: fails at once
        await client_mod.connect("127.0.0.1:7233")
    assert len(calls) == 1
