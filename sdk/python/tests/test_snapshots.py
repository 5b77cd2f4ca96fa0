"""Snapshots without a server (gpupool/snapshots.py, the Task and Client calls): the requests
task.snapshot(), snapshots(), resume(), stop(discard=) and the client's snapshot calls send, the
TaskSubmit fields create_task's snapshot arguments become, the errors that name a wrong argument
before any request, and what the SDK makes of the server's answers."""

import datetime
import signal
import unittest

import gpupool
from gpupool.task import Task

from .test_jobs import client_with


def snapshot(id_="s-12", **extra):
    info = {"id": id_, "task_id": "t-1", "project": "p", "run": 1, "trigger": "manual",
            "consistency": "application", "node": "local", "manifest": "ab" * 32, "files": 3,
            "bytes": 4096, "new_bytes": 1024, "taken_ms": 1_700_000_000_123, "frozen_ms": 40,
            "duration_ms": 1500}
    info.update(extra)
    return info


def task(state="running", **extra):
    info = {"id": "t-1", "state": state, "held": False, "run": 1, "resume_from": "",
            "work_lost_ms": 0, "checkpoint_timeout_ms": 0}
    info.update(extra)
    return info


class RecordingTimeout:
    """Client._call's stand-in that also records the timeout each call was given."""

    def __init__(self, answer):
        self.answer = answer
        self.timeouts = []

    def __call__(self, method, path, query=None, body=None, raw=None, timeout=None):
        self.timeouts.append(timeout)
        return self.answer


class SnapshotRecordTest(unittest.TestCase):
    def test_the_servers_object_becomes_a_snapshot(self):
        s = gpupool.Snapshot.from_info(snapshot(later_field="ignored"))
        self.assertEqual((s.id, s.task_id, s.run, s.trigger, s.consistency, s.files, s.bytes,
                          s.new_bytes), ("s-12", "t-1", 1, "manual", "application", 3, 4096, 1024))
        self.assertEqual(s.taken, datetime.datetime(2023, 11, 14, 22, 13, 20, 123000,
                                                    tzinfo=datetime.timezone.utc))
        self.assertEqual(s.frozen, datetime.timedelta(milliseconds=40))
        self.assertEqual(s.duration, datetime.timedelta(seconds=1.5))
        self.assertEqual(repr(s), "<gpupool.Snapshot s-12 of t-1 run 1 manual "
                                  "application-consistent 3 files>")


