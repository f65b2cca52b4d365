"""The import rules of the README's architecture section, checked on the source.

The code sits on floors (:data:`FLOORS`, top to bottom; the README's picture draws the same
table). A module may import modules of its own floor and of the floors below, never of a floor
above: the command line (``anonaudit.cli``) -> the demo audit (``anonaudit.demo.demo_audit``, a
user of the API) -> the Python API (``anonaudit``) -> the pipeline (``audit.pipeline``, and the
demo's population ``anonaudit.demo.population``) beside the reports (``reports``, which read
results only) -> the plugins (``attackers``, ``defenders``, ``audit.metrics``) -> ``audit.models``,
``audit.io``, ``audit.ngrams`` (the n-gram index phrase search and the delinker share) ->
``audit.runtime`` (how a run runs: executor, progress, CPU tuning, folder seals, caches) ->
``audit.core`` (the data model).

Within a floor some arrows are forbidden too (:data:`SIDEWAYS`): the pipeline and the reports
never import each other; plugins receive data objects and shared resources, never files or
options, so they never import ``audit.io``; attacks and metrics never import a sanitizer; the
reports import ``audit.core`` alone. No plugin imports ``ray`` or ``tempfile``
(:data:`LIBRARIES`): where work runs and its scratch folders are the engine's (issue 71). The
engine (``audit``) reaches plugins through the registry only and never imports the API
(``anonaudit``) above it, with no exception: the deprecated shims of old paths are gone (issue
71), and :func:`test_no_shim_of_an_old_path` keeps them out. Every
import counts, including those inside functions and under TYPE_CHECKING.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("anonaudit", "audit", "attackers", "defenders", "reports")

#: The floors, top to bottom: (name, package prefixes). A module is on the floor of the longest
#: prefix it falls under (``anonaudit.cli.run_command`` on the command line's, ``anonaudit.outcome`` on
#: the API's; ``audit`` itself, which holds the version, on the ground floor).
FLOORS: list[tuple[str, tuple[str, ...]]] = [
    ("command line", ("anonaudit.cli",)),
    ("demo audit", ("anonaudit.demo.demo_audit",)),
    ("API", ("anonaudit",)),
    ("pipeline and reports", ("audit.pipeline", "anonaudit.demo.population", "reports")),
    ("plugins", ("attackers", "defenders", "audit.metrics")),
    ("models, files and the n-gram index", ("audit.models", "audit.io", "audit.ngrams")),
    ("runtime", ("audit.runtime",)),
    ("core", ("audit.core", "audit")),
]

#: Arrows that no floor rule catches: (who, what it must not import, why).
SIDEWAYS: list[tuple[tuple[str, ...], tuple[str, ...], str]] = [
    (("audit.pipeline", "anonaudit.demo.population"), ("reports",),
     "the reports sit beside the pipeline, not below it"),
    (("reports",), ("audit.pipeline", "anonaudit", "audit.runtime", "audit.io", "audit.models", "audit.ngrams",
                    "audit.metrics", "attackers", "defenders"), "the reports read results only (audit.core)"),
    (("attackers", "defenders", "audit.metrics"), ("audit.io",), "plugins get data objects, never files"),
    (("attackers", "audit.metrics"), ("defenders",), "an attack or a metric never uses a sanitizer"),
    (("audit.ngrams",), ("audit.io", "audit.models"), "the index reads texts, never files or models"),
    (("audit",), ("attackers", "defenders"), "the engine finds plugins through the registry only"),
    (("anonaudit",), ("attackers", "defenders"), "the API finds plugins through the registry only"),
    (("audit",), ("anonaudit",), "the engine never imports the API above it"),
]


def modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


#: Libraries some modules never import: (who, libraries, why). Where work runs (a cluster, its
#: workers, its checkpoints and scratch folders) is the engine's: a plugin hands its executor a
#: job (``audit.runtime.trainer``) and asks the engine for folders (``audit.runtime.folders``).
LIBRARIES: list[tuple[tuple[str, ...], tuple[str, ...], str]] = [
    (("attackers", "defenders", "audit.metrics"), ("ray",),
     "where work runs is the engine's: a plugin hands its executor a job, issue 71"),
    (("attackers", "defenders", "audit.metrics"), ("tempfile",),
     "scratch and temporary folders are the engine's (audit.runtime.folders), issue 71"),
]


def imports_of(path: Path, name: str) -> set[str]:
    return {m for m in all_imports(path, name) if m.split(".")[0] in PACKAGES}


def all_imports(path: Path, name: str) -> set[str]:
    """Every module ``path`` (the module ``name``) imports, this project's or not, at any depth."""
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
    return found


