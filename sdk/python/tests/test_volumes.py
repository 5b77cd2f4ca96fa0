"""Volumes without a server (gpupool/volumes.py, the Client and Task calls): the requests
create_volume, list_volumes, get_volume, resize and delete send, the sizes they take ("200Gi"),
the TaskSubmit `volumes` create_task and create_tasks send, the errors that name a wrong argument
before any request, and what the SDK makes of the server's answers."""

import datetime
import unittest

import gpupool
from gpupool.task import Task
from gpupool.volumes import format_size, parse_size

from .test_jobs import client_with

GI = 1 << 30


def volume(id_="v-3", name="data", **extra):
    info = {"id": id_, "name": name, "project": "p", "size_bytes": 200 * GI, "shared": False,
            "node": "", "state": "ready", "created_ms": 1_700_000_000_123, "created_by": "alice",
            "used_by": []}
    info.update(extra)
    return info


class SizeTest(unittest.TestCase):
    def test_bytes_or_a_binary_unit(self):
        cases = [(1, 1), (5 * GI, 5 * GI), ("200Gi", 200 * GI), ("200G", 200 * GI),
                 ("200GiB", 200 * GI), ("200gb", 200 * GI), ("512M", 512 << 20),
                 ("512Mi", 512 << 20), ("1T", 1 << 40), ("1Ti", 1 << 40), ("64K", 64 << 10),
                 ("1P", 1 << 50), ("10B", 10), (" 3 Gi ", 3 * GI)]
        for value, expected in cases:
            with self.subTest(value=value):
                self.assertEqual(parse_size(value), expected)

    def test_wrong_sizes_name_the_argument(self):
        cases = [
            ("1024", ValueError, r"^size '1024' needs a unit: '1024Gi'\? \(K, M, G, T, P: "
                                 r"binary; or give bytes as an int\)$"),
            ("1.5T", ValueError, r"^size '1.5T' is not a size: use a whole number and a binary "
                                 r"unit, like '512M', '200Gi' or '1T'"),
            ("20 GB free", ValueError, r"^size '20 GB free' is not a size"),
            ("5X", ValueError, r"^size '5X' is not a size"),
            ("", ValueError, r"^size '' is not a size"),
            (0, ValueError, r"^size must be at least 1 byte, got 0$"),
            (-1, ValueError, r"^size must be at least 1 byte, got -1$"),
            ("0Gi", ValueError, r"^size must be at least 1 byte, got '0Gi'$"),
            ("2P", ValueError, r"^size must be at most 1 PiB \(1125899906842624 bytes\)"),
            (1.5, TypeError, r"^size must be bytes \(an int\) or a size with a unit \('200Gi'\), "
                             r"got float$"),
            (True, TypeError, r"^size must be bytes"),
            (None, TypeError, r"^size must be bytes"),
        ]
        for value, error, message in cases:
            with self.subTest(value=value):
                with self.assertRaisesRegex(error, message):
                    parse_size(value)

    def test_format(self):
        self.assertEqual([format_size(s) for s in (200 * GI, 1 << 40, 512 << 20, 3 << 10, 10)],
                         ["200Gi", "1Ti", "512Mi", "3Ki", "10 B"])


