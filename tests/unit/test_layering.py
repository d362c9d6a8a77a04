"""The layering rules of app/, checked through direct and indirect imports.

Each rule names a package, the modules it may never load (directly, through
another module of app/, or through a third-party library) and, for the pure
packages, the only third-party libraries it may import. Two independent
checks per rule:

* the import graph of app/ read with :mod:`ast` (every ``import`` statement,
  including those inside functions but not those under ``if TYPE_CHECKING:``,
  followed transitively through app/);
* a fresh interpreter that imports every module of the package and lists
  ``sys.modules`` (catches what a third-party import drags in).

A rule whose package does not exist fails: a moved package must move its
rule too. Every package of app/ (every folder holding Python) must have a layer
in :data:`LAYERS` and an ``__init__.py``, and no two packages import each other,
directly or round a longer cycle. Each wrong arrow the rules exist for is fed
to the checkers as a synthetic import, to show that it fails.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
APP = REPO / "app"
CLIENT = REPO / "clients" / "python" / "priorwatch_client"
"""The client's package: its own distribution (clients/python), no ``app`` at all."""

LAYERS: dict[str, str] = {
    "app.metrics": "pure",
    "app.drift": "pure",
    "app.estimation": "pure",
    "app.maturity": "pure",
    "app.sla": "pure",
    "app.db": "storage",
    "app.services": "domain",
    "app.worker": "worker",
    "app.exporter": "exporter",
    "app.api": "web",
    "app.cli": "entry",
    "app.demo": "entry",
}
"""Every package of app/ and its layer (see CONTRIBUTING.md, "Layers")."""

PURE_LEAVES = ("app.errors", "app.statuses", "app.timegrid")
"""Modules of the standard library and each other only, that every layer, the pure
ones included, may import (app.timegrid: instants and windows, for services, the
exporter and the CLI)."""

STORAGE = ("app.db", "sqlalchemy", "alembic", "psycopg")
WEB = ("app.api", "app.main", "fastapi", "starlette", "uvicorn")
EXPORTER = ("app.exporter", "prometheus_client")
DOMAIN = ("app.services", "app.worker", "app.config", "pydantic")
METRICS_COMPUTATION = (
    "app.metrics.evaluate",
    "app.metrics.areas",
    "app.metrics.curves",
    "app.metrics.uncertainty",
    "app.metrics.ops",
    "app.metrics.ops_scoring",
    "app.metrics.ops_labeling",
    "app.metrics.calibrated",
    "app.metrics.cost",
    "app.metrics.dbt",
    "app.metrics.points",
    "app.metrics.voting",
    "app.drift",
    "app.estimation",
    "app.maturity",
    "app.services.windows.compute",
    "app.services.read.windows",
    "app.services.refresh.groups",
    "app.services.windows.reference_cache",
    "app.services.read.sla_report",
)
"""What computes metrics; the exporter may read metric *names* (app.metrics.labeling)."""


USE_CASES = ("app.services.refresh", "app.services.read")
ROOMS: dict[str, str] = {
    "app.services.models": "the models, their settings, keys and caches",
    "app.services.windows": "the window model (sums, deltas, computation; no SQL)",
    "app.services.ingest": "use case: accept a batch",
    "app.services.refresh": "use case: keep stored results current (the worker's)",
    "app.services.read": "use case: read windows and SLA reports",
}
"""The rooms of app/services: ingest, refresh and read build on windows, windows on
models, and the three use-case rooms never import each other."""


@dataclass(frozen=True)
class Rule:
    package: str
    forbidden: tuple[str, ...]
    third_party: frozenset[str] | None = None
    """For pure packages: the only third-party libraries allowed (None: any)."""


RULES: tuple[Rule, ...] = (
    Rule(
        "app.metrics",
        (*STORAGE, *WEB, *EXPORTER, *DOMAIN, "app.drift"),
        frozenset({"numpy", "scipy"}),
    ),
    Rule("app.drift", (*STORAGE, *WEB, *EXPORTER, *DOMAIN), frozenset({"numpy", "scipy"})),
    Rule("app.estimation", (*STORAGE, *WEB, *EXPORTER, *DOMAIN), frozenset({"numpy", "scipy"})),
    Rule("app.maturity", (*STORAGE, *WEB, *EXPORTER, *DOMAIN), frozenset({"numpy", "scipy"})),
    Rule("app.sla", (*STORAGE, *WEB, *EXPORTER, *DOMAIN), frozenset()),
    Rule("app.db", ("app.services", "app.worker", "app.exporter", *WEB)),
    Rule("app.worker", (*WEB, "app.exporter")),
    Rule("app.exporter", (*METRICS_COMPUTATION, *WEB, "app.services")),
    *(
        Rule(f"app.services.{room}", (*WEB, "app.worker", "app.exporter", *banned))
        for room, banned in {
            "models": ("app.services.ingest", "app.services.windows", *USE_CASES),
            "windows": ("app.services.ingest", *USE_CASES),
            "ingest": USE_CASES,
            "refresh": ("app.services.ingest", "app.services.read"),
            "read": ("app.services.ingest", "app.services.refresh"),
        }.items()
    ),
)
"""The layering rules. To add a pure package (e.g. app.estimation), add it to
LAYERS and add ``Rule("app.estimation", (*STORAGE, *WEB, *EXPORTER, *DOMAIN),
frozenset({"numpy", "scipy"}))``."""


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in APP.rglob("*.py")}


