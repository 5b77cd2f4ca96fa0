"""The SDK installs offline into a fresh virtual environment (`python3 -m pip install
./sdk/python`: the in-tree build backend needs nothing from PyPI), and what is installed is the
package, importable from anywhere."""

import os
import subprocess
import sys
import tempfile
import unittest

SDK_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class InstallTest(unittest.TestCase):
    def test_pip_installs_it_offline_into_a_fresh_venv(self):
        with tempfile.TemporaryDirectory() as tmp:
            venv = os.path.join(tmp, "venv")
            subprocess.run([sys.executable, "-m", "venv", venv], check=True)
            python = os.path.join(venv, "bin", "python")
            # --no-index: any attempt to fetch a build requirement would fail the install.
            r = subprocess.run([python, "-m", "pip", "install", "--no-index", "-q", SDK_DIR],
                               capture_output=True, text=True, check=False)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertFalse(os.path.exists(os.path.join(SDK_DIR, "build")),
                             "the build leaves nothing in the source tree")
            probe = ("import gpupool, sys; c = gpupool.Client(endpoint='http://127.0.0.1:1', "
                     "access_key='AK', secret_key='SK'); print(gpupool.__file__)")
            r = subprocess.run([python, "-c", probe], capture_output=True, text=True, cwd=tmp,
                               env={"PATH": os.environ.get("PATH", ""), "HOME": tmp},
                               check=False)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(r.stdout.strip().startswith(venv), r.stdout)


if __name__ == "__main__":
    unittest.main()
