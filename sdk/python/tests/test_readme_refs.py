"""What the READMEs say about the package exists: every `tenso.x.y` they name resolves (a module
or an attribute) and every extra they name is declared in pyproject.toml. Paths and versions in
the READMEs are checked by tests/tools/readme_refs.py (CTest docs.readme_refs)."""

import importlib
import re
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SDK = HERE.parent
READMES = [SDK / "README.md", SDK.parents[1] / "README.md"]


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _python_text(readme: Path) -> str:
    """This SDK's README whole; of the top README only its Python examples (its prose also names
    Go's tenso.Node and files such as tenso.hpp)."""
    text = _text(readme)
    if readme.parent == SDK:
        return text
    return "\n".join(re.findall(r"```python\n(.*?)```", text, flags=re.S))


def _names():
    out = set()
    for readme in READMES:
        where = "sdk/python/README.md" if readme.parent == SDK else "README.md"
        for m in re.finditer(r"(?<![\w./-])(tenso(?:\.[A-Za-z_]\w*)+)", _python_text(readme)):
            out.add((where, m.group(1)))
    return sorted(out)


def _resolve(dotted: str):
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


NAMES = _names()


def test_readmes_name_the_package():
    assert len(NAMES) > 20


@pytest.mark.parametrize(("readme", "dotted"), NAMES, ids=[n for _, n in NAMES])
def test_named_module_or_attribute_exists(readme, dotted):
    if dotted.split(".")[1] == "ray":
        pytest.importorskip("ray")  # the [ray] extra
    try:
        _resolve(dotted)
    except (ImportError, AttributeError) as e:
        pytest.fail(f"{readme} names `{dotted}`, which the package does not have ({e})")


def test_named_extras_are_declared():
    if sys.version_info < (3, 11):
        pytest.skip("tomllib is Python 3.11+")
    import tomllib

    declared = set(tomllib.loads(_text(SDK / "pyproject.toml"))["project"]["optional-dependencies"])
    named = set()
    for readme in READMES:
        for m in re.finditer(r"(?:tenso|sdk/python|\.)\[([a-z0-9_,-]+)\]", _text(readme)):
            named.update(m.group(1).split(","))
    assert named, "the READMEs name no extra: the pattern above no longer matches how they do"
    assert named <= declared, f"extras named in the READMEs but not in pyproject.toml: {sorted(named - declared)}"
