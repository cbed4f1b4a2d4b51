#!/usr/bin/env bash
# dist.python: the wheel from dist/, as a user meets it.
#
#   test-python.sh DIST_DIR WORK_DIR
#
#   1. its name and tags: distribution libtenso at libtenso's version, a manylinux platform tag
#      (auditwheel's), the very name the READMEs give; libtenso.so.1 and its own libraries
#      inside, nothing needing more than the tag's glibc;
#   2. a fresh virtualenv installs it - binary wheels only, with PATH holding nothing but the
#      virtualenv, so no compiler can be used (numpy comes from PyPI);
#   3. in a clean environment (env -i: no LD_LIBRARY_PATH, no PYTHONPATH), outside the tree,
#      `import tenso` loads the libtenso inside the wheel, and the Quick start of
#      sdk/python/README.md runs as written.
set -euo pipefail
dist="$1" work="$2"
log() { printf 'dist.python: %s\n' "$*" >&2; }
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

header="$repo/capi/include/tenso/version.h"
field() { sed -n "s/^#define TENSO_$1 \\([0-9]*\\).*/\\1/p" "$header"; }
version="$(field VERSION_MAJOR).$(field VERSION_MINOR).$(field VERSION_PATCH)"

wheels=("$dist"/libtenso-"$version"-*.whl)
[[ -f "${wheels[0]}" && ${#wheels[@]} == 1 ]] || { log "no single libtenso-$version wheel in $dist"; exit 1; }
wheel="${wheels[0]}"
log "1. $(basename "$wheel")"
[[ "$(basename "$wheel")" =~ ^libtenso-$version-cp3[0-9]+-cp3[0-9]+-manylinux_2_([0-9]+)_x86_64\.whl$ ]] ||
    { log "not a manylinux wheel of libtenso $version"; exit 1; }
glibc_minor="${BASH_REMATCH[1]}"
for readme in "$repo/README.md" "$repo/sdk/python/README.md"; do
    grep -qF "$(basename "$wheel")" "$readme" || { log "$readme does not name $(basename "$wheel")"; exit 1; }
done
python3 - "$wheel" "$glibc_minor" <<'EOF'
import re, subprocess, sys, tempfile, zipfile
wheel, glibc_minor = sys.argv[1], int(sys.argv[2])
z = zipfile.ZipFile(wheel)
names = z.namelist()
assert "tenso/libtenso.so.1" in names, names
libs = [n for n in names if n.startswith("libtenso.libs/")]
assert any("liblz4" in n for n in libs) and any("libssl" in n for n in libs), libs
# Every ELF file asks for no glibc symbol version newer than the tag says.
with tempfile.TemporaryDirectory() as d:
    for n in names:
        if n.endswith(".so") or ".so." in n:
            path = z.extract(n, d)
            out = subprocess.run(["readelf", "-V", "-W", path], capture_output=True, text=True, check=True).stdout
            for minor in re.findall(r"GLIBC_2\.(\d+)", out):
                assert int(minor) <= glibc_minor, f"{n} needs GLIBC_2.{minor}, tag says 2.{glibc_minor}"
print(f"{len(names)} files; grafted: {', '.join(sorted(libs))}")
EOF

log "2. a fresh virtualenv, no compiler on PATH"
rm -rf "$work"
mkdir -p "$work/home"
python3 -m venv "$work/venv"
cleanenv=(env -i HOME="$work/home" PATH="$work/venv/bin" LANG=C.UTF-8)
if "${cleanenv[@]}" sh -c 'command -v cc || command -v gcc || command -v c++' 2>/dev/null; then
    log "a compiler is on the clean PATH"
    exit 1
fi
"${cleanenv[@]}" "$work/venv/bin/python" -m pip install --disable-pip-version-check --no-input -q \
    --only-binary=:all: "$wheel"

log "3. import tenso, and the README's Quick start, outside the tree"
awk '/^## Quick start/ {q = 1} q && /^```python$/ {f = 1; next} f && /^```$/ {exit} f {print}' \
    "$repo/sdk/python/README.md" >"$work/quickstart.py"
grep -q 'import tenso' "$work/quickstart.py" || { log "no Quick start block in sdk/python/README.md"; exit 1; }
cat >"$work/check.py" <<EOF
import importlib.metadata, os, sys
import numpy as np
import tenso

site = os.path.realpath(os.path.join(sys.prefix, "lib"))
assert os.path.realpath(tenso.__file__).startswith(site), tenso.__file__
assert os.path.realpath(tenso.library_path).startswith(site), tenso.library_path
assert tenso.library_version == "$version" == tenso.__version__, (tenso.library_version, tenso.__version__)
assert importlib.metadata.version("libtenso") == "$version"
a = np.arange(24, dtype=np.float32).reshape(4, 6)
for kw in ({}, {"check_integrity": True}, {"compress": True}):
    b = tenso.loads(tenso.dumps(a, **kw))
    assert b.dtype == a.dtype and np.array_equal(a, b), kw
print("import tenso:", tenso.__version__, "from", tenso.library_path)
EOF
(cd "$work" && "${cleanenv[@]}" "$work/venv/bin/python" check.py && "${cleanenv[@]}" "$work/venv/bin/python" quickstart.py)
log "all checks passed"
