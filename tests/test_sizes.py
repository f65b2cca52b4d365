"""Module and function sizes: a reader understands a file in one sitting.

No module of the library over :data:`MAX_MODULE` lines, and no function over :data:`MAX_FUNCTION`
lines of code (its docstring not counted: parameter documentation is not length) unless its
docstring says why, in a sentence starting "Long because". :data:`NOT_YET` can leave a package out
while its owner splits it (none is left out now).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("anonaudit", "audit", "attackers", "defenders", "reports")
MAX_MODULE = 500
MAX_FUNCTION = 60
#: Packages not checked yet (see the module docstring).
NOT_YET: tuple[str, ...] = ()
REASON = "long because"


def library_files() -> list[Path]:
    files = [p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))]
    return [p for p in files if not any(p.relative_to(ROOT).as_posix().startswith(x + "/") for x in NOT_YET)]


def function_length(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the ``def`` (decorators not counted) to the function's end, less its docstring."""
    length = node.end_lineno - node.lineno + 1
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
            and isinstance(body[0].value.value, str):
        length -= body[0].end_lineno - body[0].lineno + 1
    return length


def oversized(files: list[Path]) -> list[str]:
    found = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        rel = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
        lines = text.count("\n")
        if lines > MAX_MODULE:
            found.append(f"{rel}: {lines} lines (at most {MAX_MODULE})")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = function_length(node)
                if n > MAX_FUNCTION and REASON not in (ast.get_docstring(node) or "").lower():
                    found.append(f"{rel}:{node.lineno} {node.name}: {n} lines of code (at most {MAX_FUNCTION}, "
                                 f"or say why in its docstring: '{REASON.capitalize()} ...')")
    return found


def test_no_module_or_function_is_too_long():
    assert oversized(library_files()) == []


def test_the_rule_sees_a_long_function_and_its_reason(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION))
    (tmp_path / "long.py").write_text(f'def f():\n    """Docstring."""\n{body}\n')
    (tmp_path / "reason.py").write_text(f'def f():\n    """Long because: one loop.\n    """\n{body}\n')
    (tmp_path / "big.py").write_text("x = 1\n" * (MAX_MODULE + 1))
    assert oversized([tmp_path / "long.py", tmp_path / "reason.py", tmp_path / "big.py"]) == [
        f"long.py:1 f: {MAX_FUNCTION + 1} lines of code (at most {MAX_FUNCTION}, or say why in its docstring: "
        "'Long because ...')",
        f"big.py: {MAX_MODULE + 1} lines (at most {MAX_MODULE})"]
