"""HTTPS against a small HTTPS server made here (ssl + http.server) with certificates made by the
openssl command line: a server whose certificate chains to the CA file given — or is that file,
as with `gpupool server --tls-self-signed` — is reached; one that is not trusted (no CA file,
another CA) or whose certificate names another host is a TransportError saying why and how to fix
it, sent once, not retried; a CA file that cannot be used is a ConfigError naming it."""

import http.server
import json
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import unittest
from unittest import mock

import gpupool
from gpupool import _transport
from gpupool.errors import ConfigError, TransportError

OPENSSL = shutil.which("openssl")

# Extensions as a real CA and server certificate have them (Python 3.13's strict checks want
# the key identifiers).
OPENSSL_CONFIG = """\
[req]
distinguished_name = dn
prompt = no
[dn]
CN = gpupool test
[ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[server]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = $ENV::SAN
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
"""

CERTS = ""  # the temporary directory of the certificates below


def openssl(*args, san="DNS:unused"):
    subprocess.run([OPENSSL, *args], cwd=CERTS, env=dict(os.environ, SAN=san), check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def make_ca(name):
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2",
            "-subj", f"/CN=gpupool test {name}", "-config", "openssl.cnf", "-extensions", "ca")


def make_server_cert(name, san, ca):
    openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}",
            "-config", "openssl.cnf", san=san)
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
            "-set_serial", "0x" + os.urandom(8).hex(), "-days", "2", "-out", f"{name}.pem",
            "-extfile", "openssl.cnf", "-extensions", "server", san=san)


def make_self_signed(name, san):
    """What `gpupool server --tls-self-signed` makes: a self-signed server certificate that is
    its own CA file."""
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2", "-subj", "/CN=localhost",
            "-config", "openssl.cnf", "-extensions", "server", san=san)


def cert(name):
    return os.path.join(CERTS, name + ".pem")


def setUpModule():
    global CERTS  # pylint: disable=global-statement
    if OPENSSL is None:
        raise unittest.SkipTest("no openssl command to make the test certificates")
    CERTS = tempfile.mkdtemp(prefix="gpupool-tls-")
    with open(os.path.join(CERTS, "openssl.cnf"), "w", encoding="utf-8") as f:
        f.write(OPENSSL_CONFIG)
    make_ca("ca")
    make_ca("other-ca")
    make_server_cert("server", "IP:127.0.0.1,DNS:localhost", "ca")
    make_server_cert("elsewhere", "DNS:pool.example", "ca")
    make_self_signed("self", "DNS:localhost,IP:127.0.0.1,IP:::1")
    with open(os.path.join(CERTS, "notes.txt"), "w", encoding="utf-8") as f:
        f.write("not a certificate\n")


