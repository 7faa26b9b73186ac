"""Temporal client construction: the one place that connects (the project's data converter everywhere).

Which frontend, namespace, TLS and API key come from golem.toml's [temporal] section with GOLEM_TEMPORAL_<KEY>
environment overrides (docs/how-to/fleet.md); a bare address (a backtest's own dev server) connects in plain."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from temporalio.client import Client, Interceptor
from temporalio.converter import DataConverter, PayloadCodec
from temporalio.runtime import Runtime
from temporalio.service import TLSConfig

from golem.errors import UserError
from workers.converter import data_converter as lean_converter

if TYPE_CHECKING:
    from temporalio.runtime import LoggingConfig

    from golem.models.config import TemporalSection

DEFAULT_ADDRESS = "127.0.0.1:7233"
NAMESPACE = "default"
ENV_PREFIX = "GOLEM_TEMPORAL_"

log = logging.getLogger(__name__)


def core_logging() -> "LoggingConfig":
    """The Temporal core's own log lines (e.g. "Workflow task duration exceeded 5 seconds") through Python's logging
    (logger temporalio.core, so stderr or the worker's log), not the core's console writer, which prints to stdout
    and broke `golem backtest --json` output on a loaded machine."""
    from temporalio.runtime import LogForwardingConfig, LoggingConfig, TelemetryFilter

    return LoggingConfig(filter=TelemetryFilter(core_level="WARN", other_level="ERROR"),
                         forwarding=LogForwardingConfig(logger=logging.getLogger("temporalio.core")))


def install_default_runtime() -> None:
    """Make the process's default Temporal Runtime log through Python (core_logging); once, before any client."""
    from temporalio.runtime import TelemetryConfig

    Runtime.set_default(Runtime(telemetry=TelemetryConfig(logging=core_logging())), error_if_already_set=False)


class TemporalConfigError(UserError):
    """A [temporal] setting (or its GOLEM_TEMPORAL_* override) that cannot work; the message names the key."""


class FrontendUnreachable(UserError):
    """No Temporal frontend answered at the configured address (or it refused this client); names the address."""


def temporal_address() -> str:
    return os.environ.get("GOLEM_TEMPORAL_ADDRESS", DEFAULT_ADDRESS)


@dataclass(frozen=True)
class Frontend:
    """A resolved connection: the certificates read, the API key taken from its environment variable."""

    address: str
    namespace: str = NAMESPACE
    tls: TLSConfig | bool = False
    api_key: str | None = field(default=None, repr=False)  # never printed, logged or recorded
    api_key_env: str | None = None
    remote: bool = False  # an address was configured: `golem run` starts no dev server of its own

    def describe(self) -> str:
        how = "plain" if self.tls is False else "TLS"
        if isinstance(self.tls, TLSConfig) and self.tls.client_cert:
            how = "mTLS"
        if self.api_key:
            how += f", API key from ${self.api_key_env}"
        return f"{self.address} (namespace {self.namespace}, {how})"


def env_key(key: str) -> str:
    return ENV_PREFIX + key.upper()


def _name(key: str) -> str:
    return f"[temporal] {key} ({env_key(key)})"


def _read_pem(key: str, path: str, *, private: bool = False) -> bytes:
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise TemporalConfigError(f"{_name(key)}: no file at {p}: fix the path (relative paths resolve against "
                                  "golem.toml's folder)") from None
    except OSError as err:
        raise TemporalConfigError(f"{_name(key)}: cannot read {p} ({err.strerror or err})") from None
    marker = b"PRIVATE KEY-----" if private else b"-----BEGIN CERTIFICATE-----"
    if marker not in data:
        what = "a PEM private key" if private else "a PEM certificate"
        raise TemporalConfigError(f"{_name(key)}: {p} is not {what}: point it at the .pem file")
    return data


def frontend(section: TemporalSection | Mapping[str, Any] | None = None, *, address: str | None = None,
             env: Mapping[str, str] | None = None) -> Frontend:
    """The frontend to connect to: [temporal] (validated, or its raw table, or the defaults), then GOLEM_TEMPORAL_<KEY>
    from env, then an explicit address (--address). The certificate files and the API key are read here, so a bad
    setting fails before any connection, naming its key."""
    from pydantic import BaseModel, ValidationError

    from golem.models.config import TemporalSection

    env = os.environ if env is None else env
    if isinstance(section, BaseModel):
        values = section.model_dump(exclude_unset=True)
    elif section is None or isinstance(section, Mapping):
        values = dict(section or {})
    else:
        raise TemporalConfigError(f"[temporal] must be a table of keys, not {section!r}")
    for key, spec in TemporalSection.model_fields.items():
        raw = env.get(env_key(key))
        if raw is None or raw == "":
            continue
        if spec.annotation in (bool, bool | None):
            if raw.lower() not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                raise TemporalConfigError(f"{env_key(key)}={raw!r}: use true or false")
            values[key] = raw.lower() in ("1", "true", "yes", "on")
        else:
            values[key] = raw
    if address:
        values["address"] = address
    try:
        cfg = TemporalSection.model_validate(values)
    except ValidationError as err:
        problems = "; ".join(
            e["msg"].removeprefix("Value error, ") if str(e["msg"]).startswith("Value error, [temporal]")
            else f"{_name('.'.join(str(x) for x in e['loc']))}: {e['msg']}" for e in err.errors())
        raise TemporalConfigError(problems) from None
    ca = _read_pem("server_ca_cert", cfg.server_ca_cert) if cfg.server_ca_cert else None
    cert = _read_pem("client_cert", cfg.client_cert) if cfg.client_cert else None
    private = _read_pem("client_key", cfg.client_key, private=True) if cfg.client_key else None
    api_key = None
    if cfg.api_key_env:
        api_key = env.get(cfg.api_key_env, "").strip()
        if not api_key:
            raise TemporalConfigError(f"{_name('api_key_env')} names ${cfg.api_key_env}, which is not set in this "
                                      "process's environment: export the API key there (never in golem.toml)")
    on = cfg.tls if cfg.tls is not None else bool(ca or cert or cfg.server_name or api_key)
    tls: TLSConfig | bool = False
    if on:
        tls = TLSConfig(server_root_ca_cert=ca, domain=cfg.server_name, client_cert=cert, client_private_key=private) \
            if (ca or cert or cfg.server_name) else True
    return Frontend(address=cfg.address or DEFAULT_ADDRESS, namespace=cfg.namespace, tls=tls, api_key=api_key,
                    api_key_env=cfg.api_key_env, remote=cfg.address is not None)


def data_converter(codec: PayloadCodec | None = None) -> DataConverter:
    """Pydantic JSON without default-valued fields (workers/converter.py), sealed with AES-GCM when
    GOLEM_PAYLOAD_KEYS is set (workers/codec.py; off by default)."""
    from workers.codec import codec_from_env, with_codec

    return with_codec(lean_converter, codec if codec is not None else codec_from_env())


STARTING = "the frontend is starting (not healthy yet)"  # a dev server just started: waiting mends it


def why_refused(target: Frontend, err: BaseException) -> str:
    """One line on why the connection failed, with the setting most likely to fix it."""
    text = " ".join(str(err).split())
    low = text.lower()
    if "connection refused" in low:
        return "connection refused"
    if "not healthy yet" in low:
        return STARTING
    if any(s in low for s in ("dns error", "failed to lookup", "name or service not known")):
        return f"cannot resolve the host: check {_name('address')}"
    if "unknownissuer" in low.replace(" ", "") or "unknown issuer" in low or "certificate verify" in low:
        return (f"the frontend's certificate is not signed by a CA this client trusts: set {_name('server_ca_cert')} "
                "to the CA that signed it")
    if "notvalidforname" in low.replace(" ", "") or "not valid for name" in low:
        return f"the frontend's certificate does not carry this host name: set {_name('server_name')}"
    if "certificate required" in low or "certificaterequired" in low.replace(" ", ""):
        return f"the frontend requires a client certificate (mTLS): set {_name('client_cert')} and client_key"
    if target.tls is not False and any(s in low for s in ("invalidcontenttype", "corrupt message", "wrong version",
                                                           "invalid content type")):
        return f"the frontend does not speak TLS: set {_name('tls')} = false, or check the address"
    mtls = isinstance(target.tls, TLSConfig) and bool(target.tls.client_cert)
    # TLS 1.3: the client's handshake completes before the server checks its certificate, so a refused one shows as
    # the connection closing under the first call (how depends on timing)
    if target.tls is not False and not mtls and any(s in low for s in (
            "unexpectedeof", "peer closed connection", "connection closed", "broken pipe", "connection reset")):
        return (f"the frontend closed the TLS connection, as one that requires client certificates (mTLS) does: set "
                f"{_name('client_cert')} and {_name('client_key')}")
    # the same refusal seen later: the connection stood, then its first call failed at the transport (not an answer
    # of the server's such as PermissionDenied for a key)
    if target.tls is not False and not mtls and "call error after connection" in low and not any(
            s in low for s in ("permissiondenied", "unauthenticated", "notfound", "invalidargument")):
        return (f"the frontend dropped the first call over TLS, as one that requires client certificates (mTLS) does: "
                f"set {_name('client_cert')} and {_name('client_key')} ({text[:200]})")
    if target.tls is False and any(s in low for s in ("connection reset", "broken pipe", "h2 protocol error",
                                                       "frame with invalid size", "connection closed")):
        return (f"the frontend closed a plaintext connection, as a TLS-only frontend does: set {_name('tls')} = true "
                f"(and {_name('server_ca_cert')} for a private CA). ({text[:160]})")
    return text[:240]


async def connect(address: str | None = None, *, target: Frontend | None = None,
                  interceptors: Sequence[Interceptor] = (), runtime: Runtime | None = None,
                  codec: PayloadCodec | None = None, wait_seconds: float = 0.0) -> Client:
    """A client on target (from frontend()), or in plain on address (GOLEM_TEMPORAL_ADDRESS, else the default) when
    no target is given: a backtest's or a test's own dev server. FrontendUnreachable names the address and why.

    wait_seconds: a frontend that refuses the connection (not listening: a dev server being restarted) or is not
    healthy yet (just started) is tried again every second for this long; any other refusal (TLS, a key) fails at once, since waiting cannot mend it."""
    target = target if target is not None else Frontend(address or temporal_address())
    converter = data_converter(codec)  # a bad GOLEM_PAYLOAD_KEYS fails here, with its own message
    deadline = time.monotonic() + max(wait_seconds, 0.0)
    said = False
    while True:
        try:
            return await Client.connect(
                target.address,
                namespace=target.namespace,
                api_key=target.api_key,
                tls=target.tls,
                data_converter=converter,
                interceptors=list(interceptors),
                runtime=runtime,  # None: the SDK's default Runtime; the worker's serves the SDK's metrics
            )
        except RuntimeError as err:  # the SDK's core reports a failed connection as RuntimeError("Failed client connect: …")
            why = why_refused(target, err)
            if why not in ("connection refused", STARTING) or time.monotonic() >= deadline:
                raise FrontendUnreachable(f"cannot reach Temporal at {target.describe()}: {why}") from None
            if not said:
                log.warning("Temporal at %s refuses connections (not up yet?): trying again for up to %.0fs",
                            target.describe(), deadline - time.monotonic())
                said = True
            await asyncio.sleep(1.0)


async def golem_queue(client: Client, golem_id: str) -> str:
    """The task queue a golem's workflows run on: its running GolemWorkflow's (its host's, or golem-<id> for a
    single-golem worker); golem-<id> when it is not running."""
    from temporalio.service import RPCError

    from golem.ids import golem_workflow_id, task_queue

    try:
        return (await client.get_workflow_handle(golem_workflow_id(golem_id)).describe()).task_queue
    except RPCError:
        return task_queue(golem_id)
