#!/usr/bin/env python3
"""release.versions: one version, capi/include/tenso/version.h's, everywhere it is named.

Every SDK carries libtenso's version (as Arrow's and XGBoost's packages carry their C++
library's): the Python distribution derives it from version.h at build time; the crates state it
in Cargo.toml (cargo has no other way) and are checked here, with Cargo.lock; the Go module's
version is the tag `make dist` serves; sdk/js/package.json states it for npm. The READMEs' install lines (crate requirement, `go get`
version, artifact file names, Debian package names) must name that version and the names the
packaging really uses.

usage: check_versions.py REPO
"""
import json
import re
import sys
import tomllib
from pathlib import Path

repo = Path(sys.argv[1])
errors = []


def check(cond, what):
    if not cond:
        errors.append(what)


header = (repo / "capi/include/tenso/version.h").read_text()
field = {k: int(re.search(rf"#define TENSO_{k} (\d+)", header).group(1))
         for k in ("VERSION_MAJOR", "VERSION_MINOR", "VERSION_PATCH", "SOVERSION")}
version = f"{field['VERSION_MAJOR']}.{field['VERSION_MINOR']}.{field['VERSION_PATCH']}"
minor = f"{field['VERSION_MAJOR']}.{field['VERSION_MINOR']}"
so = field["SOVERSION"]

# Rust: the two published crates and the lock file.
sys_toml = tomllib.loads((repo / "sdk/rust/tenso-sys/Cargo.toml").read_text())
safe_toml = tomllib.loads((repo / "sdk/rust/tenso/Cargo.toml").read_text())
check(sys_toml["package"]["name"] == "libtenso-sys", "the -sys crate is not named libtenso-sys")
check(safe_toml["package"]["name"] == "libtenso", "the safe crate is not named libtenso")
check(sys_toml["lib"]["name"] == "tenso_sys" and safe_toml["lib"]["name"] == "tenso",
      "the crates' library names are not tenso_sys and tenso")
for name, toml in (("libtenso-sys", sys_toml), ("libtenso", safe_toml)):
    check(toml["package"]["version"] == version,
          f"sdk/rust: {name} is {toml['package']['version']}, version.h says {version}")
dep = safe_toml["dependencies"]["tenso-sys"]
check(dep.get("package") == "libtenso-sys" and dep.get("version") == f"={version}",
      f"sdk/rust/tenso: its libtenso-sys requirement is {dep.get('version')}, not ={version}")
lock = tomllib.loads((repo / "sdk/rust/Cargo.lock").read_text())
locked = {p["name"]: p["version"] for p in lock["package"]}
for name in ("libtenso", "libtenso-sys"):
    check(locked.get(name) == version, f"sdk/rust/Cargo.lock: {name} {locked.get(name)}, not {version}")

# Python: the distribution's name, and its version read from version.h.
py = tomllib.loads((repo / "sdk/python/pyproject.toml").read_text())
check(py["project"]["name"] == "libtenso", "sdk/python: the distribution is not named libtenso")
check("version" in py["project"].get("dynamic", []), "sdk/python: the version is not dynamic")
meta = py["tool"]["scikit-build"]["metadata"]["version"]
check((repo / "sdk/python" / meta["input"]).resolve() == (repo / "capi/include/tenso/version.h").resolve(),
      f"sdk/python: the version is read from {meta['input']}, not version.h")
check(meta["result"] == "{major}.{minor}.{patch}", f"sdk/python: the version is '{meta['result']}'")

# JavaScript: the npm package (sdk/js) carries the same version.
js = json.loads((repo / "sdk/js/package.json").read_text())
check(js["name"] == "libtenso", "sdk/js: the npm package is not named libtenso")
check(js["version"] == version, f"sdk/js/package.json: version {js['version']}, not {version}")

# Go: the module path the READMEs name.
module = re.search(r"^module (\S+)", (repo / "sdk/go/go.mod").read_text(), re.M).group(1)

readmes = {p: p.read_text() for p in
           [repo / "README.md", *sorted((repo / "sdk").glob("*/README.md"))]}
for path, text in readmes.items():
    rel = path.relative_to(repo)
    for req in re.findall(r'^libtenso(?:-sys)? = (?:\{ version = )?"([^"]+)"', text, re.M):
        check(req == minor, f"{rel}: crate requirement \"{req}\", not \"{minor}\"")
    for got in re.findall(re.escape(module) + r"@v([0-9.]+)", text):
        check(got == version, f"{rel}: go get ...@v{got}, not v{version}")
    for kind, got in re.findall(r"\b(libtenso|tenso|libtenso-sys)-(\d+\.\d+\.\d+)(?=[-.])", text):
        check(got == version, f"{rel}: {kind}-{got}, not {kind}-{version}")
    for pkg, got in re.findall(r"\b(libtenso\d*|libtenso-dev|tenso)_(\d+\.\d+\.\d+)-\d+_", text):
        check(got == version, f"{rel}: {pkg}_{got}, not {version}")
        check(pkg in (f"libtenso{so}", "libtenso-dev", "tenso"), f"{rel}: no Debian package {pkg}")
    for pkg in re.findall(r"\b(libtenso\d+)(?:-cuda|-dbgsym)?\b", text):
        check(pkg == f"libtenso{so}", f"{rel}: {pkg}, but the soname is libtenso.so.{so}")
    check("0.24.0+tenso" not in text, f"{rel}: names the old version scheme 0.24.0+tenso")
    check(not re.search(r'^tenso(-sys)? = "', text, re.M),
          f"{rel}: a dependency on crates.io's tenso (upstream's crate), not libtenso")

if errors:
    print("release.versions: version.h says " + version + ";\n  " + "\n  ".join(errors))
    sys.exit(1)
print(f"release.versions: {version} (soname {so}) in the crates, Cargo.lock, pyproject.toml, package.json and "
      f"{len(readmes)} READMEs; Go module {module}")
