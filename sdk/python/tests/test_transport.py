"""The HTTP layer against a scripted server on a local socket: errors become ApiError with the
server's code and message, and a request whose connection dies before any answer is sent again
with the same signature (so that a server that did get it refuses the copy as a replay)."""

import json
import socket
import threading
import unittest

from gpupool import _transport
from gpupool.errors import ApiError, ConfigError, TransportError


class ScriptedServer:
    """Answers each connection's first request with the next action: None closes the
    connection without an answer, (status, body) answers it."""

    def __init__(self, actions):
        self.actions = list(actions)
        self.requests = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        for action in self.actions:
            conn, _ = self.sock.accept()
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, rest = data.partition(b"\r\n\r\n")
                headers = dict(line.split(": ", 1) for line in head.decode().split("\r\n")[1:])
                length = int(headers.get("Content-Length", "0"))
                while len(rest) < length:
                    rest += conn.recv(65536)
                self.requests.append((head.decode().split("\r\n")[0], headers, rest))
                if action is None:
                    continue
                status, body = action
                payload = json.dumps(body).encode()
                conn.sendall(b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\nConnection: close\r\n\r\n%s"
                             % (status, len(payload), payload))

    def close(self):
        self.sock.close()


class TransportTest(unittest.TestCase):
    def transport(self, server, retries=3):
        return _transport.Transport(f"http://127.0.0.1:{server.port}", "AK1", "SK1",
                                    timeout=5, retries=retries, backoff=0.01)

    def test_an_error_answer_is_an_api_error_with_the_servers_message(self):
        server = ScriptedServer([(400, {"error": {"code": "invalid_argument",
                                                  "message": "unknown field 'gpu_cnt'"}})])
        with self.assertRaises(ApiError) as caught:
            self.transport(server).request("POST", "/v1/tasks", body={"gpu_cnt": 1})
        self.assertEqual((caught.exception.status, caught.exception.code,
                          caught.exception.message),
                         (400, "invalid_argument", "unknown field 'gpu_cnt'"))
        server.close()

    def test_a_dropped_connection_is_retried_with_the_same_signature(self):
        server = ScriptedServer([None, None, (201, {"id": "t-1"})])
        r = self.transport(server).request("POST", "/v1/tasks", query={"x": "a b"},
                                           body={"command": ["true"]})
        self.assertEqual(r.json(), {"id": "t-1"})
        server.thread.join(5)
        self.assertEqual(len(server.requests), 3)
        auth = {h["Authorization"] for _, h, _ in server.requests}
        self.assertEqual(len(auth), 1, "every copy carries the one signature and nonce")
        self.assertEqual(server.requests[0][0], "POST /v1/tasks?x=a%20b HTTP/1.1")
        self.assertEqual(server.requests[0][2], b'{"command":["true"]}')
        server.close()

    def test_a_replay_refusal_after_a_retry_says_the_first_copy_may_have_acted(self):
        server = ScriptedServer([None, (401, {"error": {
            "code": "unauthenticated",
            "message": "nonce abc was already used: a replayed request is refused"}})])
        with self.assertRaisesRegex(ApiError, "may have been applied"):
            self.transport(server).request("POST", "/v1/tasks", body={})
        server.close()

    def test_gives_up_after_the_retries(self):
        server = ScriptedServer([None, None])
        with self.assertRaisesRegex(TransportError, "failed after 2 attempts"):
            self.transport(server, retries=1).request("GET", "/v1/whoami")
        server.close()

    def test_endpoints(self):
        parse = _transport.parse_endpoint
        self.assertEqual(parse("http://10.0.0.1:8640"), ("http", "10.0.0.1", 8640))
        self.assertEqual(parse("pool.lab:8640"), ("http", "pool.lab", 8640))
        self.assertEqual(parse("http://pool.lab"), ("http", "pool.lab", 80))
        self.assertEqual(parse("https://pool.lab:8640"), ("https", "pool.lab", 8640))
        self.assertEqual(parse("https://pool.lab/"), ("https", "pool.lab", 443))
        self.assertEqual(parse(" HTTPS://[::1]:8640 "), ("https", "::1", 8640))
        for bad in ("ftp://pool.lab", "unix:///run/gpupool.sock"):
            with self.assertRaisesRegex(ConfigError, r"http://host:port or https://host:port"):
                parse(bad)
        with self.assertRaisesRegex(ConfigError, "must look like http://host:port or "
                                                 "https://host:port"):
            parse("https://pool.lab:8640/v1")
        with self.assertRaisesRegex(ConfigError, "endpoint 'https://pool.lab:x'"):
            parse("https://pool.lab:x")

    def test_a_plain_http_server_is_not_given_a_ca(self):
        server = ScriptedServer([(200, {"ok": True})])
        t = self.transport(server)
        self.assertIsNone(t._tls)
        self.assertEqual(t.request("GET", "/healthz").json(), {"ok": True})
        server.close()

    def test_query_encoding(self):
        self.assertEqual(_transport.encode_query({"state": ["running", "pending"], "after": None,
                                                  "hold": True, "path": "a b/c"}),
                         "state=running%2Cpending&hold=true&path=a%20b%2Fc")


if __name__ == "__main__":
    unittest.main()
