"""Distributed jobs without a server (gpupool/jobs.py, Client.create_task(nodes=N)): the request
create_task sends (POST /v1/jobs with the TaskSubmit fields, nodes and the topology; held unless
start=True), the ValueErrors that name a wrong argument before any request, and what a Job does
with the server's answers (status, wait, start/stop, logs of one member or all merged)."""

import base64
import unittest

import gpupool
from gpupool.jobs import Job


def member(index, state="pending", task=None, **extra):
    m = {"index": index, "task": task or f"t-{7 + index}", "state": state, "reason": "",
         "node": "", "address": "", "exit_code": 0, "ended_by": ""}
    m.update(extra)
    return m


def job(state="pending", members=None, **extra):
    info = {"id": "j-7", "project": "p", "name": "ddp", "state": state, "reason": "",
            "held": False, "exit_code": 0, "first_failed": "", "nodes": 2, "members_per_node": 1,
            "topology_label": "", "topology": "preferred", "master_addr": "", "master_port": 0,
            "members": members if members is not None else [member(0), member(1)]}
    info.update(extra)
    return info


class Recorder:
    """Client._call's stand-in: records (method, path, query, body) and answers from `answer`,
    a function of (method, path, query) (or a list of answers, taken in turn)."""

    def __init__(self, answer):
        self.calls = []
        self.answer = answer

    def __call__(self, method, path, query=None, body=None, raw=None, timeout=None):
        self.calls.append((method, path, query, body))
        if callable(self.answer):
            return self.answer(method, path, query)
        return self.answer.pop(0)


def client_with(answer):
    client = gpupool.Client(endpoint="http://127.0.0.1:1", access_key="AK", secret_key="SK")
    client._call = Recorder(answer)
    return client


def log_page(text):
    data = text.encode()
    return {"data_b64": base64.b64encode(data).decode(), "next_offset": len(data),
            "size": len(data), "complete": True}


class CreateJobTest(unittest.TestCase):
    def test_nodes_posts_a_job_with_the_task_fields_held(self):
        client = client_with(lambda *_: job())
        j = client.create_task(command="torchrun train.py", name="ddp", gpu_count=8, nodes=4,
                               max_runtime=60, restartable=True)
        self.assertIsInstance(j, gpupool.Job)
        self.assertEqual((j.id, j.task_ids), ("j-7", ["t-7", "t-8"]))
        [(method, path, _, body)] = client._call.calls
        self.assertEqual((method, path), ("POST", "/v1/jobs"))
        self.assertEqual(body, {"hold": True, "name": "ddp",
                                "command": ["/bin/sh", "-c", "torchrun train.py"],
                                "gpu_count": 8, "max_runtime_ms": 60000, "restartable": True,
                                "nodes": 4})

    def test_start_true_queues_it_and_the_topology_is_sent(self):
        client = client_with(lambda *_: job())
        client.create_task(command=["python3", "x.py"], mig_profile="3g.40gb", nodes=2,
                           members_per_node=2, topology_label="rack", topology="required",
                           start=True)
        body = client._call.calls[0][3]
        self.assertEqual(body, {"hold": False, "command": ["python3", "x.py"],
                                "mig_profile": "3g.40gb", "nodes": 2, "members_per_node": 2,
                                "topology_label": "rack", "topology": "required"})
        client.create_task(command="true", nodes=3, topology_label="rack")
        self.assertEqual(client._call.calls[1][3],
                         {"hold": True, "command": ["/bin/sh", "-c", "true"], "nodes": 3,
                          "topology_label": "rack"})

    def test_without_nodes_it_is_still_a_task(self):
        client = client_with(lambda *_: {"id": "t-1", "state": "pending", "held": True})
        task = client.create_task(command="true", gpu_share=0.5)
        self.assertIsInstance(task, gpupool.Task)
        [(method, path, _, body)] = client._call.calls
        self.assertEqual((method, path), ("POST", "/v1/tasks"))
        self.assertNotIn("nodes", body)
        self.assertEqual(body["gpu_milli"], 500)

    def test_wrong_arguments_are_value_errors_naming_them_before_any_request(self):
        client = client_with(lambda *_: self.fail("no request is sent"))
        cases = [
            (dict(nodes=1), r"^nodes must be 2\.\.4096 .*got 1; for a single task leave nodes"),
            (dict(nodes=0), r"^nodes must be 2\.\.4096"),
            (dict(nodes=4097), r"^nodes must be 2\.\.4096"),
            (dict(nodes=2, gpu_share=0.5), r"^gpu_share cannot be used with nodes"),
            (dict(nodes=2, topology="required"), r"^topology='required' needs topology_label"),
            (dict(nodes=2, topology="preferred"), r"^topology='preferred' needs topology_label"),
            (dict(nodes=2, topology="strict", topology_label="rack"),
             r"^topology must be 'preferred' or 'required', got 'strict'"),
            (dict(nodes=2, topology_label=""), r"^topology_label must be a node label"),
            (dict(nodes=2, members_per_node=0), r"^members_per_node must be 1\.\.4096"),
            (dict(members_per_node=2), r"^members_per_node only apply to a distributed job"),
            (dict(topology_label="rack", topology="required"),
             r"^topology_label, topology only apply to a distributed job: give nodes=N"),
        ]
        for kwargs, message in cases:
            with self.subTest(**kwargs):
                with self.assertRaisesRegex(ValueError, message):
                    client.create_task(command="true", **kwargs)
        for kwargs in (dict(nodes=2.0), dict(nodes=True), dict(nodes="4"),
                       dict(nodes=2, members_per_node="2")):
            with self.subTest(**kwargs):
                with self.assertRaisesRegex(TypeError, r"must be an int"):
                    client.create_task(command="true", **kwargs)
        self.assertEqual(client._call.calls, [])


