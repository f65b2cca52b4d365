"""The import rules of the README's architecture section, checked on the source.

Layers point down only: ``audit.cli`` -> ``audit.demo.run`` (the demo audit, a user of the API)
-> ``anonaudit`` (the Python API) -> ``audit.pipeline`` / ``audit.demo.data`` -> plugins
(``attackers``, ``defenders``, ``audit.metrics``, ``reports``) -> ``audit.models``, ``audit.io``,
``audit.ngrams`` (the n-gram index phrase search and the delinker share) -> ``audit.runtime`` (how
a run runs: executor, progress, CPU tuning, folder seals, caches)
-> ``audit.core`` (the data model). Plugins receive data objects and shared resources, never files
or options, so they never import ``audit.cli`` or ``audit.io``; ``reports`` reads results only.
The API (``anonaudit``) is used by the command line and the demo only: nothing below it imports
it, and it reaches attacks and sanitizers through the registry, never by name.
Every import counts, including those inside functions and under TYPE_CHECKING.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("anonaudit", "audit", "attackers", "defenders", "reports")
#: Everything below the API.
BELOW_API = ("audit.core", "audit.runtime", "audit.io", "audit.models", "audit.ngrams", "audit.metrics",
             "audit.pipeline", "audit.demo.data", "attackers", "defenders", "reports")


def modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


def imports_of(path: Path, name: str) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    return {m for m in found if m.split(".")[0] in PACKAGES}


def within(module: str, *prefixes: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


#: (who, what it must not import)
RULES = [
    (("audit.core",), ("audit.runtime", "audit.io", "audit.models", "audit.ngrams", "audit.metrics", "audit.pipeline",
                       "audit.cli", "audit.demo", "attackers", "defenders", "reports")),
    (("audit.runtime",), ("audit.io", "audit.models", "audit.ngrams", "audit.metrics", "audit.pipeline", "audit.cli",
                          "audit.demo", "attackers", "defenders", "reports")),
    (("audit.io", "audit.models", "audit.ngrams"), ("audit.metrics", "audit.pipeline", "audit.cli", "audit.demo",
                                                    "attackers", "defenders", "reports")),
    (("audit.ngrams",), ("audit.io", "audit.models")),  # the index reads texts, never files or models
    (("attackers", "defenders", "audit.metrics"), ("audit.cli", "audit.io", "audit.pipeline", "audit.demo",
                                                   "reports")),
    (("attackers", "audit.metrics"), ("defenders",)),
    (("reports",), ("audit.runtime", "audit.io", "audit.models", "audit.ngrams", "audit.metrics", "audit.pipeline",
                    "audit.cli", "audit.demo", "attackers", "defenders")),
    (("audit.pipeline", "audit.demo.data"), ("audit.cli", "audit.demo.run")),
    (("audit.demo",), ("audit.cli",)),
    (("audit",), ("attackers", "defenders")),  # the core finds plugins through the registry only
    (BELOW_API, ("anonaudit",)),  # the API sits just below the command line and the demo
    (("anonaudit",), ("audit.cli", "audit.demo.run", "attackers", "defenders")),
]


def violations() -> list[str]:
    mods = modules()
    found = []
    for name, path in sorted(mods.items()):
        imported = imports_of(path, name)
        for who, banned in RULES:
            if not within(name, *who):
                continue
            for target in sorted(imported):
                if within(target, *banned):
                    found.append(f"{path.relative_to(ROOT)}: {name} imports {target}")
    return sorted(set(found))


def test_imports_point_down_only():
    assert violations() == []


def test_the_checker_sees_a_violation(tmp_path, monkeypatch):
    """A plugin importing the command line is caught (the rule is not vacuous)."""
    fake = tmp_path / "attackers"
    fake.mkdir()
    (fake / "bad.py").write_text("def f():\n    from audit.cli.common import out_option\n")
    assert imports_of(fake / "bad.py", "attackers.bad") >= {"audit.cli.common"}
    monkeypatch.setattr("tests.test_architecture.modules", lambda: {"attackers.bad": fake / "bad.py"})
    monkeypatch.setattr("tests.test_architecture.ROOT", tmp_path)
    assert violations() == ["attackers/bad.py: attackers.bad imports audit.cli.common",
                            "attackers/bad.py: attackers.bad imports audit.cli.common.out_option"]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: ",".join(r[0]))
def test_rules_name_real_packages(rule):
    mods = modules()
    for prefix in rule[0]:
        assert any(within(m, prefix) for m in mods), prefix


# --------------------------------------------------------------------------- seams by concept (issue 59)


def private_imports() -> list[tuple[str, str]]:
    """``(importer, module.name)`` for every ``from module import _name`` of a project module
    where ``_name`` is not a module of its own: a private name used across modules."""
    mods = modules()
    found = []
    for name, path in sorted(mods.items()):
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            if base.split(".")[0] not in PACKAGES:
                continue
            found += [(name, f"{base}.{a.name}") for a in node.names
                      if a.name.startswith("_") and not a.name.startswith("__") and f"{base}.{a.name}" not in mods]
    return sorted(set(found))


#: Private names still imported across modules, each with the reason it is not fixed yet. The
#: list only shrinks: an entry that no longer occurs fails the test, to be taken off.
PRIVATE_IMPORTS_ALLOWED: dict[tuple[str, str], str] = {}


def test_no_private_name_is_imported_across_modules():
    """A helper two modules need is public in the module that owns its concept (or in a third
    module both use); a private name stays in its module."""
    found = set(private_imports())
    assert sorted(found - set(PRIVATE_IMPORTS_ALLOWED)) == []
    assert sorted(set(PRIVATE_IMPORTS_ALLOWED) - found) == [], "fixed: take these off the allow-list"


def import_graph(prefix: str) -> dict[str, set[str]]:
    """``{module: modules of prefix it imports}`` (every import, in functions and under
    TYPE_CHECKING included; a name imported from a module counts as that module)."""
    mods = {n: p for n, p in modules().items() if within(n, prefix)}
    graph = {}
    for name, path in mods.items():
        deps = set()
        for target in imports_of(path, name):
            while target and target not in mods:
                target = target.rpartition(".")[0]
            if target and target not in (name, prefix):
                deps.add(target)
        graph[name] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (each an import circle)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while not part or part[-1] != v:
                part.append(stack.pop())
            if len(part) > 1:
                found.append(sorted(part))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


#: Imports inside audit.core that would close a circle and are allowed, each with its reason:
#: type hints only (under TYPE_CHECKING, never run), so no module waits on another at import.
#: The list only shrinks.
CORE_CYCLE_EDGES_ALLOWED = {
    ("audit.core.checks", "audit.core.results"): "type hints only: checks_of reads a list of Results",
    ("audit.core.consistency", "audit.core.results"): "type hints only: results_problems reads Results and "
                                                        "Findings; Result itself uses consistency.beats",
}


def test_no_import_circles_in_the_core():
    """audit.core's modules import each other in one direction (issue 59: results <-> registry
    and errors <-> files were circles)."""
    graph = import_graph("audit.core")
    for (a, b), reason in CORE_CYCLE_EDGES_ALLOWED.items():
        assert b in graph[a], f"{a} no longer imports {b}: take it off the allow-list ({reason})"
        graph[a].discard(b)
    assert cycles(graph) == []


def test_the_circle_finder_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_private_import_finder_sees_one(tmp_path, monkeypatch):
    fake = tmp_path / "attackers"
    fake.mkdir()
    (fake / "bad.py").write_text("def f():\n    from audit.core.files import _read_pipe, read_input\n")
    monkeypatch.setattr("tests.test_architecture.modules", lambda: {"attackers.bad": fake / "bad.py"})
    assert private_imports() == [("attackers.bad", "audit.core.files._read_pipe")]
