"""Packaging: the extension and the libtenso it loads, the load-time version check, the wheel's
contents, and regressions of engine bugs this suite found."""

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import tenso
from conftest import REPO

PKG_DIR = Path(tenso.__file__).resolve().parent
EXT_SRC = REPO / "sdk" / "python" / "src" / "ext"


def test_version_strings():
    lib = tenso._tenso.library_version
    assert re.fullmatch(r"\d+\.\d+\.\d+", lib)
    assert tenso.__version__ == lib  # the distribution libtenso carries the library's version
    assert tenso._tenso.compiled_version == lib
    assert tenso._tenso.library_version_number == tenso._tenso.compiled_version_number
    header = (REPO / "capi" / "include" / "tenso" / "version.h").read_text()
    parts = [re.search(rf"#define TENSO_VERSION_{k} (\d+)", header).group(1) for k in ("MAJOR", "MINOR", "PATCH")]
    assert lib == ".".join(parts)


def test_loaded_library_path():
    path = Path(tenso.library_path)
    assert path.exists()
    if os.environ.get("TENSO_USE_SYSTEM_LIB", "0") in ("0", "", "OFF", "off"):
        # The wheel's own copy, next to the extension (found through the $ORIGIN rpath).
        assert path.resolve().parent == PKG_DIR and path.name == "libtenso.so.1"


def test_extension_links_libtenso_with_origin_rpath():
    readelf = shutil.which("readelf")
    if not readelf:
        pytest.skip("readelf not installed")
    ext = next(PKG_DIR.glob("_tenso*.so"))
    out = subprocess.run([readelf, "-d", str(ext)], capture_output=True, text=True, check=True).stdout
    assert "[libtenso.so.1]" in out
    if os.environ.get("TENSO_USE_SYSTEM_LIB", "0") in ("0", "", "OFF", "off"):
        assert "$ORIGIN" in out
    dyn = subprocess.run([readelf, "--dyn-syms", "-W", str(PKG_DIR / "libtenso.so.1")], capture_output=True, text=True)
    if dyn.returncode == 0:
        exported = {
            line.split()[-1].split("@")[0]
            for line in dyn.stdout.splitlines()
            if " GLOBAL " in line and " UND " not in line and "FUNC" in line
        }
        assert exported and all(name.startswith("tenso_") for name in exported), sorted(exported)[:10]


def test_extension_includes_only_the_public_header():
    """STYLE.md rule 20: the SDK sees libtenso through tenso/tenso.h only, never impl/."""
    for src in EXT_SRC.glob("*.[ch]pp"):
        for inc in re.findall(r'#include\s+"([^"]+)"', src.read_text()):
            assert inc in ("common.hpp", "tenso/tenso.h"), f"{src.name} includes {inc}"


FAKE_LIB = r"""
#include <stdint.h>
uint32_t tenso_version_number(void) { return 20000; }
const char *tenso_version_string(void) { return "2.0.0"; }
"""


def test_import_fails_on_a_mismatched_library(tmp_path):
    """A libtenso of another ABI major is refused at import, naming the loaded file."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        pytest.skip("no C compiler to build the fake library")
    (tmp_path / "fake.c").write_text(FAKE_LIB)
    fake = tmp_path / "libfaketenso.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(fake), str(tmp_path / "fake.c")], check=True)
    env = {**os.environ, "LD_PRELOAD": str(fake)}
    r = subprocess.run([sys.executable, "-c", "import tenso"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode != 0
    assert "ImportError" in r.stderr
    assert "built for libtenso 1." in r.stderr and "loaded libtenso 2.0.0" in r.stderr
    assert str(fake) in r.stderr


def test_wheel_contents():
    wheel = os.environ.get("TENSO_WHEEL")
    if not wheel:
        pytest.skip("TENSO_WHEEL not set (run-tests.sh sets it to the wheel it built)")
    names = zipfile.ZipFile(wheel).namelist()
    assert "tenso/libtenso.so.1" in names
    assert any(re.fullmatch(r"tenso/_tenso\.cpython-.*\.so", n) for n in names)
    for py in (
        "__init__.py",
        "core.py",
        "quantize.py",
        "ragged.py",
        "utils.py",
        "async_core.py",
        "errors.py",
        "config.py",
        "net.py",
        "py.typed",
        "_tenso.pyi",
    ):
        assert f"tenso/{py}" in names, py
    # Nothing of the engine's own install (headers, pkg-config, CMake package) leaks in.
    assert not [n for n in names if not (n.startswith("tenso/") or ".dist-info/" in n)]


def test_empty_tensor_integrity_footer():
    """Regression (engine bug found by this suite, fixed in impl/format/codec.cpp Plan::write_to and
    Plan::write_fd): with check_integrity, a tensor with no body bytes got the digest of an
    XXH3 state that was never reset, a garbage footer (upstream writes XXH3-64("") =
    c294d3380580062d) or a segfault. In a subprocess, so a crash cannot end the session."""
    code = (
        "import numpy as np, tenso, socket\n"
        "for align in (1, 64):\n"
        "    p = bytes(tenso.dumps(np.zeros(0, np.float32), check_integrity=True, alignment=align))\n"
        "    assert p[-8:].hex() == 'c294d3380580062d', p.hex()\n"
        "    tenso.loads(p)\n"
        "a, b = socket.socketpair()\n"
        "tenso.write_stream({'e': np.zeros((2, 0))}, a, check_integrity=True)\n"
        "a.close()\n"
        "tenso.read_stream(b)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, f"rc={r.returncode}\n{r.stderr[-1500:]}"


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")
def test_dumps_numpy_array_subclasses():
    """np.matrix and other ndarray subclasses encode as their data (upstream: isinstance check)."""
    m = np.matrix([[1, 2], [3, 4]], dtype=np.int32)
    assert np.array_equal(tenso.loads(tenso.dumps(m)), np.asarray(m))
