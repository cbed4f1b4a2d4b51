"""The README's examples run as written, and each checks what it shows."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_readme_has_examples():
    assert len(BLOCKS) >= 5


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example(index, capsys):
    # An example that only prints would pass whatever it printed: each one states what it shows.
    assert re.search(r"^\s*assert ", BLOCKS[index], flags=re.M), "README example without an assert"
    if re.search(r"^import ray\b", BLOCKS[index], flags=re.M):
        pytest.importorskip("ray")  # the [ray] extra (run-tests.sh installs it)
    exec(compile(BLOCKS[index], f"README.md example {index + 1}", "exec"), {"__name__": "__readme__"})
