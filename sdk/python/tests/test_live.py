"""The SDK against a real pool (`gpupool up`, simulated GPUs, real processes): the GPU-cloud
user's workflow of docs/sdk.md — create held, upload, start, watch, download — and what it
implies: errors, logs, metrics reported from inside a task, resumed transfers, job arrays,
distributed jobs, volumes and datasets (pushed with the CLI, `gpupool dataset push`)."""

import datetime
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

import gpupool
from gpupool import files

from .pool import REPO, Pool, binary, wait_for

POOL = None
SDK_DIR = os.path.join(REPO, "sdk", "python")


def setUpModule():
    global POOL  # pylint: disable=global-statement
    POOL = Pool()


def tearDownModule():
    code = POOL.stop()
    if code != 0:
        raise AssertionError(f"gpupool up exited with {code} on SIGTERM")


def gpupool_number(value: float) -> str:
    """A metric value as the CLI prints it: the shortest text that reads back as the double."""
    return repr(value)


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

    def test_a_sweep_is_one_array_whose_elements_report_side_by_side(self):
        code = textwrap.dedent(f"""\
            import os, sys
            sys.path.insert(0, {SDK_DIR!r})
            import gpupool
            i = int(os.environ["GPUPOOL_ARRAY_INDEX"])
            gpupool.report(step=10, val_acc=0.5 + i / 10, loss=1.5 - i / 10)
            print(os.environ["GPUPOOL_ARRAY_ID"], i)
            """)
        sweep = self.client.create_tasks("0-4", command=["python3", "-c", code], name="lr",
                                         max_running=2)
        self.assertRegex(sweep.id, r"^a-\d+$")
        self.assertEqual(sweep.info["array"], "0-4%2")
        self.assertEqual(len(sweep), 5)
        sweep.wait(timeout=60, poll_interval=0.1)
        self.assertEqual(sweep.states, {"succeeded": 5})
        elements = sweep.tasks()
        self.assertEqual([t.info["array_index"] for t in elements], [0, 1, 2, 3, 4])
        self.assertEqual([t.id for t in elements], sweep.task_ids)
        self.assertEqual([t.name for t in elements], [f"lr[{i}]" for i in range(5)])
        self.assertEqual(elements[3].logs(), f"{sweep.id} 3\n")
        # The reported values arrive with the agent's next shipment after the end.
        latest = wait_for(lambda: (lambda ts: ts if all(t.latest_metrics for t in ts) else None)(
            sweep.tasks(metrics=["val_acc", "loss"])), what="the elements' metrics")
        self.assertEqual([t.latest_metrics for t in latest],
                         [{"val_acc": 0.5 + i / 10, "loss": 1.5 - i / 10} for i in range(5)])
        # The CLI shows them side by side.
        env = dict(os.environ, GPUPOOL_ENDPOINT=POOL.endpoint, GPUPOOL_ACCESS_KEY=POOL.access_key,
                   GPUPOOL_SECRET_KEY=POOL.secret_key, HOME=self.work.name)
        ls = subprocess.run([binary(), "ls", "--array", sweep.id, "--metrics", "val_acc,loss"],
                            env=env, capture_output=True, text=True, check=True)
        lines = ls.stdout.splitlines()
        self.assertEqual(lines[0].split(), ["ID", "INDEX", "NAME", "PROJECT", "STATE", "GPUS",
                                            "NODE", "AGE", "val_acc", "loss"])
        self.assertEqual(len(lines), 6, ls.stdout)
        for i, line in enumerate(lines[1:]):
            cells = line.split()
            self.assertEqual((cells[0], cells[1], cells[-2], cells[-1]),
                             (sweep.task_ids[i], str(i), gpupool_number(0.5 + i / 10),
                              gpupool_number(1.5 - i / 10)), line)

    def test_an_array_stops_as_a_whole(self):
        sweep = self.client.create_tasks(range(3), command="sleep 600", start=False)
        self.assertEqual(sweep.states, {"pending": 3})
        self.assertEqual(self.client.get_array(sweep.id).task_ids, sweep.task_ids)
        self.assertEqual({t.status for t in sweep.tasks()}, {gpupool.CREATED})
        sweep.start()
        wait_for(lambda: sweep.states.get("running") == 3, what="three running elements")
        sweep.stop()
        self.assertEqual(sweep.states, {"stopped": 3})
        with self.assertRaises(gpupool.ApiError) as caught:
            self.client.create_tasks("0-10000", command="true")
        self.assertEqual(caught.exception.status, 400)
        self.assertEqual(caught.exception.message, "array '0-10000' has more than 10000 "
                                                   "indexes, the most one array may have")

    def test_a_distributed_job_s_members_find_each_other_and_share_their_fate(self):
        self.write("rank.py", """\
            import os
            e = os.environ
            print(e["RANK"], e["WORLD_SIZE"], e["PET_NODE_RANK"], e["PET_NNODES"],
                  e["MASTER_PORT"] == e["PET_MASTER_PORT"] != "0", bool(e["MASTER_ADDR"]),
                  e["GPUPOOL_JOB_ID"])
            """)
        # One node here: both members on it (members_per_node=2).
        job = self.client.create_task(command=["python3", "rank.py"], name="ddp", nodes=2,
                                      members_per_node=2)
        self.assertIsInstance(job, gpupool.Job)
        self.assertRegex(job.id, r"^j-\d+$")
        self.assertEqual(len(job.task_ids), 2)
        self.assertEqual(job.status, gpupool.CREATED, "created held, not started")
        for task_id in job.task_ids:  # each member is a task with its own inputs
            self.client.upload_files(task_id, "rank.py")
        self.assertEqual(self.client.get_job(job.id).task_ids, job.task_ids)
        job.start().wait(timeout=60, poll_interval=0.1)
        self.assertEqual((job.state, job.exit_code, job.first_failed), ("succeeded", 0, ""),
                         job.reason)
        self.assertEqual(job.status, gpupool.STOPPED)
        self.assertEqual([(m["index"], m["state"], m["node"]) for m in job.members],
                         [(0, "succeeded", "local"), (1, "succeeded", "local")])
        self.assertEqual(job.logs(member=1), f"1 2 1 2 True True {job.id}\n")
        self.assertEqual(job.logs(), f"[0] 0 2 0 2 True True {job.id}\n"
                                     f"[1] 1 2 1 2 True True {job.id}\n")
        task = job.member(1)
        self.assertEqual((task.info["job_id"], task.info["member_index"]), (job.id, 1))
        self.assertEqual(task.name, "ddp[1]")
        # Member 1 fails: member 0, still running, is stopped with it.
        failing = self.client.create_task(
            command='if [ "$RANK" = 1 ]; then exit 3; fi; sleep 600', nodes=2,
            members_per_node=2, start=True)
        failing.wait(timeout=60, poll_interval=0.1)
        self.assertEqual((failing.state, failing.exit_code, failing.first_failed),
                         ("failed", 3, failing.task_ids[1]), failing.reason)
        self.assertEqual([(m["state"], m["ended_by"]) for m in failing.members],
                         [("stopped", failing.task_ids[1]), ("failed", "")])
        with self.assertRaises(gpupool.ApiError) as caught:
            self.client.create_task(command="true", nodes=2, gpu_count=99)
        self.assertEqual(caught.exception.status, 400)

    def test_monitor_inside_a_task_needs_no_user_keys_and_its_token_reads_nothing_else(self):
        other = self.client.create_task(command="true")  # another task of the same user
        code = textwrap.dedent(f"""\
            import json, os, sys, time
            sys.path.insert(0, {SDK_DIR!r})
            for key in ("GPUPOOL_ACCESS_KEY", "GPUPOOL_SECRET_KEY"):
                assert key not in os.environ, key
            import gpupool
            m = gpupool.Monitor()
            deadline = time.time() + 30
            while m.get_memory_usage() is None and time.time() < deadline:
                time.sleep(0.1)
            out = {{"util": m.get_gpu_utilization(), "mem": m.get_memory_usage()}}
            c, own = m._client, os.environ["GPUPOOL_TASK_ID"]
            calls = {{"other": ("GET", "/v1/tasks/{other.id}/metrics"),
                      "stop": ("POST", "/v1/tasks/" + own + "/stop"),
                      "list": ("GET", "/v1/tasks"), "own": ("GET", "/v1/tasks/" + own)}}
            for name, (method, path) in calls.items():
                try:
                    c._call(method, path)
                    out[name] = 200
                except gpupool.ApiError as e:
                    out[name] = e.status
            print(json.dumps(out))
            print(os.environ["GPUPOOL_TASK_TOKEN"])
            """)
        task = self.client.create_task(command=["python3", "-c", code], gpu_count=1, start=True)
        task.wait(timeout=60, poll_interval=0.1)
        self.assertEqual((task.state, task.exit_code), ("succeeded", 0), task.logs("stderr"))
        report, token = task.logs().splitlines()
        seen = json.loads(report)
        self.assertEqual(seen["util"], 100, "a whole simulated GPU at full load")
        self.assertGreater(seen["mem"], 0)
        self.assertEqual((seen["own"], seen["other"], seen["stop"], seen["list"]),
                         (200, 403, 403, 403), seen)
        # Once the task has ended, its token is refused everywhere.
        ended = gpupool.Client.for_task(token, POOL.endpoint)
        with self.assertRaises(gpupool.ApiError) as caught:
            ended._call("GET", f"/v1/tasks/{task.id}/metrics")
        self.assertEqual(caught.exception.status, 401)
        self.assertIn("no longer runs the binding", caught.exception.message)
        forged = gpupool.Client.for_task(token[:-4] + "0000", POOL.endpoint)
        with self.assertRaises(gpupool.ApiError) as caught:
            forged._call("GET", f"/v1/tasks/{task.id}/metrics")
        self.assertEqual(caught.exception.status, 401)
        ended.close()
        forged.close()
        other.stop()

    def test_a_snapshotted_task_stops_and_resumes_from_its_checkpoint(self):
        # A training-like loop: counts steps, saves its step into its workspace when a snapshot
        # asks (gpupool.checkpoint) and starts each run from the step saved.
        code = textwrap.dedent(f"""\
            import os, sys, time
            sys.path.insert(0, {SDK_DIR!r})
            from gpupool import checkpoint
            path = os.path.join(os.environ["HOME"], "step")
            step = int(open(path).read()) if os.path.exists(path) else 0
            checkpoint.enable()
            print("start", step, flush=True)
            while True:
                step += 1
                time.sleep(0.01)
                if checkpoint.requested():
                    with open(path + ".tmp", "w") as f:
                        f.write(str(step))
                    os.replace(path + ".tmp", path)
                    checkpoint.done()
            """)
        task = self.client.create_task(command=["python3", "-c", code], checkpoint_timeout=20,
                                       start=True)
        wait_for(lambda: "start 0\n" in task.logs(), what="the first run's start")
        self.assertEqual((task.run, task.resume_from), (1, ""))
        snap = task.snapshot()
        self.assertRegex(snap.id, r"^s-\d+$")
        self.assertEqual((snap.task_id, snap.run, snap.trigger, snap.consistency),
                         (task.id, 1, "manual", "application"))
        self.assertGreaterEqual(snap.files, 1, "the step it saved")
        self.assertEqual(self.client.get_snapshot(snap.id), snap)
        self.assertIn(snap.id, [s.id for s in task.snapshots()])
        self.assertIn(snap.id, [s.id for s in self.client.list_snapshots(task_id=task.id)])
        task.stop().wait(timeout=60)
        self.assertEqual(task.state, "stopped")
        self.assertIsInstance(task.work_lost, datetime.timedelta)
        task.resume()
        self.assertTrue(task.resume_from.startswith("s-"), task.info)
        wait_for(lambda: task.state == "running" and task.run == 2, timeout=60,
                 what="the second run")
        starts = wait_for(lambda: [int(line.split()[1]) for line in task.logs().splitlines()
                                   if line.startswith("start ")][1:],
                          what="the second run's start")
        self.assertGreater(starts[0], 0, "it continued from its checkpoint, not from 0")
        # Stopped with discard=True, no snapshot is taken before.
        taken = len(task.snapshots())
        task.stop(discard=True).wait(timeout=60)
        self.assertEqual(len(task.snapshots()), taken)
        # A new task starts from a snapshot; a deleted snapshot is gone.
        show = ["python3", "-c", "import os; print(open(os.environ['HOME'] + '/step').read())"]
        copy = self.client.create_task(command=show, from_snapshot=snap, start=True)
        copy.wait(timeout=60)
        self.assertEqual((copy.state, copy.resume_from), ("succeeded", snap.id),
                         copy.logs("stderr"))
        self.assertGreater(int(copy.logs()), 0)
        self.client.delete_snapshot(snap)
        with self.assertRaises(gpupool.ApiError) as caught:
            self.client.get_snapshot(snap.id)
        self.assertEqual(caught.exception.status, 404)

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

    def test_a_volume_outlives_the_task_that_wrote_it(self):
        name = "sdk-live-data"
        vol = self.client.create_volume(name, "64M")
        self.assertEqual((vol.name, vol.size_bytes, vol.shared, vol.node, vol.state, vol.used_by),
                         (name, 64 << 20, False, "", "ready", []))
        self.assertIn(vol.id, [v.id for v in self.client.list_volumes()])
        with self.assertRaises(gpupool.ApiError) as caught:
            self.client.create_volume(name, "1M")
        self.assertEqual(caught.exception.code, "already_exists")

        writer = self.client.create_task(command="echo hi > /root/data/x.txt",
                                         volumes={name: "/root/data"})
        self.assertEqual(writer.volumes, [gpupool.VolumeMount(name, "/root/data", False, vol.id,
                                                              False)])
        self.assertEqual(self.client.get_volume(name).used_by, [writer.id])
        with self.assertRaises(gpupool.ApiError) as caught:
            vol.delete()   # a held task has not ended: it still mounts it
        self.assertEqual((caught.exception.status, caught.exception.code),
                         (409, "failed_precondition"))
        self.assertIn(writer.id, caught.exception.message)
        writer.start().wait(timeout=60)
        if writer.state == "failed" and "mount namespace" in writer.reason:
            writer.delete()
            vol.delete()
            self.skipTest(f"this machine's agent cannot mount volumes: {writer.reason}")
        self.assertEqual(writer.state, "succeeded", writer.reason)
        self.assertEqual(vol.refresh().node, "local", "bound to its first task's node")
        self.assertEqual(vol.used_by, [])

        reader = self.client.create_task(
            command="cat /root/data/x.txt; echo no > /root/data/y.txt || echo read-only",
            volumes=[f"{name}:/root/data:ro"], start=True)
        reader.wait(timeout=60)
        self.assertEqual((reader.state, reader.logs()), ("succeeded", "hi\nread-only\n"),
                         reader.reason)
        self.assertEqual(vol.resize("128Mi").size_bytes, 128 << 20)
        vol.delete()
        wait_for(lambda: vol.id not in [v.id for v in self.client.list_volumes()],
                 what=f"volume {vol.id} to go once its node removed its files")
        with self.assertRaises(gpupool.ApiError) as caught:
            self.client.get_volume(name)
        self.assertEqual(caught.exception.code, "not_found")

    def test_an_empty_dataset_is_listed_published_and_deleted(self):
        name = "sdk-live-empty"
        ds = self.client.create_dataset(name)
        self.assertEqual((ds.name, ds.published, ds.versions, ds.latest, ds.used_by),
                         (name, False, [], None, []))
        self.assertIn(ds.id, [d.id for d in self.client.list_datasets()])
        with self.assertRaises(gpupool.ApiError) as caught:
            self.client.create_dataset(name)
        self.assertEqual(caught.exception.code, "already_exists")
        self.assertTrue(ds.publish().published, "the pool's admin may publish it")
        self.assertFalse(self.client.get_dataset(ds.id).publish(False).published)
        self.client.delete_dataset(name)
        with self.assertRaises(gpupool.ApiError) as caught:
            self.client.get_dataset(name)
        self.assertEqual(caught.exception.code, "not_found")

    def test_a_pushed_dataset_is_mounted_read_only_at_the_version_asked_for(self):
        name = "sdk-live-ds"
        env = dict(os.environ, GPUPOOL_ENDPOINT=POOL.endpoint, GPUPOOL_ACCESS_KEY=POOL.access_key,
                   GPUPOOL_SECRET_KEY=POOL.secret_key, HOME=self.work.name)

        def push(text):
            self.write("ds/a.txt", text)
            subprocess.run([binary(), "dataset", "push", "ds", name], env=env,
                           capture_output=True, text=True, check=True)

        ds = self.client.create_dataset(name)
        push("one\n")
        ds.refresh()
        v1 = ds.latest
        self.assertEqual((v1.version, v1.files, v1.bytes), (1, 1, 4))
        reader = self.client.create_task(
            command="cat /root/data/a.txt; echo no > /root/data/b.txt || echo read-only",
            datasets={name: "/root/data"})
        self.assertEqual(reader.datasets, [gpupool.DatasetMount(name, 1, "/root/data", ds.id,
                                                                ds.project, v1.manifest)],
                         "the latest, resolved at submission")
        self.assertEqual(ds.refresh().used_by, [reader.id])
        with self.assertRaises(gpupool.ApiError) as caught:
            ds.delete()   # a held task has not ended: it still mounts it
        self.assertEqual((caught.exception.status, caught.exception.code),
                         (409, "failed_precondition"))
        push("two, longer\n")
        self.assertEqual([v.version for v in ds.refresh().versions], [1, 2])
        reader.start().wait(timeout=60)
        if reader.state == "failed" and "mount namespace" in reader.reason:
            ds.delete()
            self.skipTest(f"this machine's agent cannot mount datasets: {reader.reason}")
        self.assertEqual((reader.state, reader.logs()), ("succeeded", "one\nread-only\n"),
                         "the version of its submission, read-only: " + reader.reason)

        latest = self.client.create_task(command="cat /root/d/a.txt",
                                         datasets=[f"{name}:/root/d"], start=True)
        pinned = self.client.create_task(command="cat /root/d/a.txt",
                                         datasets=[f"{name}@1:/root/d"], start=True)
        for task, text in ((latest, "two, longer\n"), (pinned, "one\n")):
            task.wait(timeout=60)
            self.assertEqual((task.state, task.logs()), ("succeeded", text), task.reason)
        self.assertEqual([v.version for v in ds.delete_version(1).versions], [2])
        ds.delete()
        self.assertNotIn(name, [d.name for d in self.client.list_datasets()])

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
