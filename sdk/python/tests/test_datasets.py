"""Datasets without a server (gpupool/datasets.py, the Client and Task calls): the requests
create_dataset, list_datasets, get_dataset, publish, delete_version and delete send, the TaskSubmit
`datasets` create_task and create_tasks send ("NAME[@VERSION]" keys or strings), the errors that
name a wrong argument before any request (overlaps with the task's volumes included), and what the
SDK makes of the server's answers."""

import datetime
import unittest

import gpupool
from gpupool.task import Task

from .test_jobs import client_with

GI = 1 << 30
SHA = "ab" * 32


def version(n, **extra):
    info = {"version": n, "manifest": SHA, "files": 10 * n, "bytes": n * GI, "new_bytes": GI,
            "created_ms": 1_700_000_000_123, "created_by": "alice"}
    info.update(extra)
    return info


def dataset(id_="d-3", name="imagenet", versions=(1, 2), **extra):
    info = {"id": id_, "name": name, "project": "p", "published": False,
            "versions": [version(n) for n in versions], "created_ms": 1_700_000_000_123,
            "created_by": "alice", "used_by": []}
    info.update(extra)
    return info


class DatasetRecordTest(unittest.TestCase):
    def test_the_servers_object_becomes_a_dataset_with_its_versions(self):
        d = gpupool.Dataset(client_with([]), dataset(used_by=["t-1"], later_field="x"))
        self.assertEqual((d.id, d.name, d.project, d.published, d.created_ms, d.created_by,
                          d.used_by),
                         ("d-3", "imagenet", "p", False, 1_700_000_000_123, "alice", ["t-1"]))
        self.assertEqual(d.info["later_field"], "x")
        self.assertEqual(d.versions, [
            gpupool.DatasetVersion(1, SHA, 10, GI, GI, 1_700_000_000_123, "alice"),
            gpupool.DatasetVersion(2, SHA, 20, 2 * GI, GI, 1_700_000_000_123, "alice")])
        self.assertEqual(d.latest.version, 2)
        self.assertEqual(d.version(1).files, 10)
        self.assertEqual(d.created, datetime.datetime(2023, 11, 14, 22, 13, 20, 123000,
                                                      tzinfo=datetime.timezone.utc))
        self.assertEqual(d.latest.created, d.created)
        self.assertEqual(repr(d), "<gpupool.Dataset d-3 'imagenet' of p v2 (20 files, "
                                  "2147483648 bytes)>")
        with self.assertRaisesRegex(KeyError, r"imagenet has no version 3; it has \[1, 2\]"):
            d.version(3)
        with self.assertRaisesRegex(ValueError, r"^version 0 is not a number ≥ 1$"):
            d.version(0)

    def test_an_empty_dataset_has_no_latest(self):
        d = gpupool.Dataset(None, dataset(versions=(), published=True))
        self.assertIsNone(d.latest)
        self.assertEqual(repr(d), "<gpupool.Dataset d-3 'imagenet' of p no version yet "
                                  "published>")
        with self.assertRaisesRegex(KeyError, r"has no version 1; it has none"):
            d.version(1)

    def test_refresh_publish_delete_a_version_and_delete(self):
        answers = [dataset(used_by=["t-9"]), dataset(published=True),
                   dataset(published=False), dataset(versions=(2,)),
                   {"id": "d-3", "deleted": True}]
        client = client_with(answers)
        d = gpupool.Dataset(client, dataset())
        self.assertIs(d.refresh(), d)
        self.assertEqual(d.used_by, ["t-9"])
        self.assertIs(d.publish(), d)
        self.assertTrue(d.published)
        self.assertFalse(d.publish(False).published)
        self.assertIs(d.delete_version(1), d)
        self.assertEqual([v.version for v in d.versions], [2])
        self.assertIsNone(d.delete())
        self.assertEqual(client._call.calls,
                         [("GET", "/v1/datasets/d-3", None, None),
                          ("PATCH", "/v1/datasets/d-3", None, {"published": True}),
                          ("PATCH", "/v1/datasets/d-3", None, {"published": False}),
                          ("DELETE", "/v1/datasets/d-3/versions/1", None, None),
                          ("DELETE", "/v1/datasets/d-3", None, None)])
        for bad, error, message in ((0, ValueError, r"^version 0 is not a number ≥ 1$"),
                                    ("1", TypeError, r"^version must be an int, got str$"),
                                    (True, TypeError, r"^version must be an int, got bool$")):
            with self.subTest(version=bad):
                with self.assertRaisesRegex(error, message):
                    d.delete_version(bad)
        self.assertEqual(len(client._call.calls), 5, "no request for a wrong version")