class VolumeRecordTest(unittest.TestCase):
    def test_the_servers_object_becomes_a_volume(self):
        v = gpupool.Volume(client_with([]), volume(used_by=["t-1", "t-2"], later_field="x"))
        self.assertEqual((v.id, v.name, v.project, v.size_bytes, v.shared, v.node, v.state,
                          v.created_ms, v.created_by, v.used_by),
                         ("v-3", "data", "p", 200 * GI, False, "", "ready", 1_700_000_000_123,
                          "alice", ["t-1", "t-2"]))
        self.assertEqual(v.info["later_field"], "x")
        self.assertEqual(v.created, datetime.datetime(2023, 11, 14, 22, 13, 20, 123000,
                                                      tzinfo=datetime.timezone.utc))
        self.assertEqual(repr(v), "<gpupool.Volume v-3 'data' 200Gi node-local, not yet bound "
                                  "ready>")
        self.assertIn("on n1 ", repr(gpupool.Volume(None, volume(node="n1"))))
        self.assertIn(" shared ", repr(gpupool.Volume(None, volume(shared=True))))

    def test_refresh_resize_and_delete(self):
        answers = [volume(node="n1", used_by=["t-9"]), volume(size_bytes=300 * GI),
                   {"id": "v-3", "deleted": True}]
        client = client_with(answers)
        v = gpupool.Volume(client, volume())
        self.assertIs(v.refresh(), v)
        self.assertEqual((v.node, v.used_by), ("n1", ["t-9"]))
        self.assertIs(v.resize("300Gi"), v)
        self.assertEqual(v.size_bytes, 300 * GI)
        self.assertIsNone(v.delete())
        self.assertEqual(client._call.calls,
                         [("GET", "/v1/volumes/v-3", None, None),
                          ("PATCH", "/v1/volumes/v-3", None, {"size_bytes": 300 * GI}),
                          ("DELETE", "/v1/volumes/v-3", None, None)])
        with self.assertRaisesRegex(ValueError, r"^size '300' needs a unit"):
            v.resize("300")
        self.assertEqual(len(client._call.calls), 3, "no request for a wrong size")


class ClientVolumeTest(unittest.TestCase):
    def test_create_sends_a_volume_create(self):
        client = client_with(lambda *_: volume())
        v = client.create_volume("data", "200Gi")
        self.assertIsInstance(v, gpupool.Volume)
        self.assertEqual(v.id, "v-3")
        client.create_volume("ckpt", 1 << 40, node="n1", project="p")
        client.create_volume("shared.ds-1", "1T", shared=True)
        self.assertEqual(client._call.calls, [
            ("POST", "/v1/volumes", None, {"name": "data", "size_bytes": 200 * GI,
                                           "shared": False}),
            ("POST", "/v1/volumes", None, {"name": "ckpt", "size_bytes": 1 << 40,
                                           "shared": False, "node": "n1", "project": "p"}),
            ("POST", "/v1/volumes", None, {"name": "shared.ds-1", "size_bytes": 1 << 40,
                                           "shared": True}),
        ])

    def test_create_refuses_wrong_arguments_before_any_request(self):
        client = client_with(lambda *_: self.fail("no request is sent"))
        cases = [
            (("Data", "1Gi"), {}, ValueError,
             r"^name 'Data' must start with a lower-case letter or a digit$"),
            (("_x", "1Gi"), {}, ValueError, r"^name '_x' must start with a lower-case letter"),
            (("my data", "1Gi"), {}, ValueError,
             r"^name 'my data' may hold only lower-case letters, digits, '_', '.' and '-'$"),
            (("", "1Gi"), {}, ValueError, r"^name '' must be 1 to 63 characters$"),
            (("a" * 64, "1Gi"), {}, ValueError, r"must be 1 to 63 characters$"),
            (("v-12", "1Gi"), {}, ValueError,
             r"^name 'v-12' is a volume id's form \(v-<number>\); choose another name$"),
            ((3, "1Gi"), {}, TypeError, r"^name must be a str, got int$"),
            (("data", "1.5T"), {}, ValueError, r"^size '1.5T' is not a size"),
            (("data", 0), {}, ValueError, r"^size must be at least 1 byte"),
            (("data", "1Gi"), {"shared": True, "node": "n1"}, ValueError,
             r"^node applies to a node-local volume"),
        ]
        for args, kwargs, error, message in cases:
            with self.subTest(args=args, kwargs=kwargs):
                with self.assertRaisesRegex(error, message):
                    client.create_volume(*args, **kwargs)
        self.assertEqual(client._call.calls, [])

    def test_list_get_resize_and_delete(self):
        def answer(method, path, query):
            if path == "/v1/volumes":
                return {"volumes": [volume("v-1", "a"), volume("v-3")]}
            return {"id": "v-3", "deleted": True} if method == "DELETE" else volume()

        client = client_with(answer)
        self.assertEqual([(v.id, v.name) for v in client.list_volumes()],
                         [("v-1", "a"), ("v-3", "data")])
        client.list_volumes(project="p")
        got = client.get_volume("data")
        self.assertEqual(got.size_bytes, 200 * GI)
        client.get_volume("v-3")
        client.get_volume(got)
        self.assertEqual(client.resize_volume("data", "1Ti").id, "v-3")
        self.assertIsNone(client.delete_volume("data"))
        client.delete_volume(got)
        self.assertEqual([c[:4] for c in client._call.calls], [
            ("GET", "/v1/volumes", {"project": None}, None),
            ("GET", "/v1/volumes", {"project": "p"}, None),
            ("GET", "/v1/volumes/data", None, None),
            ("GET", "/v1/volumes/v-3", None, None),
            ("GET", "/v1/volumes/v-3", None, None),
            ("PATCH", "/v1/volumes/data", None, {"size_bytes": 1 << 40}),
            ("DELETE", "/v1/volumes/data", None, None),
            ("DELETE", "/v1/volumes/v-3", None, None),
        ])
        for bad, error, message in (
                ("../tasks/t-1", ValueError,
                 r"^volume '../tasks/t-1' must start with a lower-case letter or a digit \(a "
                 r"volume is named by its name or its id, 'v-3'\)$"),
                ("a/b", ValueError, r"^volume 'a/b' may hold only"),
                (3, TypeError, r"^volume must be a volume's name, its id \('v-3'\) or a Volume")):
            with self.subTest(volume=bad):
                with self.assertRaisesRegex(error, message):
                    client.delete_volume(bad)
                with self.assertRaisesRegex(error, message):
                    client.get_volume(bad)
        self.assertEqual(len(client._call.calls), 8, "no request for a wrong name")


