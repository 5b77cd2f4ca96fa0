"""Where Client() finds its endpoint and keys when they are not passed (gpupool/_config.py)."""

import os
import tempfile
import unittest

from gpupool import _config
from gpupool.errors import ConfigError


class ConfigTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.home = self.dir.name
        self.env = {"HOME": self.home, "GPUPOOL_DATA_DIR": os.path.join(self.home, "pool")}

    def tearDown(self):
        self.dir.cleanup()

    def write(self, rel, text):
        path = os.path.join(self.home, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def test_arguments_win(self):
        self.env.update(GPUPOOL_ENDPOINT="http://env:1", GPUPOOL_ACCESS_KEY="AKE",
                        GPUPOOL_SECRET_KEY="SKE")
        s = _config.resolve("http://arg:2", "AKA", "SKA", env=self.env)
        self.assertEqual((s.endpoint, s.access_key, s.secret_key), ("http://arg:2", "AKA", "SKA"))

    def test_environment_then_profile_then_credentials_env(self):
        self.write("pool/credentials.env", "GPUPOOL_ENDPOINT=http://pool:3\n"
                   "GPUPOOL_ACCESS_KEY=AKP\nGPUPOOL_SECRET_KEY=SKP\n")
        s = _config.resolve(None, None, None, env=self.env)
        self.assertEqual((s.endpoint, s.access_key), ("http://pool:3", "AKP"))
        self.assertTrue(s.source.endswith("credentials.env"))
        self.write(".config/gpupool/config", "# profiles\n[default]\nendpoint = http://prof:4\n"
                   "access_key = AKF\nsecret_key = SKF\n")
        s = _config.resolve(None, None, None, env=self.env)
        self.assertEqual((s.endpoint, s.access_key, s.secret_key), ("http://prof:4", "AKF", "SKF"))
        self.env.update(GPUPOOL_ACCESS_KEY="AKE", GPUPOOL_SECRET_KEY="SKE")
        s = _config.resolve(None, None, None, env=self.env)
        self.assertEqual((s.endpoint, s.access_key, s.source),
                         ("http://prof:4", "AKE", "the environment"))

    def test_a_named_profile_that_does_not_exist_is_an_error(self):
        self.write(".config/gpupool/config", "[default]\nendpoint = http://prof:4\n")
        with self.assertRaisesRegex(ConfigError, r"profile 'lab' is not in .* \(profiles: "
                                                 r"default\)"):
            _config.resolve(None, None, None, profile="lab", env=self.env)

    def test_half_a_key_pair_is_an_error(self):
        self.env["GPUPOOL_ACCESS_KEY"] = "AKE"
        with self.assertRaisesRegex(ConfigError, "GPUPOOL_ACCESS_KEY is set but "
                                                 "GPUPOOL_SECRET_KEY is not"):
            _config.resolve("http://x:1", None, None, env=self.env)
        with self.assertRaisesRegex(ConfigError, "both access_key and secret_key"):
            _config.resolve("http://x:1", "AK", None, env=self.env)

    def test_nothing_configured_says_how_to_configure(self):
        with self.assertRaisesRegex(ConfigError, r"not configured \(no endpoint, access key, "
                                                 r"secret key\).*GPUPOOL_ENDPOINT"):
            _config.resolve(None, None, None, env=self.env)

    def test_a_malformed_profile_file_names_the_line(self):
        self.write(".config/gpupool/config", "[default]\nendpoint http://x\n")
        with self.assertRaisesRegex(ConfigError, r"config:2: expected 'key = value'"):
            _config.resolve(None, None, None, env=self.env)


if __name__ == "__main__":
    unittest.main()