class ClientDatasetTest(unittest.TestCase):
    def test_create_sends_a_dataset_create(self):
        client = client_with(lambda *_: dataset(versions=()))
        d = client.create_dataset("imagenet")
        self.assertIsInstance(d, gpupool.Dataset)
        self.assertEqual((d.id, d.versions), ("d-3", []))
        client.create_dataset("coco.2017", project="p")
        self.assertEqual(client._call.calls, [
            ("POST", "/v1/datasets", None, {"name": "imagenet"}),
            ("POST", "/v1/datasets", None, {"name": "coco.2017", "project": "p"})])

    def test_create_refuses_wrong_names_before_any_request(self):
        client = client_with(lambda *_: self.fail("no request is sent"))
        cases = [
            ("ImageNet", ValueError,
             r"^name 'ImageNet' must start with a lower-case letter or a digit$"),
            ("my data", ValueError,
             r"^name 'my data' may hold only lower-case letters, digits, '_', '.' and '-'$"),
            ("", ValueError, r"^name '' must be 1 to 63 characters$"),
            ("d-12", ValueError,
             r"^name 'd-12' is a dataset id's form \(d-<number>\); choose another name$"),
            (3, TypeError, r"^name must be a str, got int$"),
        ]
        for name, error, message in cases:
            with self.subTest(name=name):
                with self.assertRaisesRegex(error, message):
                    client.create_dataset(name)
        self.assertEqual(client._call.calls, [])

    def test_list_get_publish_delete_a_version_and_delete(self):
        def answer(method, path, query):
            if path == "/v1/datasets":
                return {"datasets": [dataset("d-1", "a"), dataset()]}
            return {"id": "d-3", "deleted": True} if path == "/v1/datasets/imagenet" and \
                method == "DELETE" else dataset()

        client = client_with(answer)
        self.assertEqual([(d.id, d.name) for d in client.list_datasets()],
                         [("d-1", "a"), ("d-3", "imagenet")])
        client.list_datasets(project="p")
        got = client.get_dataset("imagenet")
        self.assertEqual(got.latest.version, 2)
        client.get_dataset("d-3")
        client.get_dataset(got)
        self.assertEqual(client.publish_dataset("imagenet").id, "d-3")
        client.publish_dataset(got, published=False)
        self.assertEqual(client.delete_dataset_version("imagenet", 1).id, "d-3")
        self.assertIsNone(client.delete_dataset("imagenet"))
        client.delete_dataset(got)
        self.assertEqual([c[:4] for c in client._call.calls], [
            ("GET", "/v1/datasets", {"project": None}, None),
            ("GET", "/v1/datasets", {"project": "p"}, None),
            ("GET", "/v1/datasets/imagenet", None, None),
            ("GET", "/v1/datasets/d-3", None, None),
            ("GET", "/v1/datasets/d-3", None, None),
            ("PATCH", "/v1/datasets/imagenet", None, {"published": True}),
            ("PATCH", "/v1/datasets/d-3", None, {"published": False}),
            ("DELETE", "/v1/datasets/imagenet/versions/1", None, None),
            ("DELETE", "/v1/datasets/imagenet", None, None),
            ("DELETE", "/v1/datasets/d-3", None, None),
        ])
        for bad, error, message in (
                ("../tasks/t-1", ValueError,
                 r"^dataset '../tasks/t-1' must start with a lower-case letter or a digit \(a "
                 r"dataset is named by its name or its id, 'd-3'\)$"),
                ("a/b", ValueError, r"^dataset 'a/b' may hold only"),
                (gpupool.Volume(None, {"id": "v-3"}), TypeError,
                 r"^dataset must be a dataset's name, its id \('d-3'\) or a Dataset, got Volume$")):
            with self.subTest(dataset=bad):
                with self.assertRaisesRegex(error, message):
                    client.delete_dataset(bad)
                with self.assertRaisesRegex(error, message):
                    client.get_dataset(bad)
        with self.assertRaisesRegex(ValueError, r"^version -1 is not a number ≥ 1$"):
            client.delete_dataset_version("imagenet", -1)
        self.assertEqual(len(client._call.calls), 10, "no request for a wrong name or version")


def task(**extra):
    info = {"id": "t-1", "state": "pending", "held": True}
    info.update(extra)
    return info