def tearDownModule():
    if CERTS:
        shutil.rmtree(CERTS, ignore_errors=True)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # kept alive, as the SDK's connection is

    def do_GET(self):
        self.server.seen.append({"path": self.path, "tls": self.request.version(),
                                 "authorization": self.headers.get("Authorization", "")})
        body = json.dumps({"path": self.path, "latest": {"val_acc": 0.9}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class HttpsServer(http.server.ThreadingHTTPServer):
    """Serves Handler over TLS with the certificate `name`; counts the connections it accepts
    (one per attempt of the client)."""
    daemon_threads = True

    def __init__(self, name):
        super().__init__(("127.0.0.1", 0), Handler)
        self.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.tls.load_cert_chain(cert(name), os.path.join(CERTS, name + ".key"))
        self.connections = 0
        self.seen = []
        self.failures = []
        self.port = self.server_address[1]
        self.thread = threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def get_request(self):
        sock, address = self.socket.accept()
        self.connections += 1
        # The handshake happens in the handler's thread, at its first read.
        return self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), address

    def handle_error(self, request, client_address):
        self.failures.append(client_address)  # a refused handshake: expected here, not printed

    def close(self):
        self.shutdown()
        self.server_close()


class TlsTest(unittest.TestCase):
    def serve(self, name="server"):
        server = HttpsServer(name)
        self.addCleanup(server.close)
        return server

    def transport(self, endpoint, ca_file=None, retries=3):
        t = _transport.Transport(endpoint, "AK1", "SK1", timeout=5, retries=retries,
                                 backoff=0.01, ca_file=ca_file)
        self.addCleanup(t.close)
        return t

    def assert_refused_once(self, server, endpoint, ca_file, pattern):
        """The request fails with a TransportError matching `pattern`, caused by the
        certificate check, after one connection: no retry."""
        with self.assertRaisesRegex(TransportError, pattern) as caught:
            self.transport(endpoint, ca_file).request("GET", "/v1/whoami")
        self.assertIsInstance(caught.exception.__cause__, ssl.SSLCertVerificationError)
        self.assertEqual(server.connections, 1, "a certificate failure is not retried")
        self.assertEqual(server.seen, [], "no request went out")
        return caught.exception

    def test_a_server_whose_certificate_chains_to_the_ca_file_is_reached(self):
        server = self.serve()
        client = gpupool.Client(endpoint=f"https://127.0.0.1:{server.port}", access_key="AK1",
                                secret_key="SK1", ca_file=cert("ca"))
        self.addCleanup(client.close)
        self.assertEqual(client.ca_file, cert("ca"))
        self.assertEqual(client.whoami()["path"], "/v1/whoami")
        self.assertEqual(client._call("GET", "/v1/tasks/t-1")["path"], "/v1/tasks/t-1")
        self.assertEqual(server.connections, 1, "both requests went over one kept-alive "
                                                "connection")
        self.assertIn(server.seen[0]["tls"], ("TLSv1.2", "TLSv1.3"))
        self.assertIn("Credential=AK1,", server.seen[0]["authorization"], "signed as over http")
        # The same server by the other name its certificate carries.
        by_name = self.transport(f"https://localhost:{server.port}", cert("ca"))
        self.assertEqual(by_name.request("GET", "/healthz").json()["path"], "/healthz")

    def test_a_self_signed_certificate_is_its_own_ca_file(self):
        server = self.serve("self")
        for host in ("127.0.0.1", "localhost"):
            t = self.transport(f"https://{host}:{server.port}", cert("self"))
            self.assertEqual(t.request("GET", "/healthz").json()["path"], "/healthz")

    def test_without_a_ca_file_an_unknown_ca_is_not_trusted_and_not_retried(self):
        server = self.serve()
        e = self.assert_refused_once(server, f"https://127.0.0.1:{server.port}", None,
                                     "certificate was not trusted")
        message = str(e)
        self.assertIn("checked against the system's certificate store", message)
        self.assertIn("pass ca_file=", message)
        self.assertIn("GPUPOOL_CA_FILE", message)
        self.assertIn("--tls-self-signed: its <data dir>/tls/cert.pem", message)

    def test_another_ca_is_not_trusted_and_not_retried(self):
        server = self.serve()
        self.assert_refused_once(server, f"https://127.0.0.1:{server.port}", cert("other-ca"),
                                 r"certificate was not trusted \(.*checked against the CA "
                                 rf"file {cert('other-ca')}\): pass ca_file=.*GPUPOOL_CA_FILE")

    def test_a_certificate_for_another_host_is_refused(self):
        server = self.serve("elsewhere")  # signed by the trusted CA, for pool.example only
        self.assert_refused_once(server, f"https://127.0.0.1:{server.port}", cert("ca"),
                                 "certificate was not trusted: it does not name 127.0.0.1")
        server.connections = 0
        self.assert_refused_once(server, f"https://localhost:{server.port}", cert("ca"),
                                 "it does not name localhost")

    def test_client_takes_the_endpoint_and_ca_of_a_pools_credentials_env(self):
        server = self.serve("self")
        home = tempfile.mkdtemp(prefix="gpupool-home-", dir=CERTS)
        creds = os.path.join(home, "credentials.env")

        def write_creds(ca_file):
            with open(creds, "w", encoding="utf-8") as f:
                f.write(f"GPUPOOL_ENDPOINT=https://127.0.0.1:{server.port}\n"
                        f"GPUPOOL_ACCESS_KEY=AKP\nGPUPOOL_SECRET_KEY=SKP\n"
                        f"GPUPOOL_CA_FILE={ca_file}\n")

        write_creds(cert("self"))
        with mock.patch.dict(os.environ, {"HOME": home, "GPUPOOL_DATA_DIR": home}, clear=True):
            client = gpupool.Client()
            self.addCleanup(client.close)
            self.assertEqual(client.whoami()["path"], "/v1/whoami")
            write_creds(os.path.join(home, "tls", "cert.pem"))
            with self.assertRaisesRegex(ConfigError, rf"CA file '{home}/tls/cert.pem' "
                                                     rf"\(GPUPOOL_CA_FILE of {creds}\) cannot be "
                                                     "read"):
                gpupool.Client()

    def test_a_task_client_and_monitor_use_the_ca_text_of_the_tasks_environment(self):
        server = self.serve()
        endpoint = f"https://127.0.0.1:{server.port}"
        with open(cert("ca"), encoding="ascii") as f:
            ca_pem = f.read()
        env = {"GPUPOOL_TASK_ID": "t-1", "GPUPOOL_TASK_TOKEN": "tok", "GPUPOOL_ENDPOINT": endpoint,
               "GPUPOOL_CA_PEM": ca_pem, "GPUPOOL_CA_FILE": ""}
        with mock.patch.dict(os.environ, env):
            monitor = gpupool.Monitor()
            self.addCleanup(monitor._client.close)
            self.assertEqual(monitor.get_metrics(), {"val_acc": 0.9})
            task_client = gpupool.Client.for_task("tok", endpoint)
            self.addCleanup(task_client.close)
            self.assertEqual(gpupool.Monitor(client=task_client).get_metrics(), {"val_acc": 0.9})
        self.assertEqual(server.seen[0]["path"], "/v1/tasks/t-1/metrics")
        self.assertEqual(server.seen[0]["authorization"], "GPUPOOL-TASK tok")
        with mock.patch.dict(os.environ, {"GPUPOOL_CA_PEM": ""}):
            untrusted = gpupool.Client.for_task("tok", endpoint)
            self.addCleanup(untrusted.close)
            with self.assertRaisesRegex(TransportError, "not trusted .*system's certificate"):
                untrusted._call("GET", "/v1/tasks/t-1/metrics")
        with mock.patch.dict(os.environ, {"GPUPOOL_CA_PEM": cert("other-ca")}):
            with self.assertRaisesRegex(ConfigError, "the CA text \\(GPUPOOL_CA_PEM in the "
                                                     "environment\\) holds no PEM certificate"):
                gpupool.Client.for_task("tok", endpoint)

    def test_a_ca_file_that_cannot_be_used_is_a_config_error_naming_it(self):
        missing = os.path.join(CERTS, "missing.pem")
        for path, pattern in ((missing, "cannot be read: No such file"),
                              (os.path.join(CERTS, "notes.txt"), "holds no PEM certificate"),
                              (os.path.join(CERTS, "ca.key"), "holds no PEM certificate"),
                              (CERTS, "cannot be read")):
            with self.assertRaisesRegex(ConfigError, f"CA file '{path}' \\(ca_file=\\) "
                                                     + pattern):
                gpupool.Client(endpoint="https://127.0.0.1:1", access_key="AK",
                               secret_key="SK", ca_file=path)
        with self.assertRaisesRegex(ConfigError, f"CA file '{missing}' \\(ca_file=\\) cannot "
                                                 "be read"):
            gpupool.Client.for_task("tok", "https://127.0.0.1:1", ca_file=missing)

    def test_the_context_verifies_and_wants_tls_1_2_or_later(self):
        for ca_file in (None, cert("ca")):
            context = _transport.tls_context(ca_file)
            self.assertEqual(context.verify_mode, ssl.CERT_REQUIRED)
            self.assertTrue(context.check_hostname)
            self.assertGreaterEqual(context.minimum_version, ssl.TLSVersion.TLSv1_2)

    def test_https_to_a_plain_http_server_says_so(self):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(4)
        self.addCleanup(sock.close)

        def answer_plain_http():
            conn, _ = sock.accept()
            with conn:
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

        threading.Thread(target=answer_plain_http, daemon=True).start()
        with self.assertRaisesRegex(TransportError, "TLS failed .*is the server serving HTTPS"):
            self.transport(f"https://127.0.0.1:{sock.getsockname()[1]}").request("GET", "/x")

    def test_plain_http_to_an_https_server_hints_at_https(self):
        server = self.serve()
        with self.assertRaisesRegex(TransportError, r"failed after 2 attempts: .*is the "
                                                    r"endpoint https://\?"):
            self.transport(f"http://127.0.0.1:{server.port}", retries=1).request("GET", "/x")


if __name__ == "__main__":
    unittest.main()
