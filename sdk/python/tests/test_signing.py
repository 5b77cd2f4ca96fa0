"""The SDK signs exactly as the server verifies (docs/api.md "Authentication", the test vector
of src/api/signing_test.cc)."""

import unittest

from gpupool import _signing


class SigningTest(unittest.TestCase):
    def test_the_documented_test_vector(self):
        canonical = _signing.canonical_request("POST", "/v1/tasks", "b=2&a=1",
                                               b'{"command":["true"]}', 1700000000000,
                                               "0123456789abcdef")
        self.assertEqual(canonical.split("\n")[2], "a=1&b=2")
        self.assertEqual(_signing.sign("s3cr3t-key", canonical),
                         "5a722047f8c6f81ccbf6a7ebe7d360621351a832bc1ad543ff498d7e3b1582c5")

    def test_canonical_query_decodes_sorts_and_encodes_again(self):
        self.assertEqual(_signing.canonical_query("state=running,pending&limit=5"),
                         "limit=5&state=running%2Cpending")
        self.assertEqual(_signing.canonical_query("state=running%2cpending&&limit=5"),
                         "limit=5&state=running%2Cpending")
        self.assertEqual(_signing.canonical_query("q=a+b&flag"), "flag=&q=a%20b")
        self.assertEqual(_signing.canonical_query(""), "")

    def test_authorization_header(self):
        header = _signing.authorization("AK1", "s3cr3t-key", "POST", "/v1/tasks?b=2&a=1",
                                        b'{"command":["true"]}', 1700000000000,
                                        "0123456789abcdef")
        self.assertEqual(header, "GPUPOOL-HMAC-SHA256 Credential=AK1, Timestamp=1700000000000, "
                                 "Nonce=0123456789abcdef, Signature=5a722047f8c6f81ccbf6a7ebe7d"
                                 "360621351a832bc1ad543ff498d7e3b1582c5")

    def test_nonces_are_new_and_well_formed(self):
        a, b = _signing.new_nonce(), _signing.new_nonce()
        self.assertNotEqual(a, b)
        self.assertRegex(a, r"^[0-9a-f]{32}$")


if __name__ == "__main__":
    unittest.main()