class JobTest(unittest.TestCase):
    def test_status_is_tasks_lifecycle_and_created_while_held(self):
        answers = {"/v1/jobs/j-7": job("pending", held=True)}
        client = client_with(lambda m, path, q: answers[path])
        j = client.get_job("j-7")
        self.assertEqual(j.status, gpupool.CREATED)
        answers["/v1/jobs/j-7"]["held"] = False
        self.assertEqual(j.status, gpupool.QUEUED)
        for state, status in (("scheduled", gpupool.STARTING), ("starting", gpupool.STARTING),
                              ("running", gpupool.RUNNING), ("succeeded", gpupool.STOPPED),
                              ("failed", gpupool.STOPPED), ("stopped", gpupool.STOPPED),
                              ("lost", gpupool.STOPPED)):
            answers["/v1/jobs/j-7"] = job(state)
            with self.subTest(state=state):
                calls = len(client._call.calls)
                self.assertEqual(j.status, status)
                self.assertEqual(len(client._call.calls), calls + 1, "one read: the job's")

    def test_fields_are_read_on_each_access(self):
        answers = [job("running", master_addr="10.0.0.5", master_port=29500),
                   job("failed", exit_code=3, first_failed="t-8", reason="member 1 (t-8): ..."),
                   job("failed", exit_code=3, first_failed="t-8"),
                   job("failed", exit_code=3, first_failed="t-8",
                       members=[member(0, "stopped", ended_by="t-8"),
                                member(1, "failed", exit_code=3)])]
        client = client_with(answers)
        j = Job(client, job())
        self.assertEqual(j.master_addr, "10.0.0.5")
        self.assertEqual(j.reason, "member 1 (t-8): ...")
        self.assertEqual(j.exit_code, 3)
        members = j.members
        self.assertEqual([(m["index"], m["task"], m["state"], m["ended_by"]) for m in members],
                         [(0, "t-7", "stopped", "t-8"), (1, "t-8", "failed", "")])
        self.assertEqual([c[:2] for c in client._call.calls], [("GET", "/v1/jobs/j-7")] * 4)

    def test_start_releases_and_stop_stops_the_job(self):
        client = client_with(lambda m, path, q: job("stopped" if "stop" in path else "pending"))
        j = Job(client, job())
        self.assertIs(j.start(), j)
        self.assertIs(j.stop(), j)
        self.assertEqual(j.info["state"], "stopped")
        self.assertEqual([c[:2] for c in client._call.calls],
                         [("POST", "/v1/jobs/j-7/release"), ("POST", "/v1/jobs/j-7/stop")])

    def test_wait_returns_once_the_job_and_every_member_ended(self):
        answers = [job("running", members=[member(0, "running"), member(1, "running")]),
                   job("failed", members=[member(0, "failed"), member(1, "running")]),
                   job("failed", members=[member(0, "failed"), member(1, "stopped")])]
        client = client_with(answers)
        j = Job(client, job())
        self.assertIs(j.wait(poll_interval=0), j)
        self.assertEqual(len(client._call.calls), 3)
        client._call.answer = lambda *_: job("running")
        with self.assertRaisesRegex(TimeoutError, r"job j-7 is still running after 0.05 s"):
            j.wait(timeout=0.05, poll_interval=0.01)

    def test_logs_of_one_member_or_all_with_rank_prefixes(self):
        texts = {"t-7": "hello from 0\nsecond\n", "t-8": "hello from 1\r50%\rdone"}

        def answer(method, path, query):
            self.assertEqual((method, query["stream"]), ("GET", "stdout"))
            return log_page(texts[path.split("/")[3]])

        client = client_with(answer)
        j = Job(client, job())
        self.assertEqual(j.logs(member=1), "hello from 1\r50%\rdone")
        self.assertEqual(j.logs(), "[0] hello from 0\n[0] second\n[1] hello from 1\r50%\rdone\n")
        self.assertEqual([c[1] for c in client._call.calls],
                         ["/v1/tasks/t-8/logs", "/v1/tasks/t-7/logs", "/v1/tasks/t-8/logs"])
        with self.assertRaisesRegex(ValueError, r"member must be 0\.\.1 \(job j-7 has 2 members"):
            j.logs(member=2)

    def test_member_is_its_task(self):
        client = client_with(lambda m, path, q: {"id": path.split("/")[3], "state": "running",
                                                 "job_id": "j-7", "member_index": 1})
        j = Job(client, job())
        task = j.member(1)
        self.assertEqual((task.id, task.info["member_index"]), ("t-8", 1))
        self.assertEqual([t.id for t in j.tasks()], ["t-7", "t-8"])


if __name__ == "__main__":
    unittest.main()