def within(module: str, *prefixes: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def floor_of(module: str) -> int:
    """The index in :data:`FLOORS` of the floor ``module`` is on (0 is the top)."""
    best, floor = -1, None
    for i, (_, prefixes) in enumerate(FLOORS):
        for p in prefixes:
            if within(module, p) and len(p) > best:
                best, floor = len(p), i
    if floor is None:
        raise AssertionError(f"{module} is on no floor: add its package to FLOORS")
    return floor


def violations() -> list[str]:
    mods = modules()
    found = []
    for name, path in sorted(mods.items()):
        where = f"{path.relative_to(ROOT)}: {name} imports"
        for target in sorted(imports_of(path, name)):
            if floor_of(target) < floor_of(name):
                found.append(f"{where} {target} (up from the {FLOORS[floor_of(name)][0]} to the "
                             f"{FLOORS[floor_of(target)][0]})")
            for who, banned, why in SIDEWAYS:
                if within(name, *who) and within(target, *banned):
                    found.append(f"{where} {target} ({why})")
    return sorted(set(found))


def test_imports_point_down_only():
    assert violations() == []


def library_violations() -> list[str]:
    found = []
    for name, path in sorted(modules().items()):
        for target in sorted(all_imports(path, name)):
            for who, banned, why in LIBRARIES:
                if within(name, *who) and within(target, *banned):
                    found.append(f"{path.relative_to(ROOT)}: {name} imports {target} ({why})")
    return found


def test_no_plugin_imports_ray_or_makes_its_own_temporary_folders():
    """Issue 71: no attack, sanitizer or metric imports Ray (it hands a training to its executor)
    or tempfile (it asks the engine for scratch folders)."""
    assert library_violations() == []


def fake_modules(root: Path, sources: dict[str, str]) -> dict[str, Path]:
    """Modules named as in ``sources`` (name -> text) written under ``root``, for the checkers'
    own tests: name -> path."""
    mods = {}
    for name, text in sources.items():
        path = root.joinpath(*name.split(".")).with_suffix(".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        mods[name] = path
    return mods


def test_the_library_rule_sees_a_violation(tmp_path, monkeypatch):
    bad = {"attackers.bad": "def f():\n    import ray.train\n",
           "audit.metrics.bad": "from ray import train\nimport tempfile\n",
           "audit.pipeline.fine": "import ray\nimport tempfile\n"}  # the engine may
    mods = fake_modules(tmp_path, bad)
    monkeypatch.setattr("tests.test_architecture.modules", lambda: mods)
    monkeypatch.setattr("tests.test_architecture.ROOT", tmp_path)
    ray_why, tmp_why = LIBRARIES[0][2], LIBRARIES[1][2]
    assert library_violations() == [f"attackers/bad.py: attackers.bad imports ray.train ({ray_why})",
                                     f"audit/metrics/bad.py: audit.metrics.bad imports ray ({ray_why})",
                                     f"audit/metrics/bad.py: audit.metrics.bad imports ray.train ({ray_why})",
                                     f"audit/metrics/bad.py: audit.metrics.bad imports tempfile ({tmp_why})"]


def test_the_checker_sees_a_violation(tmp_path, monkeypatch):
    """Upward and sideways arrows are caught (the rules are not vacuous): a plugin importing the
    command line, the pipeline importing the reports, an engine module importing the API."""
    bad = {"attackers.bad": "def f():\n    from anonaudit.cli.common import out_option\n",
           "audit.pipeline.bad": "from reports.export import COLUMNS\n",
           "audit.io.bad": "import anonaudit.api\n"}
    mods = fake_modules(tmp_path, bad)
    assert imports_of(mods["attackers.bad"], "attackers.bad") >= {"anonaudit.cli.common"}
    monkeypatch.setattr("tests.test_architecture.modules", lambda: mods)
    monkeypatch.setattr("tests.test_architecture.ROOT", tmp_path)
    assert violations() == [
        "attackers/bad.py: attackers.bad imports anonaudit.cli.common (up from the plugins to the command line)",
        "attackers/bad.py: attackers.bad imports anonaudit.cli.common.out_option (up from the plugins to the "
        "command line)",
        "audit/io/bad.py: audit.io.bad imports anonaudit.api (the engine never imports the API above it)",
        "audit/io/bad.py: audit.io.bad imports anonaudit.api (up from the models, files and the n-gram index to "
        "the API)",
        "audit/pipeline/bad.py: audit.pipeline.bad imports reports.export (the reports sit beside the pipeline, "
        "not below it)",
        "audit/pipeline/bad.py: audit.pipeline.bad imports reports.export.COLUMNS (the reports sit beside the "
        "pipeline, not below it)"]


def test_every_module_is_on_a_floor_and_every_rule_names_a_real_package():
    mods = modules()
    for name in mods:
        floor_of(name)
    prefixes = [p for _, ps in FLOORS for p in ps] + [p for who, banned, _ in SIDEWAYS for p in (*who, *banned)]
    for prefix in prefixes:
        assert any(within(m, prefix) for m in mods), prefix


def shims() -> list[str]:
    """Modules that alias another module under a second name (``sys.modules[...] = ...``), re-export
    a package wholesale (``from x import *``), or hand out names lazily with a deprecation (a module
    ``__getattr__`` that warns): the three shapes the old paths' shims took (issue 71 removed them)."""
    found = []
    for name, path in sorted(modules().items()):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
                found.append(f"{name}: from {node.module} import *")
            elif isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Subscript) and ast.unparse(t.value) == "sys.modules" for t in node.targets):
                found.append(f"{name}: assigns sys.modules")
            elif isinstance(node, ast.FunctionDef) and node.name == "__getattr__" and node in tree.body \
                    and "DeprecationWarning" in ast.unparse(node):
                found.append(f"{name}: a module __getattr__ that warns of a deprecation")
    return sorted(found)