def _in(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _runtime_nodes(tree: ast.AST, *, module_level: bool) -> list[ast.AST]:
    """The nodes of ``tree`` that may run: never those under ``if TYPE_CHECKING:``, and
    with ``module_level`` not those inside functions (run only when called)."""
    out: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo.extend(node.orelse)
            continue
        if module_level and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        todo.extend(ast.iter_child_nodes(node))
    return out


@cache
def _direct_imports(module: str, *, module_level: bool = False) -> frozenset[str]:
    """Every module named by an import statement of ``module`` (absolute names).

    With ``module_level``, only the statements that run when it is imported."""
    path = _modules()[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in _runtime_nodes(tree, module_level=module_level):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            for alias in node.names:
                if f"{base}.{alias.name}" in _modules():
                    found.add(f"{base}.{alias.name}")  # ``from app.db import queue``
    return frozenset(found)


def _closure(start: list[str], extra: Mapping[str, set[str]] | None = None) -> set[str]:
    """``start`` and everything it imports, transitively through app/.

    An imported module counts with every import statement it holds, even inside
    functions (lazy imports); the parent packages it makes Python run count with
    their module-level statements only. ``extra`` adds synthetic imports (module ->
    the modules it would import), for the tests that show a wrong arrow fails."""
    full: set[str] = set()
    partial: set[str] = set()
    todo = [(name, True) for name in start]
    while todo:
        name, whole = todo.pop()
        if name in full or (not whole and name in partial):
            continue
        (full if whole else partial).add(name)
        if name in _modules():
            todo.extend((parent, False) for parent in _parents(name))
            todo.extend((n, True) for n in _direct_imports(name, module_level=not whole))
        todo.extend((n, True) for n in (extra or {}).get(name, ()))
    return full | partial


def _package_modules(package: str) -> list[str]:
    return sorted(m for m in _modules() if m == package or m.startswith(package + "."))


@cache
def _loaded_by_importing(package: str) -> frozenset[str]:
    """``sys.modules`` of a fresh interpreter after importing every module of ``package``."""
    code = (
        "import importlib, json, sys\n"
        f"for name in {_package_modules(package)!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    return frozenset(json.loads(out.stdout))


def test_every_package_has_a_layer() -> None:
    folders = {p.parent for p in APP.glob("*/**/*.py")}
    packages = {_module_name(p / "__init__.py") for p in folders if p.parent == APP}
    assert packages == set(LAYERS), "add the package to LAYERS (and RULES) in this file"
    assert not [p for p in folders if not (p / "__init__.py").is_file()], "add an __init__.py"


def _package(module: str) -> str:
    """The package of app/ (or top-level module) that ``module`` belongs to."""
    return ".".join(module.split(".")[:2])


def _package_cycles(extra: Mapping[str, set[str]] | None = None) -> list[list[str]]:
    """The cycles between app's packages and top-level modules (imports inside functions
    included, ``if TYPE_CHECKING:`` ones not), each as the path round it."""
    graph: dict[str, set[str]] = {}
    for module in _modules():
        if module == "app":
            continue
        imported = {*_direct_imports(module), *(extra or {}).get(module, ())}
        edges = graph.setdefault(_package(module), set())
        edges.update(_package(n) for n in imported if n.startswith("app.") and n != "app")
    for package, edges in graph.items():
        edges.discard(package)
    cycles = []
    for start in sorted(graph):
        paths = [[start]]
        seen = {start}
        while paths:
            path = paths.pop()
            for nxt in sorted(graph.get(path[-1], ())):
                if nxt == start:
                    cycles.append([*path, start])
                elif nxt not in seen and nxt > start:  # each cycle once, from its least package
                    seen.add(nxt)
                    paths.append([*path, nxt])
    return cycles


def test_no_cycle_between_packages() -> None:
    cycles = _package_cycles()
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


def _offenders(rule: Rule, extra: Mapping[str, set[str]] | None = None) -> list[str]:
    return [
        f"{module} loads {name}"
        for module in _package_modules(rule.package)
        for name in sorted(_closure([module], extra))
        if _in(name, rule.forbidden) and not _in(name, (rule.package,))
    ]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.package)
def test_rule_package_exists(rule: Rule) -> None:
    assert (REPO / rule.package.replace(".", "/") / "__init__.py").is_file(), (
        f"{rule.package} is gone: move its rule with it"
    )
    assert rule.package in LAYERS or rule.package in ROOMS


def test_every_service_module_is_in_a_room() -> None:
    services = APP / "services"
    rooms = {p.parent for p in services.glob("*/__init__.py")}
    assert {_module_name(r / "__init__.py") for r in rooms} == set(ROOMS)
    loose = [p.name for p in services.glob("*.py") if p.name != "__init__.py"]
    assert not loose, f"move {loose} into a room of app/services"


@pytest.mark.parametrize(
    ("room", "extra"),
    [
        ("app.services.read", {"app.services.read.windows": {"app.services.refresh.groups"}}),
        ("app.services.windows", {"app.services.windows.deltas": {"app.services.ingest.parse"}}),
        (
            "app.services.models",
            {"app.services.models.retention": {"app.services.windows.reference"}},
        ),
    ],
    ids=["read-refresh", "windows-ingest", "models-windows"],
)
def test_a_wrong_arrow_between_rooms_fails_the_check(room: str, extra: dict[str, set[str]]) -> None:
    rule = next(r for r in RULES if r.package == room)
    assert not _offenders(rule)
    (names,) = extra.values()
    assert any(_in(o.split()[-1], tuple(names)) for o in _offenders(rule, extra))


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.package)
def test_import_graph_respects_rule(rule: Rule) -> None:
    assert _package_modules(rule.package), f"{rule.package} has no modules"
    offenders = _offenders(rule)
    assert not offenders, "\n".join(offenders[:20])


EXPORTER_RULE = next(r for r in RULES if r.package == "app.exporter")


@pytest.mark.parametrize(
    "extra",
    [
        {"app.exporter.rejections": {"app.api.errors"}},  # exporter -> web (one URN prefix)
        {"app.exporter.reads": {"fastapi"}},
        {
            "app.exporter.series": {"app.services.read.sla_report"}
        },  # exporter -> services (SLA rules)
        {"app.exporter.estimates": {"app.services.read.windows"}},
        {"app.timegrid": {"app.services.models.config"}},  # through a pure leaf it loads
    ],
    ids=["exporter-api", "exporter-fastapi", "exporter-services", "exporter-reads", "via-leaf"],
)
def test_a_wrong_arrow_of_the_exporter_fails_the_check(extra: dict[str, set[str]]) -> None:
    names = next(iter(extra.values()))
    offenders = _offenders(EXPORTER_RULE, extra)
    assert offenders and all(_in(o.split()[-1], EXPORTER_RULE.forbidden) for o in offenders)
    assert any(_in(o.split()[-1], tuple(names)) for o in offenders), offenders


def test_a_package_cycle_fails_the_check() -> None:
    """db -> services would close a cycle (services import db)."""
    assert not _package_cycles()
    cycles = _package_cycles({"app.db.models": {"app.services.read.sla_report"}})
    assert ["app.db", "app.services", "app.db"] in cycles
    assert _package_cycles({"app.timegrid": {"app.exporter.series"}})  # longer: leaf <-> exporter


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.package)
def test_importing_package_loads_nothing_forbidden(rule: Rule) -> None:
    loaded = _loaded_by_importing(rule.package)
    assert rule.package in loaded
    offenders = sorted(m for m in loaded if _in(m, rule.forbidden) and not _in(m, (rule.package,)))
    assert not offenders, f"importing {rule.package} loads {offenders[:20]}"


