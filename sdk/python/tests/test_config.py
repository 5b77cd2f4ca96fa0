"""Where Client() finds its endpoint, keys and CA file when they are not passed
(gpupool/_config.py)."""

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

    def test_the_ca_file_comes_from_the_place_of_the_endpoint(self):
        self.write("pool/credentials.env", "GPUPOOL_ENDPOINT=https://127.0.0.1:3\n"
                   "GPUPOOL_ACCESS_KEY=AKP\nGPUPOOL_SECRET_KEY=SKP\n"
                   "GPUPOOL_CA_FILE=/pool/tls/cert.pem\n")
        s = _config.resolve(None, None, None, env=self.env)
        self.assertEqual((s.endpoint, s.ca_file), ("https://127.0.0.1:3", "/pool/tls/cert.pem"))
        self.assertRegex(s.ca_source, r"^GPUPOOL_CA_FILE of .*credentials\.env$")
        # A profile's endpoint goes with its own ca_file, never the pool's CA.
        self.write(".config/gpupool/config", "[default]\nendpoint = https://prof:4\n"
                   "access_key = AKF\nsecret_key = SKF\n")
        s = _config.resolve(None, None, None, env=self.env)
        self.assertEqual((s.endpoint, s.ca_file, s.ca_source), ("https://prof:4", "", ""),
                         "no CA file: the system's store")
        self.write(".config/gpupool/config", "[default]\nendpoint = https://prof:4\n"
                   "access_key = AKF\nsecret_key = SKF\nca_file = /etc/lab-ca.pem\n"
                   "[other]\nendpoint = https://other:5\n")
        s = _config.resolve(None, None, None, env=self.env)
        self.assertEqual((s.endpoint, s.ca_file), ("https://prof:4", "/etc/lab-ca.pem"))
        self.assertRegex(s.ca_source, r"^ca_file of profile 'default' of .*config$")
        s = _config.resolve(None, None, None, profile="other", env=self.env)
        self.assertEqual((s.endpoint, s.ca_file), ("https://other:5", ""))
        # GPUPOOL_CA_FILE goes with GPUPOOL_ENDPOINT, not with the profile's endpoint.
        self.env["GPUPOOL_CA_FILE"] = "/env/ca.pem"
        s = _config.resolve(None, None, None, env=self.env)
        self.assertEqual((s.endpoint, s.ca_file), ("https://prof:4", "/etc/lab-ca.pem"))
        self.env["GPUPOOL_ENDPOINT"] = "https://env:6"
        s = _config.resolve(None, None, None, env=self.env)
        self.assertEqual((s.endpoint, s.ca_file, s.ca_source),
                         ("https://env:6", "/env/ca.pem", "GPUPOOL_CA_FILE in the environment"))
        self.env["GPUPOOL_CA_FILE"] = ""  # set but empty: the system's store
        s = _config.resolve(None, None, None, env=self.env)
        self.assertEqual((s.endpoint, s.ca_file), ("https://env:6", ""))

    def test_an_endpoint_argument_goes_with_the_ca_file_argument_or_the_environment(self):
        self.write("pool/credentials.env", "GPUPOOL_ENDPOINT=https://127.0.0.1:3\n"
                   "GPUPOOL_ACCESS_KEY=AKP\nGPUPOOL_SECRET_KEY=SKP\n"
                   "GPUPOOL_CA_FILE=/pool/tls/cert.pem\n")
        s = _config.resolve("https://arg:2", None, None, env=self.env)
        self.assertEqual((s.endpoint, s.access_key, s.ca_file), ("https://arg:2", "AKP", ""))
        self.env["GPUPOOL_CA_FILE"] = "/env/ca.pem"
        s = _config.resolve("https://arg:2", None, None, env=self.env)
        self.assertEqual(s.ca_file, "/env/ca.pem")
        s = _config.resolve("https://arg:2", None, None, env=self.env, ca_file="/arg/ca.pem")
        self.assertEqual((s.ca_file, s.ca_source), ("/arg/ca.pem", "ca_file="))
        s = _config.resolve(None, None, None, env=self.env, ca_file="/arg/ca.pem")
        self.assertEqual((s.endpoint, s.ca_file), ("https://127.0.0.1:3", "/arg/ca.pem"))

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
