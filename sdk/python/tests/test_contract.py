"""The SDK is checked against the REST contract, docs/openapi.json (generated from src/proto):
every call the SDK makes is an operation of the document with the query parameters it declares,
the fields create_task sends are TaskSubmit's (JobSubmit's with nodes=N), and the task and job
fields the SDK reads are Task's and Job's, a Snapshot's fields are the schema's and the bodies of
stop and resume are TaskStop's and TaskResume's; a Volume's fields are the schema's, and the bodies
of creating and resizing one and of a task's mounts are VolumeCreate's, VolumeUpdate's and
VolumeMount's; a Dataset's, its versions' and its mounts' fields are the schemas', and the bodies
of creating and publishing one are DatasetCreate's and DatasetUpdate's. A renamed route,
parameter or field fails here, not in a user's program."""

import ast
import dataclasses
import json
import os
import re
import unittest

SDK = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "gpupool")
OPENAPI = os.path.join(SDK, "..", "..", "..", "docs", "openapi.json")


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def _template(node) -> str:
    """A path argument as a template: f"/v1/tasks/{self.id}/logs" -> "/v1/tasks/{}/logs"."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    raise ValueError(f"line {node.lineno}: the path is not a literal")


def sdk_calls():
    """(file:line, method, path template, query keys or None) of each request the SDK makes."""
    for name in sorted(os.listdir(SDK)):
        if not name.endswith(".py"):
            continue
        tree = ast.parse(_read(os.path.join(SDK, name)))
        for func in ast.walk(tree):
            if isinstance(func, ast.FunctionDef):
                yield from _calls_in(name, func)


def _calls_in(name, func):
    # The keys a local variable holding a query gets: `q = {...}` and `q["k"] = ...`.
    local_keys = {}
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    local_keys.setdefault(target.id, set()).update(
                        k.value for k in node.value.keys if isinstance(k, ast.Constant))
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
                        and isinstance(target.slice, ast.Constant)):
                    local_keys.setdefault(target.value.id, set()).add(target.slice.value)
    for node in ast.walk(func):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("_call", "request") and len(node.args) >= 2
                and isinstance(node.args[0], ast.Constant)):
            continue
        keys = None
        for kw in node.keywords:
            if kw.arg == "query" and isinstance(kw.value, ast.Dict):
                keys = {k.value for k in kw.value.keys}
            elif kw.arg == "query" and isinstance(kw.value, ast.Name):
                keys = local_keys.get(kw.value.id)
        yield f"{name}:{node.lineno}", node.args[0].value, _template(node.args[1]), keys


class ContractTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.doc = json.loads(_read(OPENAPI))
        cls.ops = {}
        for path, item in cls.doc["paths"].items():
            for method, op in item.items():
                key = (method.upper(), re.sub(r"\{[^}]+\}", "{}", path))
                cls.ops[key] = {p["name"] for p in op.get("parameters", []) if p["in"] == "query"}

    def props(self, schema):
        return set(self.doc["components"]["schemas"][schema]["properties"])

    def test_every_call_is_an_operation_with_its_query_parameters(self):
        calls = list(sdk_calls())
        self.assertGreater(len(calls), 15, "the walk finds the SDK's calls")
        for where, method, path, keys in calls:
            with self.subTest(where=where, call=f"{method} {path}"):
                self.assertIn((method, path), self.ops, "not an operation of docs/openapi.json")
                if keys:
                    self.assertLessEqual(set(keys), self.ops[(method, path)],
                                         "query parameters the operation does not declare")

    def sent_fields(self, function: str, variable: str):
        """The body keys a function of client.py writes: dict literals and variable["key"]."""
        source = _read(os.path.join(SDK, "client.py"))
        func = next(n for n in ast.walk(ast.parse(source))
                    if isinstance(n, ast.FunctionDef) and n.name == function)
        sent = set()
        for node in ast.walk(func):
            if isinstance(node, ast.Dict):
                sent |= {k.value for k in node.keys if isinstance(k, ast.Constant)}
            if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
                    and node.value.id == variable and isinstance(node.slice, ast.Constant)):
                sent.add(node.slice.value)
        return sent

    def test_create_task_sends_task_submit_fields(self):
        sent = self.sent_fields("_submit_body", "optional")
        self.assertIn("gpu_milli", sent)
        self.assertLessEqual(sent, self.props("TaskSubmit"))

    def test_create_tasks_sends_a_task_array_submit(self):
        sent = self.sent_fields("create_tasks", "body")
        self.assertEqual(sent, {"array"})
        self.assertLessEqual(sent | self.sent_fields("_submit_body", "optional"),
                             self.props("TaskArraySubmit"))
        source = _read(os.path.join(SDK, "arrays.py"))
        read = set(re.findall(r"(?:info|refresh\(\))\[\"(\w+)\"\]", source))
        self.assertGreaterEqual(read, {"id", "tasks", "states", "array"})
        self.assertLessEqual(read, self.props("TaskArray"))

    def test_create_task_with_nodes_sends_a_job_submit(self):
        source = _read(os.path.join(SDK, "jobs.py"))
        func = next(n for n in ast.walk(ast.parse(source))
                    if isinstance(n, ast.FunctionDef) and n.name == "job_fields")
        sent = set()
        for node in ast.walk(func):
            if isinstance(node, ast.Dict):
                sent |= {k.value for k in node.keys if isinstance(k, ast.Constant)}
            if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
                    and node.value.id == "body" and isinstance(node.slice, ast.Constant)):
                sent.add(node.slice.value)
        self.assertEqual(sent, {"nodes", "members_per_node", "topology_label", "topology"})
        self.assertLessEqual(sent | self.sent_fields("_submit_body", "optional"),
                             self.props("JobSubmit"))
        topologies = self.doc["components"]["schemas"]["JobSubmit"]["properties"]["topology"]
        self.assertEqual(set(topologies["enum"]), {"preferred", "required"})

    def test_the_job_fields_the_sdk_reads_are_jobs(self):
        source = _read(os.path.join(SDK, "jobs.py"))
        read = set(re.findall(r"(?:info|refresh\(\))(?:\.get\(|\[)[\"'](\w+)[\"']", source))
        self.assertGreaterEqual(read, {"id", "state", "members", "exit_code", "first_failed",
                                       "reason", "master_addr", "master_port"})
        self.assertLessEqual(read, self.props("Job"))
        member = set(re.findall(r"\bm\[[\"'](\w+)[\"']\]", source))
        member |= set(re.findall(r"\[0\]\[[\"'](\w+)[\"']\]", source))
        self.assertGreaterEqual(member, {"task", "state"})
        self.assertLessEqual(member, self.props("JobMember"))
        # Job.status reads the job's `held` through status_of(info).
        self.assertIn("status_of(self.refresh())", source)
        self.assertIn("held", self.props("Job"))

    def test_the_task_fields_the_sdk_reads_are_tasks(self):
        read = set()
        for name in ("task.py", "client.py"):
            source = _read(os.path.join(SDK, name))
            read |= set(re.findall(r"info(?:\.get\(|\[)\"(\w+)\"", source))
            read |= set(re.findall(r"refresh\(\)(?:\.get\(|\[)\"(\w+)\"", source))
        self.assertGreaterEqual(read, {"state", "held", "runtime_ms", "exit_code", "run",
                                       "resume_from", "work_lost_ms"})
        self.assertLessEqual(read, self.props("TaskDetail"))

    def test_a_snapshot_has_the_schemas_fields(self):
        from gpupool.snapshots import CHECKPOINT_SIGNALS, Snapshot
        self.assertEqual({f.name for f in dataclasses.fields(Snapshot)}, self.props("Snapshot"))
        submit = self.doc["components"]["schemas"]["TaskSubmit"]["properties"]
        self.assertEqual(set(CHECKPOINT_SIGNALS) | {""}, set(submit["checkpoint_signal"]["enum"]))

    def test_volumes_have_the_schemas_fields(self):
        from gpupool.volumes import MAX_MOUNTS, Volume, VolumeMount
        self.assertEqual(set(Volume.FIELDS), self.props("Volume"))
        self.assertEqual({f.name for f in dataclasses.fields(VolumeMount)},
                         self.props("VolumeMount"))
        self.assertIn("volumes", self.props("TaskDetail"))
        self.assertEqual(self.doc["components"]["schemas"]["TaskSubmit"]["properties"]["volumes"]
                         ["maxItems"], MAX_MOUNTS)
        self.assertLessEqual(self.sent_fields("create_volume", "body"), self.props("VolumeCreate"))
        self.assertEqual(self.sent_fields("resize_volume", "body"), {"size_bytes"})
        self.assertLessEqual({"size_bytes"}, self.props("VolumeUpdate"))
        tree = ast.parse(_read(os.path.join(SDK, "volumes.py")))
        sent = set()
        for function in ("parse_mount", "volume_mounts", "resize"):
            func = next(n for n in ast.walk(tree)
                        if isinstance(n, ast.FunctionDef) and n.name == function)
            sent |= {k.value for n in ast.walk(func) if isinstance(n, ast.Dict)
                     for k in n.keys if isinstance(k, ast.Constant)}
        self.assertEqual(sent, {"volume", "path", "read_only", "size_bytes"})
        self.assertLessEqual(sent - {"size_bytes"}, self.props("VolumeMount"))

    def test_datasets_have_the_schemas_fields(self):
        from gpupool.datasets import MAX_MOUNTS, Dataset, DatasetMount, DatasetVersion
        self.assertEqual(set(Dataset.FIELDS), self.props("Dataset"))
        self.assertEqual({f.name for f in dataclasses.fields(DatasetVersion)},
                         self.props("DatasetVersion"))
        self.assertEqual({f.name for f in dataclasses.fields(DatasetMount)},
                         self.props("DatasetMount"))
        self.assertIn("datasets", self.props("TaskDetail"))
        self.assertEqual(self.doc["components"]["schemas"]["TaskSubmit"]["properties"]["datasets"]
                         ["maxItems"], MAX_MOUNTS)
        self.assertLessEqual(self.sent_fields("create_dataset", "body"),
                             self.props("DatasetCreate"))
        self.assertEqual(self.sent_fields("publish_dataset", "body"), {"published"})
        tree = ast.parse(_read(os.path.join(SDK, "datasets.py")))
        sent = set()
        for function in ("_named_version", "parse_mount", "dataset_mounts", "publish"):
            func = next(n for n in ast.walk(tree)
                        if isinstance(n, ast.FunctionDef) and n.name == function)
            sent |= {k.value for n in ast.walk(func) if isinstance(n, ast.Dict)
                     for k in n.keys if isinstance(k, ast.Constant)}
            sent |= {n.slice.value for n in ast.walk(func)
                     if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store)
                     and isinstance(n.slice, ast.Constant)}
        self.assertEqual(sent, {"dataset", "version", "path", "published"})
        self.assertLessEqual(sent - {"published"}, self.props("DatasetMount"))
        self.assertLessEqual({"published"}, self.props("DatasetUpdate"))

    def test_stop_and_resume_send_task_stop_and_task_resume(self):
        tree = ast.parse(_read(os.path.join(SDK, "task.py")))
        for function, schema in (("stop", "TaskStop"), ("resume", "TaskResume")):
            func = next(n for n in ast.walk(tree)
                        if isinstance(n, ast.FunctionDef) and n.name == function)
            sent = {k.value for n in ast.walk(func) if isinstance(n, ast.Dict)
                    for k in n.keys if isinstance(k, ast.Constant)}
            with self.subTest(function=function):
                self.assertTrue(sent)
                self.assertLessEqual(sent, self.props(schema))


if __name__ == "__main__":
    unittest.main()