@pytest.mark.parametrize(
    "rule", [r for r in RULES if r.third_party is not None], ids=lambda r: r.package
)
def test_pure_packages_import_only_allowed_libraries(rule: Rule) -> None:
    assert rule.third_party is not None
    allowed_app = (rule.package, *PURE_LEAVES, *(p for p, k in LAYERS.items() if k == "pure"))
    offenders = []
    for module in _package_modules(rule.package):
        for name in sorted(_direct_imports(module)):
            top = name.split(".")[0]
            if top in sys.stdlib_module_names or top in rule.third_party:
                continue
            if top == "app" and _in(name, allowed_app) and not _in(name, rule.forbidden):
                continue
            offenders.append(f"{module} imports {name}")
    assert not offenders, "\n".join(offenders)


@pytest.mark.parametrize("module", PURE_LEAVES)
def test_pure_leaves_import_only_the_standard_library(module: str) -> None:
    imported = _direct_imports(module)
    assert imported, f"{module} imports nothing at all? (from __future__ is expected)"
    assert all(
        name.split(".")[0] in sys.stdlib_module_names or name in PURE_LEAVES for name in imported
    ), imported


def test_the_collector_does_not_load_the_metrics_core() -> None:
    loaded = _loaded_by_importing("app.exporter.collector")
    assert "app.exporter.collector" in loaded
    assert "app.metrics.labeling" in loaded  # the metric names, for the SLA gauges
    assert not [m for m in loaded if _in(m, METRICS_COMPUTATION)]


