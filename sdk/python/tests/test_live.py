"""The SDK against a real pool (`gpupool up`, simulated GPUs, real processes): the GPU-cloud
user's workflow of docs/sdk.md — create held, upload, start, watch, download — and what it
implies: errors, logs, metrics reported from inside a task, resumed transfers."""

import datetime
import hashlib
import os
import sys
import tempfile
import textwrap
import time
import unittest

import gpupool
from gpupool import files

from .pool import REPO, Pool, wait_for

POOL = None
SDK_DIR = os.path.join(REPO, "sdk", "python")


def setUpModule():
    global POOL  # pylint: disable=global-statement
    POOL = Pool()


def tearDownModule():
    code = POOL.stop()
    if code != 0:
        raise AssertionError(f"gpupool up exited with {code} on SIGTERM")


class LiveTest(unittest.TestCase):
    def setUp(self):
        self.client = gpupool.Client(endpoint=POOL.endpoint, access_key=POOL.access_key,
                                     secret_key=POOL.secret_key)
        wait_for(lambda: any(n["name"] == "local" and n["status"] == "ready"
                             for n in self.client.nodes()), what="the local node")
        self.work = tempfile.TemporaryDirectory()
        self.cwd = os.getcwd()
        os.chdir(self.work.name)

    def tearDown(self):
        os.chdir(self.cwd)
        self.work.cleanup()
        self.client.close()

    def write(self, rel, text):
        os.makedirs(os.path.dirname(rel) or ".", exist_ok=True)
        with open(rel, "w", encoding="utf-8") as f:
            f.write(textwrap.dedent(text))

    def test_the_workflow_create_upload_start_watch_download(self):
        self.write("train.py", """\
            import os, model
            os.makedirs("output", exist_ok=True)
            with open("output/weights.txt", "w") as f:
                f.write(model.weights())
            print("epoch 1 done")
            """)
        self.write("model.py", "def weights():\n    return 'w=0.5\\n'\n")
        task = self.client.create_task(name="mnist_training", command="python3 train.py",
                                       gpu_type="A100-80GB", gpu_count=1, disk_size=1,
                                       max_runtime=datetime.timedelta(hours=2))
        self.assertEqual(task.status, gpupool.CREATED, "created held, not started")
        self.assertEqual(task.info["max_runtime_ms"], 7_200_000)
        self.assertEqual(task.runtime, datetime.timedelta(0))
        uploaded = self.client.upload_files(task_id=task.id, local_path=["train.py", "model.py"],
                                            remote_path="/root/")
        self.assertEqual(sorted(u["path"] for u in uploaded), ["model.py", "train.py"])
        task.start()
        while task.status != gpupool.STOPPED:
            time.sleep(0.05)
        self.assertEqual((task.state, task.exit_code), ("succeeded", 0), task.reason)
        self.assertGreater(task.runtime, datetime.timedelta(0))
        self.assertIn("epoch 1 done", task.logs())
        written = self.client.download_files(task_id=task.id, remote_path="/root/output",
                                             local_path="./results")
        self.assertEqual(written, [os.path.join("./results", "weights.txt")])
        with open("results/weights.txt", encoding="utf-8") as f:
            self.assertEqual(f.read(), "w=0.5\n")
        self.assertEqual([os.path.basename(p) for p in
                          self.client.download_files(task.id, "/root/output/weights.txt", "w.txt")],
                         ["w.txt"])
        self.assertIn(task.id, [t.id for t in self.client.list_tasks(state="succeeded")])

    def test_gpu_types_go_by_the_names_people_write(self):
        task = self.client.create_task(command="true", gpu_type="a100 80gb", gpu_count=1)
        self.assertEqual(task.info["gpu_models"], ["A100-80GB"])
        with self.assertRaises(gpupool.ApiError) as caught:
            self.client.create_task(command="true", gpu_type="RTX 3090", gpu_count=1)
        self.assertEqual(caught.exception.status, 400)
        self.assertEqual(caught.exception.message,
                         "gpu_models: no node of this pool has RTX3090 (it has A100-80GB)")

    def test_bad_input_is_an_api_error_naming_the_field(self):
        with self.assertRaises(gpupool.ApiError) as caught:
            self.client.create_task(command="true", gpu_count=99)
        self.assertEqual(caught.exception.status, 400)
        self.assertIn("gpu_count", caught.exception.message)
        with self.assertRaises(gpupool.ApiError) as caught:
            self.client.get_task("t-does-not-exist")
        self.assertEqual((caught.exception.status, caught.exception.code), (404, "not_found"))
        with self.assertRaisesRegex(ValueError, "outside the task's workspace"):
            self.client.download_files("t-1", "/etc", "x")

    def test_stop_and_follow_the_logs(self):
        task = self.client.create_task(
            command="for i in 1 2 3; do echo line $i; sleep 0.2; done; sleep 600", start=True)
        text = ""
        for chunk in task.logs(follow=True):
            text += chunk
            if "line 3" in text:
                break
        self.assertEqual(text.splitlines(), ["line 1", "line 2", "line 3"])
        task.stop()
        task.wait(timeout=30)
        self.assertEqual(task.state, "stopped")
        self.assertIn("line 3", "".join(task.logs(follow=True)), "follow ends with the task")
        self.assertEqual(task.logs(tail=1), "line 3\n")

    def test_metrics_reported_from_inside_a_task_meet_its_stop_condition(self):
        self.write("report.py", f"""\
            import sys, time
            sys.path.insert(0, {SDK_DIR!r})
            import gpupool
            gpupool.report(step=1, val_acc=0.5)
            gpupool.report(step=2, val_acc=0.97)
            time.sleep(600)
            """)
        task = self.client.create_task(command=["python3", "report.py"],
                                       stop_when="val_acc > 0.95")
        self.client.upload_files(task.id, "report.py")
        task.start().wait(timeout=60)
        self.assertEqual(task.state, "stopped")
        self.assertIn("stop condition met: val_acc > 0.95 (val_acc = 0.97)", task.reason)
        monitor = gpupool.Monitor(task_id=task.id, client=self.client)
        self.assertEqual(monitor.get_metrics()["val_acc"], 0.97)

    def test_an_interrupted_upload_resumes_and_a_partial_download_too(self):
        data = os.urandom(files.CHUNK_BYTES + 12345)
        with open("big.bin", "wb") as f:
            f.write(data)
        task = self.client.create_task(command="true")
        # The first chunk arrives, then the upload is interrupted.
        self.client._call("PUT", f"/v1/tasks/{task.id}/uploads",
                          query={"path": "big.bin", "offset": 0}, raw=data[:files.CHUNK_BYTES])
        sent = []
        request = self.client._transport.request

        def spy(method, path, **kw):
            if method == "PUT":
                sent.append(kw["query"]["offset"])
            return request(method, path, **kw)

        self.client._transport.request = spy
        committed = self.client.upload_files(task.id, "big.bin", "/root/")
        self.assertEqual(sent, [files.CHUNK_BYTES], "only the rest was sent")
        self.assertEqual(committed[0]["sha256"], hashlib.sha256(data).hexdigest())
        # A download interrupted after 1000 bytes continues from its part file; a corrupt part
        # is detected and fetched again.
        with open("copy.bin" + files.PART_SUFFIX, "wb") as f:
            f.write(data[:1000])
        self.client.download_files(task.id, "/root/big.bin", "copy.bin")
        with open("copy.bin", "rb") as f:
            self.assertEqual(f.read(), data)
        with open("again.bin" + files.PART_SUFFIX, "wb") as f:
            f.write(b"x" * 1000)
        self.client.download_files(task.id, "big.bin", "again.bin")
        with open("again.bin", "rb") as f:
            self.assertEqual(f.read(), data)
        self.assertFalse(os.path.exists("again.bin" + files.PART_SUFFIX))

    def test_a_free_pool_says_so_in_its_banner(self):
        wait_for(lambda: "billing is off: every price is 0" in POOL.output(),
                 what="the banner of gpupool up")

    def test_balance_and_identity(self):
        me = self.client.whoami()
        self.assertEqual(me["role"], "admin")
        balance = self.client.balance()
        self.assertEqual(balance["project"], me["projects"][0])
        self.assertIn("balance_micros", balance)


if __name__ == "__main__":
    sys.exit(unittest.main())
