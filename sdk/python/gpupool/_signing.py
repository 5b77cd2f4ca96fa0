"""Request signing: the GPUPOOL-HMAC-SHA256 scheme of docs/api.md "Authentication".

The canonical request is six lines joined by "\\n": METHOD, PATH (as sent), the canonical query,
hex(SHA-256(body)), the timestamp in ms and the nonce; the signature is the lower-case hex
HMAC-SHA256 of it under the secret key. Mirrors src/api/signing.cc byte for byte.
"""

import hashlib
import hmac
import secrets
import urllib.parse

AUTH_SCHEME = "GPUPOOL-HMAC-SHA256"
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~")


def percent_encode(data: bytes) -> str:
    """Every byte but A-Z a-z 0-9 - _ . ~ as %XX (upper-case hex)."""
    return "".join(chr(b) if b in _UNRESERVED else "%%%02X" % b for b in data)


def _decode(text: str) -> bytes:
    return urllib.parse.unquote_to_bytes(text.replace("+", " "))


def canonical_query(raw_query: str) -> str:
    """The query's parameters decoded, sorted by name then value, encoded again, joined by "&"."""
    params = []
    for piece in raw_query.split("&"):
        if not piece:
            continue
        name, _, value = piece.partition("=")
        params.append((_decode(name), _decode(value)))
    params.sort()
    return "&".join(percent_encode(n) + "=" + percent_encode(v) for n, v in params)


def canonical_request(method: str, path: str, raw_query: str, body: bytes, timestamp_ms: int,
                      nonce: str) -> str:
    return "\n".join([method, path, canonical_query(raw_query),
                      hashlib.sha256(body).hexdigest(), str(timestamp_ms), nonce])


def sign(secret_key: str, canonical: str) -> str:
    return hmac.new(secret_key.encode(), canonical.encode(), hashlib.sha256).hexdigest()


def authorization(access_key: str, secret_key: str, method: str, target: str, body: bytes,
                  timestamp_ms: int, nonce: str) -> str:
    """The Authorization header for a request to `target` (path and query, as sent)."""
    path, _, query = target.partition("?")
    signature = sign(secret_key,
                     canonical_request(method, path, query, body, timestamp_ms, nonce))
    return (f"{AUTH_SCHEME} Credential={access_key}, Timestamp={timestamp_ms}, "
            f"Nonce={nonce}, Signature={signature}")


def new_nonce() -> str:
    """32 random hex digits, as the C++ client uses."""
    return secrets.token_hex(16)
