"""Every README statement that names a path or a version is checked against the tree.

Run by CTest as docs.readme_refs (plain python3, nothing to build). The Python SDK's own suite
checks the modules, attributes and extras its READMEs name (sdk/python/tests/test_readme_refs.py),
since that needs the package installed.

Checked, in every Markdown file git tracks (CHANGELOG.md aside: it names what was, not what is):
  - paths in `backticks` under a top-level directory of the tree (capi/, impl/, sdk/, tests/,
    bench/, docs/, pkgconfig/, .ci/), top-level files, and public headers named `tenso/x.h`:
    each must exist, relative to the repository or to the Markdown file (globs allowed);
  - relative link targets, [text](path): each must exist;
  - versions: `libtenso X.Y` and `since X.Y` at most one minor past capi/include/tenso/version.h
    (the release in the making); a
    Rust dependency line `tenso = "A.B"` / `tenso-sys = "A.B"` must accept the version in
    sdk/rust's Cargo.toml; `tenso 0.24` / `tenso==0.24.0` (upstream) must be the version pinned
    in tests/upstream/venv.sh; a Go module path must be sdk/go's module or a package in it.

    python3 tests/tools/readme_refs.py        exit status 1 and one line per stale statement
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys
from typing import List, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOP_DIRS = ("capi", "impl", "sdk", "tests", "bench", "docs", "pkgconfig", ".ci")
# Files a documented command writes (make bench-report), named before a run has made them.
GENERATED = ("bench/performance.png", "bench/performance.json")
TOP_FILES = ("Makefile", "CMakeLists.txt", "README.md", "CHANGELOG.md", "ruff.toml", ".clang-format", ".clang-tidy")


def read(rel: str) -> str:
    with open(os.path.join(REPO, rel), encoding="utf-8") as f:
        return f.read()


def version_tuple(v: str) -> Tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def library_version() -> Tuple[int, int, int]:
    h = read("capi/include/tenso/version.h")
    parts = [
        int(re.search(rf"^#define TENSO_VERSION_{k} (\d+)$", h, re.M).group(1)) for k in ("MAJOR", "MINOR", "PATCH")
    ]
    return parts[0], parts[1], parts[2]


def crate_versions() -> dict:
    out = {}
    for manifest in glob.glob(os.path.join(REPO, "sdk/rust/*/Cargo.toml")):
        text = open(manifest, encoding="utf-8").read()
        name = re.search(r'^name = "([^"]+)"', text, re.M)
        version = re.search(r'^version = "([^"+]+)', text, re.M)
        if name and version:
            out[name.group(1)] = version.group(1)
    return out


def upstream_pin() -> str:
    m = re.search(r"tenso==(\d+\.\d+\.\d+)", read("tests/upstream/venv.sh"))
    return m.group(1) if m else ""


def go_module() -> str:
    return re.search(r"^module (\S+)", read("sdk/go/go.mod"), re.M).group(1)


def caret_accepts(req: str, have: str) -> bool:
    """Cargo's default (caret) requirement `req` accepts version `have`."""
    r, h = version_tuple(req), version_tuple(have)
    if h < r + (0,) * (len(h) - len(r)):
        return False
    first = next((i for i, x in enumerate(r) if x != 0), len(r) - 1)
    return h[: first + 1] == r[: first + 1]


def path_exists(token: str, md_dir: str) -> bool:
    """A file or directory, a glob, or a stem naming the files `stem.*` (a header + source pair)."""
    token = token.split("::", 1)[0].rstrip("/")  # a pytest node id names its file
    for base in (REPO, md_dir):
        if glob.glob(os.path.join(base, token)) or glob.glob(os.path.join(base, token + ".*")):
            return True
    return False


