"""The SDK against a real pool serving HTTPS (`gpupool up --tls-self-signed`): configured from
nothing but the pool's credentials.env (an https:// endpoint and the pool's own certificate as
GPUPOOL_CA_FILE), it submits a task, moves its files and reads it back; Monitor() inside a task
verifies the server with the CA text the agent passes (GPUPOOL_CA_PEM); without that CA the
server is not trusted."""

import os
import sys
import tempfile
import textwrap
import unittest
from unittest import mock

import gpupool

from .pool import REPO, Pool, wait_for

POOL = None
SDK_DIR = os.path.join(REPO, "sdk", "python")


def setUpModule():
    global POOL  # pylint: disable=global-statement
    POOL = Pool(tls=True)


def tearDownModule():
    code = POOL.stop()
    if code != 0:
        raise AssertionError(f"gpupool up exited with {code} on SIGTERM")


class LiveTlsTest(unittest.TestCase):
    def setUp(self):
        self.work = tempfile.TemporaryDirectory()
        self.addCleanup(self.work.cleanup)
        # Nothing but the pool's data directory: no GPUPOOL_* variables, no profile.
        env = {"HOME": self.work.name, "PATH": os.environ.get("PATH", ""),
               "GPUPOOL_DATA_DIR": POOL.dir}
        patcher = mock.patch.dict(os.environ, env, clear=True)
        patcher.start()
        self.addCleanup(patcher.stop)

    def client(self, **kw):
        client = gpupool.Client(**kw)
        self.addCleanup(client.close)
        return client

    def test_credentials_env_names_the_https_endpoint_and_the_pools_certificate(self):
        self.assertRegex(POOL.endpoint, r"^https://127\.0\.0\.1:\d+$")
        self.assertEqual(POOL.ca_file, os.path.join(POOL.dir, "tls", "cert.pem"))
        self.assertTrue(os.path.isfile(os.path.join(POOL.dir, "tls", "key.pem")))
        client = self.client()
        self.assertEqual((client.endpoint, client.ca_file), (POOL.endpoint, POOL.ca_file))

    def test_the_sdk_from_credentials_env_submits_a_task_and_reads_it_back(self):
        client = self.client()
        wait_for(lambda: any(n["name"] == "local" and n["status"] == "ready"
                             for n in client.nodes()), what="the local node")
        self.assertEqual(client.whoami()["role"], "admin")
        source = os.path.join(self.work.name, "hello.py")
        with open(source, "w", encoding="utf-8") as f:
            f.write("open('out.txt', 'w').write('over tls\\n'); print('hello over tls')\n")
        task = client.create_task(name="tls", command="python3 hello.py", gpu_count=1)
        client.upload_files(task.id, source, "/root/")
        task.start().wait(timeout=60)
        self.assertEqual((task.state, task.exit_code), ("succeeded", 0), task.reason)
        again = client.get_task(task.id)
        self.assertEqual((again.id, again.name, again.state), (task.id, "tls", "succeeded"))
        self.assertEqual(again.logs(), "hello over tls\n")
        self.assertIn(task.id, [t.id for t in client.list_tasks(state="succeeded")])
        local = os.path.join(self.work.name, "out.txt")
        client.download_files(task.id, "out.txt", local)
        with open(local, encoding="utf-8") as f:
            self.assertEqual(f.read(), "over tls\n")
        # The certificate names localhost too.
        by_name = self.client(endpoint=POOL.endpoint.replace("127.0.0.1", "localhost"),
                              ca_file=POOL.ca_file)
        self.assertEqual(by_name.get_task(task.id).state, "succeeded")

    def test_monitor_inside_a_task_verifies_the_server_with_the_ca_the_agent_passes(self):
        client = self.client()
        code = textwrap.dedent(f"""\
            import os, sys
            sys.path.insert(0, {SDK_DIR!r})
            import gpupool
            print(os.environ["GPUPOOL_ENDPOINT"].split(":")[0],
                  os.environ.get("GPUPOOL_CA_PEM", "").replace("\\n", "|"))
            metrics = gpupool.Monitor().get_metrics()  # raises when the server is not trusted
            print("read over https:", type(metrics).__name__)
            """)
        task = client.create_task(command=["python3", "-c", code], start=True)
        task.wait(timeout=60, poll_interval=0.1)
        self.assertEqual((task.state, task.exit_code), ("succeeded", 0), task.logs("stderr"))
        first, second = task.logs().splitlines()
        with open(POOL.ca_file, encoding="ascii") as f:  # the task cannot read the pool's files
            self.assertEqual(first, "https " + f.read().replace("\n", "|"))
        self.assertEqual(second, "read over https: dict")

    def test_without_the_pools_ca_the_server_is_not_trusted(self):
        client = self.client(endpoint=POOL.endpoint, access_key=POOL.access_key,
                             secret_key=POOL.secret_key)
        self.assertIsNone(client.ca_file, "an endpoint argument does not take the pool's CA")
        with self.assertRaisesRegex(gpupool.TransportError,
                                    "certificate was not trusted .*GPUPOOL_CA_FILE"):
            client.whoami()
        plain = self.client(endpoint=POOL.endpoint.replace("https://", "http://"),
                            access_key=POOL.access_key, secret_key=POOL.secret_key, retries=0)
        with self.assertRaises(gpupool.TransportError):
            plain.whoami()


if __name__ == "__main__":
    sys.exit(unittest.main())