class TaskSnapshotTest(unittest.TestCase):
    def test_snapshot_posts_and_waits_longer_than_the_server(self):
        client = client_with(lambda *_: snapshot())
        t = Task(client, task())
        s = t.snapshot()
        self.assertIsInstance(s, gpupool.Snapshot)
        self.assertEqual(s.id, "s-12")
        self.assertEqual(client._call.calls, [("POST", "/v1/tasks/t-1/snapshots", None, None)])
        # The server answers within the checkpoint timeout (30 s by default) plus 2 minutes.
        client._call = RecordingTimeout(snapshot())
        t.snapshot()
        Task(client, task(checkpoint_timeout_ms=600_000)).snapshot()
        t.snapshot(timeout=5)
        self.assertEqual(client._call.timeouts, [210.0, 780.0, 5])

    def test_snapshot_with_image_asks_for_the_container_too(self):
        saved = {"id": "sha256:" + "e" * 64, "base": "pytorch:2.1", "bytes": 5 << 20,
                 "saved": True}
        client = client_with(lambda *_: snapshot(image=saved))
        s = Task(client, task()).snapshot(image=True)
        self.assertEqual(client._call.calls,
                         [("POST", "/v1/tasks/t-1/snapshots", None, {"image": True})])
        self.assertEqual(s.image, saved)
        self.assertIsNone(gpupool.Snapshot.from_info(snapshot()).image)

    def test_snapshots_lists_the_tasks_oldest_first(self):
        client = client_with(lambda *_: {"snapshots": [snapshot("s-3"), snapshot("s-12")]})
        self.assertEqual([s.id for s in Task(client, task()).snapshots()], ["s-3", "s-12"])
        self.assertEqual(client._call.calls,
                         [("GET", "/v1/snapshots", {"task": "t-1", "project": None}, None)])

    def test_resume_from_the_latest_or_a_given_snapshot(self):
        client = client_with(lambda *_: task("pending", resume_from="s-12"))
        t = Task(client, task("stopped"))
        self.assertIs(t.resume(), t)
        self.assertEqual(t.info["state"], "pending")
        t.resume("s-3")
        t.resume(gpupool.Snapshot.from_info(snapshot("s-4")))
        t.resume("5")
        self.assertEqual([(c[0], c[1], c[3]) for c in client._call.calls],
                         [("POST", "/v1/tasks/t-1/resume", None),
                          ("POST", "/v1/tasks/t-1/resume", {"snapshot": "s-3"}),
                          ("POST", "/v1/tasks/t-1/resume", {"snapshot": "s-4"}),
                          ("POST", "/v1/tasks/t-1/resume", {"snapshot": "s-5"})])
        for bad, error in (("t-3", ValueError), ("s-", ValueError), ("", ValueError),
                           (12, TypeError)):
            with self.subTest(snapshot=bad):
                with self.assertRaisesRegex(error, r"^snapshot must be a snapshot id \('s-12'\)"):
                    t.resume(bad)
        self.assertEqual(len(client._call.calls), 4, "no request for a wrong argument")

    def test_stop_snapshots_first_unless_discard(self):
        client = client_with(lambda *_: task("stopped"))
        t = Task(client, task())
        self.assertIs(t.stop(), t)
        t.stop(discard=True)
        self.assertEqual(client._call.calls,
                         [("POST", "/v1/tasks/t-1/stop", None, None),
                          ("POST", "/v1/tasks/t-1/stop", None, {"discard": True})])

    def test_run_resume_from_and_work_lost_are_read_on_each_access(self):
        answers = [task(run=2), task(resume_from="s-12"), task(work_lost_ms=61_500)]
        client = client_with(answers)
        t = Task(client, task())
        self.assertEqual(t.run, 2)
        self.assertEqual(t.resume_from, "s-12")
        self.assertEqual(t.work_lost, datetime.timedelta(seconds=61.5))
        self.assertEqual([c[:2] for c in client._call.calls], [("GET", "/v1/tasks/t-1")] * 3)


class ClientSnapshotTest(unittest.TestCase):
    def test_list_get_and_delete(self):
        def answer(method, path, query):
            if path == "/v1/snapshots":
                return {"snapshots": [snapshot()]}
            return {"id": "s-12", "deleted": True} if method == "DELETE" else snapshot()

        client = client_with(answer)
        self.assertEqual([s.id for s in client.list_snapshots()], ["s-12"])
        client.list_snapshots(task_id="t-1")
        client.list_snapshots(project="p")
        self.assertEqual(client.get_snapshot("s-12"), gpupool.Snapshot.from_info(snapshot()))
        client.get_snapshot("12")
        self.assertIsNone(client.delete_snapshot(client.get_snapshot("s-12")))
        self.assertEqual([c[:3] for c in client._call.calls],
                         [("GET", "/v1/snapshots", {"task": None, "project": None}),
                          ("GET", "/v1/snapshots", {"task": "t-1", "project": None}),
                          ("GET", "/v1/snapshots", {"task": None, "project": "p"}),
                          ("GET", "/v1/snapshots/s-12", None),
                          ("GET", "/v1/snapshots/s-12", None),
                          ("GET", "/v1/snapshots/s-12", None),
                          ("DELETE", "/v1/snapshots/s-12", None)])
        with self.assertRaisesRegex(ValueError, r"^snapshot must be a snapshot id"):
            client.delete_snapshot("../tasks/t-1")