def test_services_import_nothing_from_the_web_layer() -> None:
    offenders = [
        f"{m} loads {n}"
        for m in _package_modules("app.services")
        for n in _closure([m])
        if _in(n, WEB)
    ]
    assert not offenders, "\n".join(offenders)


def test_the_graph_check_sees_indirect_and_lazy_imports() -> None:
    """Self-test: the worker reaches storage only through services, lazily in part."""
    closure = _closure(["app.worker.runner"])
    assert "app.db.queue" in closure  # runner -> jobs -> window_refresh -> db.queue
    assert "app.services.windows.compute" in closure  # imported inside a function


def test_the_metrics_package_is_lazy_and_keeps_its_entry_point() -> None:
    """``from app.metrics import evaluate`` is the function, whatever was imported before."""
    code = (
        "import sys\n"
        "import app.metrics.labeling\n"
        "lazy = 'app.metrics.evaluate' not in sys.modules\n"
        "import app.metrics.evaluate\n"
        "from app.metrics import evaluate\n"
        "print(lazy, callable(evaluate), evaluate([0.2, 0.8], [0, 1])['recall'])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["True", "True", "1.0"]


# --- the client package (clients/python/priorwatch_client) ----------------------------


def _top_level_imports(source: str, filename: str) -> set[str]:
    """Top-level names imported anywhere in ``source`` (functions and ``if
    TYPE_CHECKING:`` included: the distribution has nothing else to offer)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{filename}: relative import"
            names.add((node.module or "").split(".")[0])
    return names


def _client_imports() -> dict[str, set[str]]:
    """:func:`_top_level_imports` of each client module."""
    return {
        path.name: _top_level_imports(path.read_text(), path.name)
        for path in sorted(CLIENT.glob("*.py"))
    }


def _client_offenders(imports: Mapping[str, set[str]]) -> list[str]:
    declared = tomllib.loads((CLIENT.parent / "pyproject.toml").read_text())["project"]
    allowed = {re.split(r"[<>=!~ \[]", d)[0] for d in declared["dependencies"]}
    assert allowed == {"numpy", "httpx", "orjson"}
    return [
        f"{module} imports {name}"
        for module, names in imports.items()
        for name in sorted(names)
        if name not in sys.stdlib_module_names and name not in {*allowed, "priorwatch_client"}
    ]


def test_the_client_imports_only_its_declared_dependencies() -> None:
    offenders = _client_offenders(_client_imports())
    assert len(_client_imports()) > 5 and not offenders, "\n".join(offenders)


@pytest.mark.parametrize(
    "source",
    [
        "from app.services.windowing import window_start",  # client -> services
        "import app.timegrid",
        "def f():\n    from app.services.read import sla_report as sla",
    ],
)
def test_a_wrong_arrow_of_the_client_fails_the_check(source: str) -> None:
    imports = _client_imports()
    imports["client.py"] = {*imports["client.py"], *_top_level_imports(source, "client.py")}
    assert _client_offenders(imports) == ["client.py imports app"]


def test_the_development_install_imports_the_client_from_the_source_tree() -> None:
    """``make install``'s editable install maps priorwatch_client to clients/python."""
    import priorwatch_client

    assert Path(priorwatch_client.__file__).parent == CLIENT


def test_importing_the_client_loads_nothing_of_the_server() -> None:
    modules = sorted(f"priorwatch_client.{p.stem}" for p in CLIENT.glob("*.py"))
    code = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    loaded = set(json.loads(out.stdout))
    assert "priorwatch_client.client" in loaded
    server = ("app", "migrations", "scipy", "pydantic", *STORAGE, *WEB, *EXPORTER)
    assert not sorted(m for m in loaded if _in(m, server))