def test_no_shim_of_an_old_path(tmp_path, monkeypatch):
    """The project keeps one path to each thing: no module stands in for another (issue 71: the
    old ``audit.cli``, ``audit.demo``, ``attackers.phrase_search.index`` and ``audit.core``'s lazy
    names went), and the check sees each shape of shim."""
    assert shims() == []
    for name in ("audit.cli", "audit.demo", "attackers.phrase_search.index"):
        assert not (ROOT.joinpath(*name.split(".")) / "__init__.py").exists(), name
    bad = {"audit.old": "import sys\nimport audit.io\nsys.modules['audit.old.io'] = audit.io\n",
           "audit.star": "from audit.io import *\n",
           "audit.lazy": "def __getattr__(name):\n    warnings.warn(name, DeprecationWarning)\n"}
    mods = {}
    for name, text in bad.items():
        path = tmp_path / f"{name}.py"
        path.write_text(text)
        mods[name] = path
    monkeypatch.setattr("tests.test_architecture.modules", lambda: mods)
    assert shims() == ["audit.lazy: a module __getattr__ that warns of a deprecation",
                       "audit.old: assigns sys.modules", "audit.star: from audit.io import *"]


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


def private_reaches() -> list[tuple[str, str]]:
    """``(module, expression)`` for every private attribute (``x._name``) a module reads or sets
    on an object other than ``self`` or ``cls``: a reach into another object's insides (TRIR's
    Ray training re-ran the local set-up through ten of ``attack._...``, issue 59)."""
    found = []
    for name, path in sorted(modules().items()):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
                found.append((name, ast.unparse(node)))
    return sorted(set(found))


#: Private attributes reached on another object, each with its reason: an object the class
#: itself builds or copies (a constructor or a worker's copy filling in its own kind's state).
#: The list only shrinks.
PRIVATE_REACHES_ALLOWED: dict[tuple[str, str], str] = {
    ("attackers.span_guess.background", "other._mentions"): "a copy of itself it resets (rescored)",
    ("attackers.span_guess.background", "other._tables"): "a copy of itself it resets (rescored)",
    ("attackers.span_guess.background", "other._candidate_keys"): "a copy of itself it resets (rescored)",
    ("attackers.span_guess.background", "other._parses"): "a copy of itself it resets (rescored)",
    ("audit.pipeline.executors", "self.start()._ray"): "its own Ray handle (start() returns self)",
    ("audit.ngrams.shards", "index._mmap"): "the class's own constructor (a classmethod) filling in the index",
    ("audit.ngrams.shards", "index._open"): "the class's own constructor (a classmethod) filling in the index",
    ("attackers.phrase_search.attack", "self.attack._originals"): "a worker's copy of the attack, in the attack's "
                                                                   "module, given each item's originals",
    ("attackers.phrase_search.attack", "self.attack._orig_rare"): "a worker's copy of the attack, in the attack's "
                                                                   "module, given each item's originals",
    ("attackers.span_guess.matcher", "matcher._spacy"): "the class's own constructor (a classmethod)",
}