def task(**extra):
    info = {"id": "t-1", "state": "pending", "held": True}
    info.update(extra)
    return info


class CreateTaskVolumesTest(unittest.TestCase):
    def test_a_mapping_or_strings_become_task_submit_volumes(self):
        client = client_with(lambda *_: task())
        client.create_task(command="true", volumes={"data": "/root/data"})
        client.create_task(command="true", volumes={"v-3": "models/", "ckpt": "/root/ckpt"})
        client.create_task(command="true",
                           volumes=["data:/root/data:ro", "ckpt:/root/out/ckpt:rw", "v-9:x"])
        vol = gpupool.Volume(client, volume("v-7"))
        client.create_task(command="true", volumes={vol: "/root/d"})
        client.create_task(command="true", volumes=[])
        client.create_task(command="true")
        bodies = [c[3] for c in client._call.calls]
        self.assertEqual(bodies[0], {"hold": True, "command": ["/bin/sh", "-c", "true"],
                                     "volumes": [{"volume": "data", "path": "/root/data",
                                                  "read_only": False}]})
        self.assertEqual(bodies[1]["volumes"],
                         [{"volume": "v-3", "path": "/root/models", "read_only": False},
                          {"volume": "ckpt", "path": "/root/ckpt", "read_only": False}])
        self.assertEqual(bodies[2]["volumes"],
                         [{"volume": "data", "path": "/root/data", "read_only": True},
                          {"volume": "ckpt", "path": "/root/out/ckpt", "read_only": False},
                          {"volume": "v-9", "path": "/root/x", "read_only": False}])
        self.assertEqual(bodies[3]["volumes"],
                         [{"volume": "v-7", "path": "/root/d", "read_only": False}])
        self.assertEqual(bodies[4]["volumes"], [])
        self.assertNotIn("volumes", bodies[5], "none sent when not given")

    def test_an_array_and_a_job_take_them_too(self):
        client = client_with(lambda m, path, q: (
            {"id": "j-1", "state": "pending", "members": []} if path == "/v1/jobs"
            else {"id": "a-1", "array": "0-1", "tasks": ["t-1", "t-2"]}))
        client.create_tasks("0-1", command="true", volumes=["data:/root/data:ro"])
        client.create_task(command="true", nodes=2, volumes={"data": "/root/data"})
        self.assertEqual([c[3]["volumes"] for c in client._call.calls],
                         [[{"volume": "data", "path": "/root/data", "read_only": True}],
                          [{"volume": "data", "path": "/root/data", "read_only": False}]])

    def test_wrong_mounts_are_errors_naming_them_before_any_request(self):
        client = client_with(lambda *_: self.fail("no request is sent"))
        cases = [
            (["data"], ValueError, r"^volumes: 'data' needs a path: 'NAME:/root/PATH\[:ro\]'$"),
            (["data:/root/x:rx"], ValueError,
             r"^volumes: 'data:/root/x:rx': 'rx' is neither ro nor rw$"),
            (["data:/root"], ValueError,
             r"^volumes: path of data '/root' is the task's whole workspace /root: mount a "
             r"volume below it, e.g. /root/data$"),
            ({"data": "/root/"}, ValueError, r"^volumes: path of data '/root/' is the task's "
                                             r"whole workspace"),
            ({"data": "/data"}, ValueError,
             r"^volumes: path of data '/data' is outside the task's workspace /root"),
            (["data:/root/../etc"], ValueError, r"has a '..' component"),
            (["Data:/root/d"], ValueError,
             r"^volumes: volume 'Data' must start with a lower-case letter or a digit"),
            ({"my data": "/root/d"}, ValueError, r"^volumes: a key 'my data' may hold only"),
            ({3: "/root/d"}, TypeError, r"^volumes: a key must be a volume's name"),
            ({"data": None}, TypeError, r"^volumes: path of data must be a str"),
            (["data:/root/a", "data:/root/b"], ValueError,
             r"^volumes: volume 'data' is mounted twice$"),
            (["a:/root/a", "b:/root/a/x"], ValueError,
             r"^volumes: path /root/a/x of 'b' overlaps /root/a of 'a'$"),
            (["a:/root/a", "b:/root/a/"], ValueError, r"overlaps"),
            ([f"v{i}:/root/d{i}" for i in range(17)], ValueError,
             r"^volumes: 17 mounts; at most 16 are allowed$"),
            ("data:/root/data", TypeError, r"^volumes must be a mapping .* not one string"),
            ([("data", "/root/data")], TypeError,
             r"^volumes: each item must be a 'NAME:/root/PATH\[:ro\]' string, got tuple$"),
        ]
        for volumes, error, message in cases:
            with self.subTest(volumes=volumes):
                with self.assertRaisesRegex(error, message):
                    client.create_task(command="true", volumes=volumes)
        self.assertEqual(client._call.calls, [])


class TaskVolumesTest(unittest.TestCase):
    def test_a_tasks_mounts_as_the_server_resolved_them(self):
        client = client_with(lambda *_: self.fail("read from info, no request"))
        t = Task(client, task(volumes=[
            {"volume": "data", "path": "/root/data", "read_only": True, "volume_id": "v-3",
             "shared": False},
            {"volume": "ds", "path": "/root/ds", "read_only": False, "volume_id": "v-4",
             "shared": True}]))
        self.assertEqual(t.volumes, [
            gpupool.VolumeMount("data", "/root/data", read_only=True, volume_id="v-3"),
            gpupool.VolumeMount("ds", "/root/ds", volume_id="v-4", shared=True)])
        self.assertEqual(Task(client, task()).volumes, [], "a record without them: none")


if __name__ == "__main__":
    unittest.main()
