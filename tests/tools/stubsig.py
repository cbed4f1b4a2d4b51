"""Checks the parameters of a pybind11 extension's stub against the extension itself.

``mypy.stubtest`` cannot see the parameters of pybind11 functions (they have no
``__text_signature__``), so a stub can drift from the extension there unnoticed: a renamed or
added keyword, a parameter that became keyword-only. pybind11 does write each signature as the
first line of the docstring (``name(a: int, *, b: bool = False) -> None``); this compares, for
every function and method of MODULE that STUB declares, the parameters' names, their order,
which are keyword-only and which have defaults. Types are not compared (pybind11 writes
``object`` for most of them).

    python tests/tools/stubsig.py sdk/python/src/tenso/_tenso.pyi tenso._tenso

Exit status 0 when every signature matches, 1 otherwise (each difference is printed).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import sys
from typing import Dict, List, Optional, Tuple

# (name, keyword_only, has_default); *args / **kwargs appear as "*args" / "**kwargs".
Param = Tuple[str, bool, bool]


def split_top(s: str) -> List[str]:
    """Splits a parameter list at the commas that are not inside brackets."""
    out, depth, cur = [], 0, []
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


def runtime_params(name: str, obj: object, method: bool) -> Optional[List[Param]]:
    """The parameters pybind11 wrote into obj's docstring; None when it has no signature line."""
    doc = (getattr(obj, "__doc__", None) or "").lstrip()
    m = re.match(re.escape(name) + r"\((.*)\)\s*->", doc.splitlines()[0] if doc else "")
    if not m:
        return None
    params: List[Param] = []
    kw_only = False
    for i, p in enumerate(split_top(m.group(1))):
        if p == "*":
            kw_only = True
            continue
        pname = p.split(":", 1)[0].split("=", 1)[0].strip()
        if method and i == 0 and pname == "self":
            continue
        if pname.startswith("*") and not pname.startswith("**"):
            kw_only = True
        params.append((pname, kw_only and not pname.startswith("*"), "=" in p))
    return params


def stub_params(fn: ast.FunctionDef, method: bool) -> List[Param]:
    a = fn.args
    static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list)
    positional = a.posonlyargs + a.args
    first_default = len(positional) - len(a.defaults)
    params: List[Param] = [(p.arg, False, i >= first_default) for i, p in enumerate(positional)]
    if method and not static and params:
        params = params[1:]  # self
    if a.vararg:
        params.append(("*" + a.vararg.arg, False, False))
    params += [(p.arg, True, d is not None) for p, d in zip(a.kwonlyargs, a.kw_defaults)]
    if a.kwarg:
        params.append(("**" + a.kwarg.arg, False, False))
    return params


def stub_functions(body: List[ast.stmt]) -> Dict[str, List[ast.FunctionDef]]:
    out: Dict[str, List[ast.FunctionDef]] = {}
    for node in body:
        if isinstance(node, ast.FunctionDef):
            is_property = any(isinstance(d, ast.Name) and d.id == "property" for d in node.decorator_list)
            if not is_property:
                out.setdefault(node.name, []).append(node)
    return out


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    tree = ast.parse(open(sys.argv[1], encoding="utf-8").read())
    module = importlib.import_module(sys.argv[2])
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}

    def class_functions(cls: ast.ClassDef) -> Dict[str, List[ast.FunctionDef]]:
        funcs: Dict[str, List[ast.FunctionDef]] = {}
        for base in cls.bases:  # stub-only bases declared in the same file
            if isinstance(base, ast.Name) and base.id in classes:
                funcs.update(class_functions(classes[base.id]))
        funcs.update(stub_functions(cls.body))
        return funcs

    problems: List[str] = []
    checked = 0

    def compare(path: str, name: str, runtime: object, defs: List[ast.FunctionDef], method: bool) -> None:
        nonlocal checked
        want = runtime_params(name, runtime, method)
        if want is None:
            return  # no pybind11 signature (a constructor-less __init__, a Python-level attribute)
        for d in defs:
            got = stub_params(d, method)
            if len(defs) > 1:
                # An @overload may leave defaults out (to make a Literal argument required), but
                # no stub may claim a default that the extension does not have.
                ok = [(n, k) for n, k, _ in got] == [(n, k) for n, k, _ in want] and all(
                    w or not g for (_, _, g), (_, _, w) in zip(got, want)
                )
            else:
                ok = got == want
            if not ok:
                problems.append(
                    f"{sys.argv[1]}:{d.lineno}: {path}: stub parameters {fmt(got)}\n"
                    f"    extension parameters {fmt(want)}"
                )
        checked += 1

    module_funcs = stub_functions(tree.body)
    for name, obj in vars(module).items():
        if inspect.isclass(obj):
            if name not in classes:
                continue
            funcs = class_functions(classes[name])
            for attr in vars(obj):
                if attr in funcs:
                    compare(f"{name}.{attr}", attr, getattr(obj, attr), funcs[attr], True)
        elif callable(obj) and name in module_funcs:
            compare(name, name, obj, module_funcs[name], False)
    for p in problems:
        print(p)
    print(f"stubsig: {checked} signatures checked, {len(problems)} mismatches", file=sys.stderr)
    return 1 if problems else 0


def fmt(params: List[Param]) -> str:
    out, star = [], False
    for name, kw, default in params:
        if kw and not star:
            out.append("*")
            star = True
        out.append(name + ("=..." if default else ""))
    return "(" + ", ".join(out) + ")"


if __name__ == "__main__":
    sys.exit(main())