def test_no_private_attribute_of_another_object_is_reached():
    """A module uses another object through its public methods; TRIR's local and Ray Train
    trainings share one routine (attackers.trir.fine_tuning) instead of reaching into the attack."""
    found = set(private_reaches())
    assert sorted(found - set(PRIVATE_REACHES_ALLOWED)) == []
    assert sorted(set(PRIVATE_REACHES_ALLOWED) - found) == [], "fixed: take these off the allow-list"


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


#: Imports that would close a circle and are allowed, each with its reason: type hints only
#: (under TYPE_CHECKING, never run), so no module waits on another at import. The list only shrinks.
CYCLE_EDGES_ALLOWED = {
    ("audit.core.checks", "audit.core.results"): "type hints only: checks_of reads a list of Results",
    ("audit.core.consistency", "audit.core.results"): "type hints only: results_problems reads Results and "
                                                        "Findings; Result itself uses consistency.beats",
    ("audit.ngrams.hashing", "audit.ngrams.tokenizer"): "type hints only: ngram_hashes reads Tokens",
    ("audit.ngrams.layout", "audit.ngrams.build"): "type hints only: the layout reads the build's Packing",
    ("audit.ngrams.storage", "audit.ngrams.query"): "type hints only: load_index returns an NgramIndex",
}


def module_graph() -> dict[str, set[str]]:
    """The import graph of every module of the packages, packages' ``__init__`` aside (a
    package that re-exports its modules is not a circle of theirs)."""
    mods = modules()
    packages = {n for n, p in mods.items() if p.name == "__init__.py"}
    graph = {}
    for top in PACKAGES:
        for name, deps in import_graph(top).items():
            if name not in packages:
                graph[name] = {d for d in deps if d not in packages}
    return graph


def test_no_import_circles():
    """Modules import each other in one direction (issue 59: results <-> registry and errors <->
    files in the core, TRIR's attack <-> its Ray training, the n-gram kernels <-> their compiled
    loops were circles)."""
    graph = module_graph()
    for (a, b), reason in CYCLE_EDGES_ALLOWED.items():
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


# --------------------------------------------------------------------------- names (issue 59, item 5)


#: File names that several modules share on purpose, each with its reason: the same role in
#: parallel plugin packages (siblings under one parent). Any other name two modules share is two
#: roles under one name (a command and the pipeline step it drives were: cli/gate.py and
#: pipeline/gate.py). The list only shrinks.
SAME_ROLE_NAMES: dict[str, str] = {
    "attack.py": "each attack package's Attack class (attackers/NAME/attack.py)",
    "sanitizer.py": "each LLM sanitizer package's Sanitizer class (defenders/NAME/sanitizer.py)",
    "prompts.py": "each LLM sanitizer package's prompts (defenders/NAME/prompts.py)",
    "repair.py": "each sanitizer package's repairer for `anonaudit harden` (defenders/NAME/repair.py)",
}


def shared_file_names() -> dict[str, list[str]]:
    """``{file name: [paths]}`` for every file name (``__init__.py`` aside) that two or more
    modules of the packages have."""
    by_name: dict[str, list[str]] = {}
    for path in modules().values():
        if path.name != "__init__.py":
            by_name.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    return {name: sorted(paths) for name, paths in sorted(by_name.items()) if len(paths) > 1}


def test_no_two_modules_share_a_name_in_different_roles():
    shared = shared_file_names()
    assert {n: p for n, p in shared.items() if n not in SAME_ROLE_NAMES} == {}
    assert sorted(set(SAME_ROLE_NAMES) - set(shared)) == [], "no longer shared: take these off the list"
    for name in SAME_ROLE_NAMES:  # parallel packages: siblings under one parent, never across floors
        parents = {Path(p).parent.parent for p in shared[name]}
        assert len(parents) == 1, (name, shared[name])


def test_the_name_check_sees_a_shared_name(tmp_path, monkeypatch):
    for rel in ("anonaudit/cli/gate.py", "audit/pipeline/gate.py", "audit/pipeline/__init__.py",
                "audit/io/__init__.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    monkeypatch.setattr("tests.test_architecture.ROOT", tmp_path)
    assert shared_file_names() == {"gate.py": ["anonaudit/cli/gate.py", "audit/pipeline/gate.py"]}
