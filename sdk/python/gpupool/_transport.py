"""The SDK's HTTP layer: one kept-alive connection per Client (guarded by a lock, so a Client may
be shared by threads), every request signed (_signing.py), errors turned into ApiError.

Retries (docs/api.md "Authentication", step 5): a request that failed before any response
arrived — the connection refused, reset or closed under it — is sent again, up to `retries`
times with a growing pause, with the *same* signature and nonce. A server that did receive the
first copy refuses the second as a replayed nonce instead of acting twice; the client then
reports that the first attempt may have been applied instead of a bare 401. Timeouts are not
retried: the server may still be working on the request.
"""

import http.client
import json
import socket
import threading
import time
import urllib.parse
from typing import Any, Dict, Iterable, Optional, Tuple, Union

from . import _signing
from .errors import ApiError, ConfigError, TransportError

Query = Union[None, Dict[str, Any], Iterable[Tuple[str, Any]]]

_RETRYABLE = (ConnectionRefusedError, ConnectionResetError, ConnectionAbortedError,
              BrokenPipeError, http.client.RemoteDisconnected, http.client.BadStatusLine)


def parse_endpoint(endpoint: str) -> Tuple[str, int]:
    text = endpoint.strip()
    if "://" not in text:
        text = "http://" + text
    url = urllib.parse.urlsplit(text)
    if url.scheme != "http":
        raise ConfigError(f"endpoint '{endpoint}': only http:// is supported "
                          "(put a TLS proxy in front of the server for https)")
    if not url.hostname or (url.path not in ("", "/")) or url.query:
        raise ConfigError(f"endpoint '{endpoint}' must look like http://host:port")
    try:
        port = url.port or 80
    except ValueError as e:
        raise ConfigError(f"endpoint '{endpoint}': {e}") from e
    return url.hostname, port


def encode_query(query: Query) -> str:
    """name=value pairs percent-encoded; lists become comma lists; None values are left out."""
    if not query:
        return ""
    items = query.items() if isinstance(query, dict) else query
    pairs = []
    for name, value in items:
        if value is None:
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, (list, tuple)):
            value = ",".join(str(v) for v in value)
        pairs.append(_signing.percent_encode(str(name).encode()) + "=" +
                     _signing.percent_encode(str(value).encode()))
    return "&".join(pairs)


class Response:
    def __init__(self, status: int, headers: Dict[str, str], body: bytes):
        self.status = status
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


class Transport:
    def __init__(self, endpoint: str, access_key: str, secret_key: str, timeout: float = 30.0,
                 retries: int = 3, backoff: float = 0.2, task_token: Optional[str] = None):
        """With task_token (a task's GPUPOOL_TASK_TOKEN) requests carry it instead of a
        signature: it reads that task's usage and metrics only."""
        self.endpoint = endpoint
        self._task_token = task_token
        self._host, self._port = parse_endpoint(endpoint)
        self._access_key = access_key
        self._secret_key = secret_key
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self._lock = threading.Lock()
        self._conn: Optional[http.client.HTTPConnection] = None

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def request(self, method: str, path: str, query: Query = None, body: Any = None,
                raw: Optional[bytes] = None, timeout: Optional[float] = None) -> Response:
        """Sends a signed request; `body` is JSON-encoded, `raw` sent as octets. Raises ApiError
        for a non-2xx answer and TransportError when the server cannot be reached."""
        target = urllib.parse.quote(path, safe="/-_.~")
        q = encode_query(query)
        if q:
            target += "?" + q
        headers = {"User-Agent": "gpupool-python"}
        if raw is not None:
            data = raw
            headers["Content-Type"] = "application/octet-stream"
        elif body is not None:
            data = json.dumps(body, separators=(",", ":")).encode()
            headers["Content-Type"] = "application/json"
        else:
            data = b""
        if self._task_token:
            headers["Authorization"] = "GPUPOOL-TASK " + self._task_token
        else:
            headers["Authorization"] = _signing.authorization(
                self._access_key, self._secret_key, method, target, data,
                int(time.time() * 1000), _signing.new_nonce())
        response, resent = self._send(method, target, data, headers, timeout)
        if 200 <= response.status < 300:
            return response
        raise self._error(response, method, path, resent)

    def _send(self, method, target, data, headers, timeout) -> Tuple[Response, bool]:
        attempt = 0
        while True:
            try:
                with self._lock:
                    return self._exchange(method, target, data, headers, timeout), attempt > 0
            except _RETRYABLE as e:
                if attempt >= self.retries:
                    raise TransportError(f"{method} {target.split('?')[0]} to {self.endpoint} "
                                         f"failed after {attempt + 1} attempts: {e!r}") from e
            except socket.timeout as e:
                raise TransportError(f"{method} {target.split('?')[0]} to {self.endpoint} "
                                     f"timed out after {timeout or self.timeout} s") from e
            except OSError as e:
                raise TransportError(f"{method} {target.split('?')[0]} to {self.endpoint} "
                                     f"failed: {e}") from e
            time.sleep(self.backoff * (2 ** attempt))
            attempt += 1

    def _exchange(self, method, target, data, headers, timeout) -> Response:
        if self._conn is None:
            self._conn = http.client.HTTPConnection(self._host, self._port,
                                                    timeout=timeout or self.timeout)
        conn = self._conn
        conn.timeout = timeout or self.timeout
        if conn.sock is not None:
            conn.sock.settimeout(conn.timeout)
        try:
            conn.request(method, target, body=data, headers=headers)
            r = conn.getresponse()
            body = r.read()
        except BaseException:
            conn.close()
            self._conn = None
            raise
        if r.getheader("Connection", "").lower() == "close":
            conn.close()
            self._conn = None
        return Response(r.status, {k.lower(): v for k, v in r.getheaders()}, body)

    @staticmethod
    def _error(response: Response, method: str, path: str, resent: bool) -> ApiError:
        code, message = "unknown", response.body.decode("utf-8", "replace")[:500]
        try:
            detail = json.loads(response.body)["error"]
            code, message = detail["code"], detail["message"]
        except (ValueError, KeyError, TypeError):
            pass
        if resent and response.status == 401 and "already used" in message:
            message = ("the connection failed after the request was sent, and the server had "
                       "received it: it may have been applied (" + message + ")")
        return ApiError(response.status, code, message, method, path)
