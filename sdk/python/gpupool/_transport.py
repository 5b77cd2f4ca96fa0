"""The SDK's HTTP layer: one kept-alive connection per Client (guarded by a lock, so a Client may
be shared by threads), every request signed (_signing.py), errors turned into ApiError.

HTTPS: an https:// endpoint is verified — TLS 1.2 or later, the certificate checked against the
CA file given (`ca_file`, GPUPOOL_CA_FILE; for `gpupool server --tls-self-signed` the server's own
<data dir>/tls/cert.pem) or else the system's certificate store, and the host name checked. A
certificate that is not trusted is a TransportError saying how to trust it, never retried.

Retries (docs/api.md "Authentication", step 5): a request that failed before any response
arrived — the connection refused, reset or closed under it — is sent again, up to `retries`
times with a growing pause, with the *same* signature and nonce. A server that did receive the
first copy refuses the second as a replayed nonce instead of acting twice; the client then
reports that the first attempt may have been applied instead of a bare 401. Timeouts are not
retried: the server may still be working on the request; nor are TLS failures.
"""

import http.client
import json
import socket
import ssl
import threading
import time
import urllib.parse
from typing import Any, Dict, Iterable, Optional, Tuple, Union

from . import _signing
from .errors import ApiError, ConfigError, TransportError

Query = Union[None, Dict[str, Any], Iterable[Tuple[str, Any]]]

# ssl.SSLEOFError: a TLS connection closed under it (a kept-alive one the server dropped, or
# during the handshake); before the SSLError clause below, which is not retried.
_RETRYABLE = (ConnectionRefusedError, ConnectionResetError, ConnectionAbortedError,
              BrokenPipeError, http.client.RemoteDisconnected, http.client.BadStatusLine,
              ssl.SSLEOFError)


def parse_endpoint(endpoint: str) -> Tuple[str, str, int]:
    """(scheme, host, port) of "http://host:port" or "https://host:port" (ports 80 and 443 by
    default; no scheme means http)."""
    text = endpoint.strip()
    if "://" not in text:
        text = "http://" + text
    url = urllib.parse.urlsplit(text)
    if url.scheme not in ("http", "https"):
        raise ConfigError(f"endpoint '{endpoint}': the scheme must be http:// or https:// "
                          "(http://host:port or https://host:port)")
    if not url.hostname or (url.path not in ("", "/")) or url.query:
        raise ConfigError(f"endpoint '{endpoint}' must look like http://host:port or "
                          "https://host:port")
    try:
        port = url.port or (443 if url.scheme == "https" else 80)
    except ValueError as e:
        raise ConfigError(f"endpoint '{endpoint}': {e}") from e
    return url.scheme, url.hostname, port


def tls_context(ca_file: Optional[str], source: str = "",
                ca_pem: Optional[str] = None) -> ssl.SSLContext:
    """The context of https connections: certificates verified against `ca_file` (PEM), or the
    PEM text `ca_pem` (what the agent passes a task as GPUPOOL_CA_PEM), or the system's store
    when both are empty; host names checked; TLS 1.2 or later. A CA that cannot be read or holds
    no PEM certificate is a ConfigError naming it (and `source`, where it was found)."""
    where = f" ({source})" if source else ""
    if ca_pem:
        try:
            context = ssl.create_default_context(cadata=ca_pem)
        except (ssl.SSLError, ValueError) as e:
            raise ConfigError(f"the CA text{where} holds no PEM certificate ({e})") from e
        return _strict(context)
    try:
        context = ssl.create_default_context(cafile=ca_file or None)
    except ssl.SSLError as e:
        raise ConfigError(f"CA file '{ca_file}'{where} holds no PEM certificate "
                          f"({e.reason or e}): give the PEM file of the CA that signed the "
                          "server's certificate") from e
    except OSError as e:
        raise ConfigError(f"CA file '{ca_file}'{where} cannot be read: "
                          f"{e.strerror or e}") from e
    return _strict(context)


