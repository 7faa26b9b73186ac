"""A lean HTTP JSON-RPC provider for the dev chain's driver: web3's HTTPProvider with the post done by http.client on
one kept-alive connection per thread, headers and body in one send. requests' stack cost ~0.6 ms of CPU per call
here (0.06 ms this way), and a replay row makes a dozen calls (docs/design/backtest.md#speed)."""

from __future__ import annotations

import http.client
import threading
from typing import Any
from urllib.parse import urlsplit

from web3 import Web3
from web3.providers.rpc import HTTPProvider

# a reused keep-alive connection the node closed meanwhile fails before any answer: the post is made again, once
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, http.client.CannotSendRequest)


class _OneSend(http.client.HTTPConnection):
    """Headers and body in one send (3.11's http.client sends them apart: two wake-ups of the node per call)."""

    def _send_output(self, message_body: Any = None, encode_chunked: bool = False) -> None:
        self._buffer.extend((b"", b""))  # type: ignore[attr-defined]
        head = b"\r\n".join(self._buffer)  # type: ignore[attr-defined]
        del self._buffer[:]  # type: ignore[attr-defined]
        self.send(head + bytes(message_body or b""))


class LeanHTTPProvider(HTTPProvider):
    """Same encoding, decoding, batching and errors as HTTPProvider; only the transport differs."""

    def __init__(self, endpoint_uri: str, timeout: float) -> None:
        super().__init__(endpoint_uri, request_kwargs={"timeout": timeout})
        url = urlsplit(endpoint_uri)
        if url.scheme != "http" or not url.hostname:
            raise ValueError(f"LeanHTTPProvider speaks plain http to a dev node, got {endpoint_uri!r}")
        self._host, self._port, self._path = url.hostname, url.port or 80, url.path or "/"
        self._timeout = timeout
        self._local = threading.local()
        self._headers = {**self.get_request_headers(), "Connection": "keep-alive"}

    def _connection(self) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = _OneSend(self._host, self._port, timeout=self._timeout)
        return conn

    def _post(self, data: bytes) -> bytes:
        for attempt in (0, 1):
            conn = self._connection()
            reused = conn.sock is not None
            try:
                conn.request("POST", self._path, body=data, headers=self._headers)
                response = conn.getresponse()
                body = response.read()
            except _STALE:
                conn.close()
                self._local.conn = None
                if attempt or not reused:
                    raise
                continue
            except BaseException:
                conn.close()  # a timeout or an interrupt mid-answer: the next call starts on a new connection
                self._local.conn = None
                raise
            if response.status != 200:
                raise http.client.HTTPException(f"{self.endpoint_uri} answered HTTP {response.status}: {body[:200]!r}")
            return body
        raise AssertionError("unreachable")

    def _make_request(self, method: Any, request_data: bytes) -> bytes:
        return self._post(request_data)

    def make_batch_request(self, batch_requests: list[tuple[Any, Any]]) -> Any:
        response = self.decode_rpc_response(self._post(self.encode_batch_rpc_request(batch_requests)))
        if not isinstance(response, list):
            return response  # a whole-batch error comes back as one object
        return sorted(response, key=lambda r: int(r.get("id", 0)))


def lean_web3(rpc_url: str, timeout: float = 10.0) -> Web3:
    return Web3(LeanHTTPProvider(rpc_url, timeout))
