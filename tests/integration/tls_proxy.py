"""A TLS front for the Temporal dev server, which serves plaintext gRPC only: test certificates made at test time
(`cryptography`), and a TLS-terminating TCP proxy (asyncio + ssl, ALPN h2) passing the gRPC bytes through."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import ipaddress
import socket
import ssl
import threading
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass
class Pem:
    cert: Path
    key: Path


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _issue(folder: Path, name: str, *, ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None,
           sans: list[x509.GeneralName] | None = None, client: bool = False) -> tuple[Pem, x509.Certificate,
                                                                                      ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(subject).public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1)))
    if ca is None:  # self-signed CA
        builder = (builder.issuer_name(subject)
                   .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                   .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                                content_commitment=False, key_encipherment=False,
                                                data_encipherment=False, key_agreement=False, encipher_only=False,
                                                decipher_only=False), critical=True)
                   .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False))
        signer = key
    else:
        ca_cert, signer = ca
        usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
        builder = (builder.issuer_name(ca_cert.subject)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
                   .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(signer.public_key()),
                                  critical=False))
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(signer, hashes.SHA256())
    pem = Pem(folder / f"{name}.pem", folder / f"{name}-key.pem")
    pem.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pem.key.write_bytes(_key_pem(key))
    return pem, cert, key


@dataclass
class Pki:
    ca: Pem
    server: Pem
    client: Pem
    other_ca: Pem  # a CA that signed nothing here: a client trusting only it must be refused


def make_pki(folder: Path, server_name: str = "temporal.test") -> Pki:
    """A CA, a server certificate for server_name and 127.0.0.1, a client certificate, and an unrelated CA."""
    folder.mkdir(parents=True, exist_ok=True)
    ca_pem, ca_cert, ca_key = _issue(folder, "ca", ca=None)
    server, _, _ = _issue(folder, "server", ca=(ca_cert, ca_key),
                          sans=[x509.DNSName(server_name), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    client, _, _ = _issue(folder, "client", ca=(ca_cert, ca_key), client=True)
    other, _, _ = _issue(folder, "other-ca", ca=None)
    return Pki(ca_pem, server, client, other)


@dataclass
class TlsProxy:
    """TLS on 127.0.0.1:port in front of target (host:port); require_client_cert: mTLS against client_ca."""

    target: str
    server: Pem
    client_ca: Path | None = None
    port: int = 0
    handshakes: list[str] = field(default_factory=list)  # "ok" or the handshake's failure, per connection
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _task: asyncio.Task[None] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.server.cert, self.server.key)
        ctx.set_alpn_protocols(["h2"])  # gRPC speaks HTTP/2
        if self.client_ca is not None:
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(self.client_ca)
        return ctx

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, ssl.SSLError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def _handle(self, raw: socket.socket) -> None:
        ctx = self._context()
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        protocol = asyncio.StreamReaderProtocol(reader)
        try:  # the handshake by hand, so a refused one is recorded (asyncio's server would only log it)
            transport, _ = await loop.connect_accepted_socket(lambda: protocol, raw, ssl=ctx, ssl_handshake_timeout=10)
        except (ssl.SSLError, ConnectionError, OSError, asyncio.TimeoutError) as err:
            self.handshakes.append(f"refused: {err}")
            raw.close()
            return
        self.handshakes.append("ok")
        writer = asyncio.StreamWriter(transport, protocol, reader, loop)
        host, port = self.target.rsplit(":", 1)
        try:
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
        except OSError:
            writer.close()
            return
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    async def _serve(self, ready: threading.Event) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        listener.setblocking(False)
        self.port = listener.getsockname()[1]
        loop = asyncio.get_running_loop()
        ready.set()
        tasks: set[asyncio.Task[None]] = set()
        try:
            while True:
                conn, _ = await loop.sock_accept(listener)
                task = loop.create_task(self._handle(conn))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        finally:
            listener.close()
            for task in tasks:
                task.cancel()

    def start(self) -> TlsProxy:
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        def run() -> None:
            assert self._loop is not None
            asyncio.set_event_loop(self._loop)
            self._task = self._loop.create_task(self._serve(ready))
            with contextlib.suppress(asyncio.CancelledError):
                self._loop.run_until_complete(self._task)
            left = asyncio.all_tasks(self._loop)  # the connections still piping
            for task in left:
                task.cancel()
            self._loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
            self._loop.close()

        self._thread = threading.Thread(target=run, name="tls-proxy", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the TLS proxy did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            if self._task is not None:
                self._loop.call_soon_threadsafe(self._task.cancel)
            self._thread.join(10)
