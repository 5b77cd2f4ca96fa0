"""Remote paths and the upload plan (gpupool/files.py): the workspace is /root."""

import os
import tempfile
import unittest

from gpupool import files


class TaskPathTest(unittest.TestCase):
    def test_root_and_relative_paths(self):
        self.assertEqual(files.task_path("/root/"), "")
        self.assertEqual(files.task_path("/root"), "")
        self.assertEqual(files.task_path("/root/output"), "output")
        self.assertEqual(files.task_path("output/"), "output")
        self.assertEqual(files.task_path("./a//b"), "a/b")

    def test_paths_outside_the_workspace_are_refused(self):
        with self.assertRaisesRegex(ValueError, r"'/etc/passwd' is outside the task's "
                                                r"workspace /root"):
            files.task_path("/etc/passwd")
        with self.assertRaisesRegex(ValueError, "/rootfs"):
            files.task_path("/rootfs/a")
        with self.assertRaisesRegex(ValueError, "'..' component"):
            files.task_path("/root/../etc")


class PlanUploadTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        os.chdir(self.dir.name)
        for rel in ("train.py", "model.py", "data/a.txt", "data/sub/b.txt"):
            os.makedirs(os.path.dirname(rel) or ".", exist_ok=True)
            with open(rel, "w", encoding="utf-8") as f:
                f.write(rel)

    def tearDown(self):
        os.chdir("/")
        self.dir.cleanup()

    def test_files_into_a_directory(self):
        self.assertEqual(files.plan_upload(["train.py", "model.py"], "/root/"),
                         [("train.py", "train.py"), ("model.py", "model.py")])
        self.assertEqual(files.plan_upload(["train.py"], "/root/code/"),
                         [("train.py", "code/train.py")])

    def test_one_file_under_a_new_name(self):
        self.assertEqual(files.plan_upload(["train.py"], "/root/main.py"),
                         [("train.py", "main.py")])

    def test_a_directory_recursively(self):
        self.assertEqual(files.plan_upload(["data"], "/root/"),
                         [(os.path.join("data", "a.txt"), "data/a.txt"),
                          (os.path.join("data", "sub", "b.txt"), "data/sub/b.txt")])

    def test_a_missing_source_is_named(self):
        with self.assertRaisesRegex(FileNotFoundError, "'nope.py' does not exist"):
            files.plan_upload(["nope.py"], "/root/")


if __name__ == "__main__":
    unittest.main()