class CreateTaskDatasetsTest(unittest.TestCase):
    def test_a_mapping_or_strings_become_task_submit_datasets(self):
        client = client_with(lambda *_: task())
        client.create_task(command="true", datasets={"imagenet": "/root/data"})
        client.create_task(command="true", datasets={"coco@3": "coco/", "d-7@12": "/root/d7"})
        client.create_task(command="true",
                           datasets=["imagenet:/root/data", "coco@2:/root/coco:ro", "d-9:x"])
        ds = gpupool.Dataset(client, dataset("d-5"))
        client.create_task(command="true", datasets={ds: "/root/d"},
                           volumes={"ckpt": "/root/ckpt"})
        client.create_task(command="true", datasets=[])
        client.create_task(command="true")
        bodies = [c[3] for c in client._call.calls]
        self.assertEqual(bodies[0], {"hold": True, "command": ["/bin/sh", "-c", "true"],
                                     "datasets": [{"dataset": "imagenet", "version": 0,
                                                   "path": "/root/data"}]})
        self.assertEqual(bodies[1]["datasets"],
                         [{"dataset": "coco", "version": 3, "path": "/root/coco"},
                          {"dataset": "d-7", "version": 12, "path": "/root/d7"}])
        self.assertEqual(bodies[2]["datasets"],
                         [{"dataset": "imagenet", "version": 0, "path": "/root/data"},
                          {"dataset": "coco", "version": 2, "path": "/root/coco"},
                          {"dataset": "d-9", "version": 0, "path": "/root/x"}])
        self.assertEqual((bodies[3]["datasets"], bodies[3]["volumes"]),
                         ([{"dataset": "d-5", "version": 0, "path": "/root/d"}],
                          [{"volume": "ckpt", "path": "/root/ckpt", "read_only": False}]))
        self.assertEqual(bodies[4]["datasets"], [])
        self.assertNotIn("datasets", bodies[5], "none sent when not given")

    def test_an_array_and_a_job_take_them_too(self):
        client = client_with(lambda m, path, q: (
            {"id": "j-1", "state": "pending", "members": []} if path == "/v1/jobs"
            else {"id": "a-1", "array": "0-1", "tasks": ["t-1", "t-2"]}))
        client.create_tasks("0-1", command="true", datasets=["imagenet@1:/root/data"])
        client.create_task(command="true", nodes=2, datasets={"imagenet": "/root/data"})
        self.assertEqual([c[3]["datasets"] for c in client._call.calls],
                         [[{"dataset": "imagenet", "version": 1, "path": "/root/data"}],
                          [{"dataset": "imagenet", "version": 0, "path": "/root/data"}]])

    def test_wrong_mounts_are_errors_naming_them_before_any_request(self):
        client = client_with(lambda *_: self.fail("no request is sent"))
        cases = [
            (["imagenet"], {}, ValueError,
             r"^datasets: 'imagenet' needs a path: 'NAME\[@VERSION\]:/root/PATH'$"),
            (["imagenet@0:/root/d"], {}, ValueError,
             r"^datasets: dataset: 'imagenet@0': version '0' is not a number ≥ 1$"),
            ({"imagenet@latest": "/root/d"}, {}, ValueError,
             r"^datasets: a key: 'imagenet@latest': version 'latest' is not a number ≥ 1$"),
            ({"imagenet@": "/root/d"}, {}, ValueError, r"version '' is not a number ≥ 1$"),
            (["imagenet:/root"], {}, ValueError,
             r"^datasets: path of imagenet '/root' is the task's whole workspace /root"),
            ({"imagenet": "/data"}, {}, ValueError,
             r"^datasets: path of imagenet '/data' is outside the task's workspace /root"),
            (["ImageNet:/root/d"], {}, ValueError,
             r"^datasets: dataset 'ImageNet' must start with a lower-case letter or a digit"),
            ({3: "/root/d"}, {}, TypeError, r"^datasets: a key must be a dataset's name"),
            ({"imagenet": None}, {}, TypeError, r"^datasets: path of imagenet must be a str"),
            (["imagenet:/root/a", "imagenet@2:/root/b"], {}, ValueError,
             r"^datasets: dataset 'imagenet' is mounted twice$"),
            (["a:/root/a", "b:/root/a/x"], {}, ValueError,
             r"^datasets: path /root/a/x of 'b' overlaps /root/a of 'a'$"),
            ({"imagenet": "/root/data/in"}, {"volumes": {"out": "/root/data"}}, ValueError,
             r"^datasets: path /root/data/in of 'imagenet' overlaps /root/data of volume 'out'$"),
            ([f"d{i}:/root/d{i}" for i in range(9)], {}, ValueError,
             r"^datasets: 9 mounts; at most 8 are allowed$"),
            ("imagenet:/root/data", {}, TypeError,
             r"^datasets must be a mapping .* not one string"),
            ([("imagenet", "/root/data")], {}, TypeError,
             r"^datasets: each item must be a 'NAME\[@VERSION\]:/root/PATH' string, got tuple$"),
        ]
        for datasets, extra, error, message in cases:
            with self.subTest(datasets=datasets):
                with self.assertRaisesRegex(error, message):
                    client.create_task(command="true", datasets=datasets, **extra)
        self.assertEqual(client._call.calls, [])


class TaskDatasetsTest(unittest.TestCase):
    def test_a_tasks_mounts_as_the_server_resolved_them(self):
        client = client_with(lambda *_: self.fail("read from info, no request"))
        t = Task(client, task(datasets=[
            {"dataset": "imagenet", "version": 2, "path": "/root/data", "dataset_id": "d-3",
             "project": "p", "manifest": SHA},
            {"dataset": "d-9", "version": 1, "path": "/root/shared", "dataset_id": "d-9",
             "project": "p-other", "manifest": SHA, "later_field": 1}]))
        self.assertEqual(t.datasets, [
            gpupool.DatasetMount("imagenet", 2, "/root/data", "d-3", "p", SHA),
            gpupool.DatasetMount("d-9", 1, "/root/shared", "d-9", "p-other", SHA)])
        self.assertEqual(Task(client, task()).datasets, [], "a record without them: none")


if __name__ == "__main__":
    unittest.main()