def _strict(context: ssl.SSLContext) -> ssl.SSLContext:
    # At least TLS 1.2 (Python >= 3.10's default), never below what the system asks for
    # (MINIMUM_SUPPORTED is -2).
    if context.minimum_version < ssl.TLSVersion.TLSv1_2:
        context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = True
    context.verify_mode = ssl.CERT_REQUIRED
    return context


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
                 retries: int = 3, backoff: float = 0.2, task_token: Optional[str] = None,
                 ca_file: Optional[str] = None, ca_source: str = "",
                 ca_pem: Optional[str] = None):
        """With task_token (a task's GPUPOOL_TASK_TOKEN) requests carry it instead of a
        signature: it reads that task's usage and metrics only. ca_file: the PEM CA that https
        certificates are verified against (the system's store when empty); ca_source says where
        it came from, for messages; ca_pem: the CA as PEM text instead of a file."""
        self.endpoint = endpoint
        self._task_token = task_token
        self._scheme, self._host, self._port = parse_endpoint(endpoint)
        self.ca_file = ca_file or ""
        self._ca_text_source = (ca_source or "the CA text given") if ca_pem else ""
        # Made (and the CA checked) at once, so a bad CA is reported here.
        self._tls = (tls_context(ca_file, ca_source, ca_pem)
                     if ca_file or ca_pem or self._scheme == "https" else None)
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
            except ssl.SSLCertVerificationError as e:
                # Before OSError (its base): an untrusted certificate stays untrusted.
                raise TransportError(f"{method} {target.split('?')[0]} to {self.endpoint}: "
                                     + self._untrusted(e)) from e
            except _RETRYABLE as e:
                if attempt >= self.retries:
                    hint = ""
                    if self._scheme == "http" and isinstance(e, http.client.RemoteDisconnected):
                        hint = ("; a server that serves HTTPS (gpupool server --tls-…) closes "
                                "plain HTTP connections: is the endpoint https://?")
                    raise TransportError(f"{method} {target.split('?')[0]} to {self.endpoint} "
                                         f"failed after {attempt + 1} attempts: {e!r}"
                                         + hint) from e
            except ssl.SSLError as e:
                raise TransportError(f"{method} {target.split('?')[0]} to {self.endpoint}: TLS "
                                     f"failed ({e.reason or e}); is the server serving HTTPS on "
                                     "that port?") from e
            except socket.timeout as e:
                raise TransportError(f"{method} {target.split('?')[0]} to {self.endpoint} "
                                     f"timed out after {timeout or self.timeout} s") from e
            except OSError as e:
                raise TransportError(f"{method} {target.split('?')[0]} to {self.endpoint} "
                                     f"failed: {e}") from e
            time.sleep(self.backoff * (2 ** attempt))
            attempt += 1

    def _untrusted(self, e: ssl.SSLCertVerificationError) -> str:
        what = e.verify_message or e.reason or str(e)
        against = (f"the CA file {self.ca_file}" if self.ca_file
                   else self._ca_text_source or "the system's certificate store")
        if e.verify_code in (62, 64):  # X509_V_ERR_HOSTNAME_MISMATCH, _IP_ADDRESS_MISMATCH
            return (f"the server's certificate was not trusted: it does not name "
                    f"{self._host} ({what}); connect with a name the certificate carries, or "
                    f"give the server a certificate for {self._host}")
        return (f"the server's certificate was not trusted ({what}, checked against {against})"
                f": pass ca_file= the PEM file of the CA that signed it, or set GPUPOOL_CA_FILE "
                f"(for a server started with --tls-self-signed: its <data dir>/tls/cert.pem)")

    def _exchange(self, method, target, data, headers, timeout) -> Response:
        if self._conn is None:
            if self._scheme == "https":
                self._conn = http.client.HTTPSConnection(self._host, self._port,
                                                         timeout=timeout or self.timeout,
                                                         context=self._tls)
            else:
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
