"""The SDK's exceptions: every failure the server reports is an ApiError with its HTTP status,
canonical code (docs/api.md "Errors") and message; a client that cannot reach the server or is
not configured raises TransportError / ConfigError, all three GpupoolError."""


class GpupoolError(Exception):
    """Base class of every exception the SDK raises on purpose."""


class ConfigError(GpupoolError):
    """The SDK is not configured (no endpoint or keys), or its configuration cannot be read."""


class ApiError(GpupoolError):
    """The server answered with an error.

    status: the HTTP status (e.g. 400, 404, 409); code: the canonical code ("invalid_argument",
    "not_found", ...); message: the server's message, which names the offending field or value.
    """

    def __init__(self, status: int, code: str, message: str, method: str = "", path: str = ""):
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.method = method
        self.path = path


class TransportError(GpupoolError):
    """The server could not be reached (after the retries the client allows)."""
