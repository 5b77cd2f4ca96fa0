"""A real `gpupool up` for the SDK's tests: control plane and a local agent on simulated GPUs,
in a temporary data directory on a free port; with tls=True it serves HTTPS with its own
self-signed certificate (--tls-self-signed). The binary is $GPUPOOL_BINARY (ctest sets it), else
build/src/cmd/gpupool of this checkout."""

import os
import signal
import ssl
import subprocess
import tempfile
import time
import urllib.request

from gpupool import _config

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))))


def binary() -> str:
    path = os.environ.get("GPUPOOL_BINARY") or os.path.join(REPO, "build", "src", "cmd",
                                                            "gpupool")
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"no gpupool binary at {path}: build it (scripts/build.sh --target "
                           "gpupool) or set GPUPOOL_BINARY")
    return path


def wait_for(predicate, timeout=30.0, interval=0.05, what="condition"):
    """Polls `predicate` (the state lives in another process: there is nothing to await)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


class Pool:
    def __init__(self, gpus="A100-80GB:2", tls=False):
        self.dir = tempfile.mkdtemp(prefix="gpupool-sdk-")
        self.log = open(os.path.join(self.dir, "up.log"), "wb")
        self.proc = subprocess.Popen(
            [binary(), "up", "--data-dir", self.dir, "--listen", "127.0.0.1:0",
             "--simulate-gpus", gpus, "--node-name", "local"]
            + (["--tls-self-signed"] if tls else []),
            stdout=self.log, stderr=subprocess.STDOUT)
        self.credentials = os.path.join(self.dir, "credentials.env")
        creds = self.credentials
        last_error = []

        def ready():
            if self.proc.poll() is not None:
                raise AssertionError(f"gpupool up exited with {self.proc.returncode}: "
                                     + self.output())
            if not os.path.exists(creds):
                return None
            with open(creds, encoding="utf-8") as f:
                values = _config.parse_env_file(f.read())
            if not values.get("GPUPOOL_SECRET_KEY"):
                return None
            try:
                # https: verified against the pool's own CA file, as the SDK does.
                context = (ssl.create_default_context(cafile=values.get("GPUPOOL_CA_FILE") or None)
                           if values["GPUPOOL_ENDPOINT"].startswith("https://") else None)
                with urllib.request.urlopen(values["GPUPOOL_ENDPOINT"] + "/healthz", timeout=2,
                                            context=context):
                    return values
            except OSError as e:
                last_error[:] = [e]
                return None

        try:
            values = wait_for(ready, what="gpupool up to answer /healthz")
        except AssertionError as e:
            if self.proc.poll() is not None:
                raise
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"{e} (last error: {last_error}); its output: "
                                 + self.output()) from None
        self.endpoint = values["GPUPOOL_ENDPOINT"]
        self.access_key = values["GPUPOOL_ACCESS_KEY"]
        self.secret_key = values["GPUPOOL_SECRET_KEY"]
        self.ca_file = values.get("GPUPOOL_CA_FILE") or None

    def output(self) -> str:
        self.log.flush()
        with open(self.log.name, "rb") as f:
            return f.read().decode("utf-8", "replace")[-4000:]

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=60)
        self.log.close()
        subprocess.run(["rm", "-rf", self.dir], check=False)
        return code