def check_file(rel: str, lib: Tuple[int, int, int], crates: dict, pin: str, module: str) -> List[str]:
    # Code blocks are examples (tested where they run), not statements about the tree; blanked
    # line for line so that line numbers stay right.
    raw = read(rel)
    text = re.sub(r"^```.*?^```", lambda m: "\n" * m.group(0).count("\n"), raw, flags=re.S | re.M)
    md_dir = os.path.dirname(os.path.join(REPO, rel))
    problems = []

    def bad(line_of: int, what: str) -> None:
        problems.append(f"{rel}:{text.count(chr(10), 0, line_of) + 1}: {what}")

    for m in re.finditer(r"`([^`\n]+)`", text):
        token = m.group(1).strip()
        if re.search(r"[<>{}$ ]|\.\.\.|…", token) or "://" in token:
            continue
        first = token.split("/", 1)[0]
        if re.fullmatch(r"sdk/go/v\d+\.\d+\.\d+", token):
            continue  # the Go module's release tag, not a path
        if ("/" in token and first in TOP_DIRS) or token in TOP_FILES:
            if token not in GENERATED and not path_exists(token, md_dir):
                bad(m.start(), f"names `{token}`, which is not in the tree")
        elif re.fullmatch(r"tenso/[a-z_]+\.hp?p?", token):
            if not os.path.exists(os.path.join(REPO, "capi/include", token)):
                bad(m.start(), f"names the header `{token}`, which capi/include does not have")
    for m in re.finditer(r"\]\(([^)\s]+)\)", text):
        target = m.group(1).split("#", 1)[0]
        if not target or re.match(r"[a-z]+:", target):
            continue
        if not os.path.exists(os.path.normpath(os.path.join(md_dir, target))):
            bad(m.start(), f"links to {target}, which does not exist")

    # Versions and Go paths are checked in code blocks too: dependency lines and imports.
    text = raw
    # Work for the next minor release is documented with its number before version.h is bumped
    # to it, so one minor ahead is allowed; anything further is a typo or a stale plan.
    newest = (lib[0], lib[1] + 1)
    for m in re.finditer(r"(?:libtenso|[Ss]ince|@since) (\d+\.\d+)(?:\.\d+)?\b(?!\s*[×x])", text):
        if version_tuple(m.group(1)) > newest:
            bad(
                m.start(),
                f"names version {m.group(1)}, beyond the library ({'.'.join(map(str, lib))}) and its next minor",
            )
    for m in re.finditer(r'^\s*((?:lib)?tenso(?:-sys)?)\s*=\s*(?:\{[^}\n]*version\s*=\s*)?"([0-9.]+)"', text, re.M):
        name, req = m.group(1), m.group(2)
        if name in crates and not caret_accepts(req, crates[name]):
            bad(m.start(), f'`{name} = "{req}"` does not accept the crate in the tree ({crates[name]})')
    for m in re.finditer(
        r"(?:PyPI(?: package)?|upstream) `?tenso`?,? (\d+\.\d+(?:\.\d+)?)|tenso==(\d+\.\d+\.\d+)", text
    ):
        v = m.group(1) or m.group(2)
        if pin and not pin.startswith(v):
            bad(m.start(), f"names upstream tenso {v}; the tree pins {pin} (tests/upstream/venv.sh)")
    # Paths under the module's owner: the repository itself, or the module and its packages.
    owner = module.rsplit("/", 2)[0]
    repo_path = module[: -len("/sdk/go")] if module.endswith("/sdk/go") else module
    for m in re.finditer(re.escape(owner) + r"/[\w./-]+", text):
        path = m.group(0).rstrip(".")
        if path == repo_path:
            continue
        if path != module and not path.startswith(module + "/"):
            bad(m.start(), f"names the Go path {path}; the module is {module}")
        elif path.startswith(module + "/") and not os.path.isdir(
            os.path.join(REPO, "sdk/go", path[len(module) + 1 :].split("@", 1)[0])
        ):
            bad(m.start(), f"names the Go package {path}, which sdk/go does not have")
    return problems


def main() -> int:
    files = subprocess.run(
        ["git", "ls-files", "*.md"], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout.split()
    files = [f for f in files if os.path.basename(f) != "CHANGELOG.md"]
    lib, crates, pin, module = library_version(), crate_versions(), upstream_pin(), go_module()
    problems = [p for f in files for p in check_file(f, lib, crates, pin, module)]
    for p in problems:
        print(p)
    print(f"readme_refs: {len(files)} Markdown files, {len(problems)} stale statements", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
