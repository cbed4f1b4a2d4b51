"""Shared fixtures: the golden vectors (tests/vectors in the repository) and a client for the
pinned upstream package, which runs in its own virtualenv and process (tests/upstream/venv.sh)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
VECTORS = Path(os.environ.get("TENSO_VECTORS_DIR", REPO / "tests" / "vectors"))
VENV_SH = REPO / "tests" / "upstream" / "venv.sh"

sys.path.insert(0, str(HERE))

# Why the torch tests skip (run-tests.sh says more).
TORCH_MISSING = "torch is not installed: PyPI's Linux torch wheel needs the CUDA libraries (GBs) to import"


def load_manifest():
    with open(VECTORS / "manifest.json", encoding="utf-8") as f:
        return json.load(f)


MANIFEST = load_manifest()
CASES = MANIFEST["cases"]
CASES_BY_NAME = {c["name"]: c for c in CASES}


def golden_bytes(case):
    return (VECTORS / case["file"]).read_bytes()


@pytest.fixture(scope="session")
def manifest():
    return MANIFEST


class UpstreamError(Exception):
    def __init__(self, error, message):
        super().__init__(f"{error}: {message}")
        self.error = error
        self.message = message


class Upstream:
    """Requests to tests/upstream_server.py running under the upstream venv's python."""

    def __init__(self, python):
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        self.proc = subprocess.Popen(
            [python, str(HERE / "upstream_server.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=str(HERE),
        )

    def call(self, **req):
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the upstream helper process died")
        reply = json.loads(line)
        if not reply.pop("ok"):
            raise UpstreamError(reply["error"], reply["message"])
        return reply

    def loads(self, packet):
        return self.call(op="loads", packet=bytes(packet).hex())["value"]

    def dumps(self, desc, **options):
        return bytes.fromhex(self.call(op="dumps", value=desc, options=options)["packet"])

    def info(self, packet):
        return self.call(op="info", packet=bytes(packet).hex())["info"]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def _upstream_python():
    if os.environ.get("TENSO_UPSTREAM_PYTHON"):
        return os.environ["TENSO_UPSTREAM_PYTHON"]
    out = subprocess.run(["bash", str(VENV_SH)], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{VENV_SH} failed:\n{out.stderr[-2000:]}")
    return out.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="session")
def upstream():
    """The upstream package, in its own process. Skipped when its venv cannot be made, unless
    TENSO_REQUIRE_UPSTREAM=1 (run-tests.sh sets it), which turns that into a failure."""
    try:
        python = _upstream_python()
        client = Upstream(python)
        version = client.call(op="version")["version"]
    except Exception as e:  # no PyPI, no python3.11, ...
        if os.environ.get("TENSO_REQUIRE_UPSTREAM") == "1":
            pytest.fail(f"upstream tenso is required but unavailable: {e}")
        pytest.skip(f"upstream tenso unavailable: {e}")
    assert version == "0.24.0", f"upstream venv has tenso {version}, expected 0.24.0"
    yield client
    client.close()