class CreateTaskSnapshotArgumentsTest(unittest.TestCase):
    def test_they_become_the_wire_fields_in_ms(self):
        client = client_with(lambda *_: task("pending"))
        client.create_task(command="python3 train.py",
                           snapshot_every=datetime.timedelta(minutes=10),
                           checkpoint_signal="SIGUSR2", checkpoint_timeout=90,
                           from_snapshot="s-12")
        client.create_task(command="true", snapshot_every=12.5, checkpoint_signal=signal.SIGHUP,
                           checkpoint_timeout=datetime.timedelta(0),
                           from_snapshot=gpupool.Snapshot.from_info(snapshot("s-7")))
        client.create_task(command="true", snapshot_every=0, checkpoint_signal="usr1")
        client.create_task(command="true")
        bodies = [c[3] for c in client._call.calls]
        self.assertEqual(bodies[0], {"hold": True, "command": ["/bin/sh", "-c", "python3 train.py"],
                                     "snapshot_every_ms": 600_000, "checkpoint_signal": "SIGUSR2",
                                     "checkpoint_timeout_ms": 90_000, "from_snapshot": "s-12"})
        self.assertEqual({k: bodies[1][k] for k in ("snapshot_every_ms", "checkpoint_signal",
                                                    "checkpoint_timeout_ms", "from_snapshot")},
                         {"snapshot_every_ms": 12_500, "checkpoint_signal": "SIGHUP",
                          "checkpoint_timeout_ms": 0, "from_snapshot": "s-7"})
        self.assertEqual((bodies[2]["snapshot_every_ms"], bodies[2]["checkpoint_signal"]),
                         (0, "SIGUSR1"))
        self.assertEqual(bodies[3], {"hold": True, "command": ["/bin/sh", "-c", "true"]},
                         "none sent when not given")

    def test_a_job_and_an_array_take_the_same_fields(self):
        client = client_with(lambda m, path, q: (
            {"id": "j-1", "state": "pending", "members": []} if path == "/v1/jobs"
            else {"id": "a-1", "array": "0-1", "tasks": ["t-1", "t-2"]}))
        client.create_task(command="true", nodes=2, snapshot_every=60, checkpoint_timeout=5)
        self.assertEqual({k: client._call.calls[0][3].get(k) for k in
                          ("nodes", "snapshot_every_ms", "checkpoint_timeout_ms")},
                         {"nodes": 2, "snapshot_every_ms": 60_000, "checkpoint_timeout_ms": 5000})
        client.create_tasks("0-1", command="true")
        self.assertNotIn("snapshot_every_ms", client._call.calls[1][3])

    def test_wrong_arguments_are_errors_naming_them_before_any_request(self):
        client = client_with(lambda *_: self.fail("no request is sent"))
        cases = [
            (dict(snapshot_every=5), ValueError,
             r"^snapshot_every must be 0 \(snapshots only when asked and before a stop\) or at "
             r"least 10 s, got 5$"),
            (dict(snapshot_every=-1), ValueError, r"^snapshot_every must be >= 0"),
            (dict(snapshot_every="10m"), TypeError, r"^snapshot_every must be a timedelta"),
            (dict(checkpoint_timeout=3601), ValueError,
             r"^checkpoint_timeout must be at most 1 hour, got 3601$"),
            (dict(checkpoint_timeout=-1), ValueError, r"^checkpoint_timeout must be >= 0"),
            (dict(checkpoint_signal="SIGKILL"), ValueError,
             r"^checkpoint_signal must be one of SIGUSR1, SIGUSR2, .*, got 'SIGKILL'$"),
            (dict(checkpoint_signal=signal.SIGSTOP), ValueError,
             r"^checkpoint_signal must be one of "),
            (dict(checkpoint_signal=10), TypeError, r"^checkpoint_signal must be a signal's name"),
            (dict(from_snapshot="t-12"), ValueError,
             r"^from_snapshot must be a snapshot id \('s-12'\) or a Snapshot, got 't-12'$"),
            (dict(from_snapshot=12), TypeError, r"^from_snapshot must be a snapshot id"),
        ]
        for kwargs, error, message in cases:
            with self.subTest(**{k: repr(v) for k, v in kwargs.items()}):
                with self.assertRaisesRegex(error, message):
                    client.create_task(command="true", **kwargs)
        self.assertEqual(client._call.calls, [])


if __name__ == "__main__":
    unittest.main()
