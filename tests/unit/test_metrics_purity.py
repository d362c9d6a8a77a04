"""app.metrics and app.drift import nothing but numpy, scipy and the standard library."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "app"
ALLOWED_THIRD_PARTY = {"numpy", "scipy"}
PURE_PACKAGES = ["metrics", "drift"]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


@pytest.mark.parametrize("package", PURE_PACKAGES)
def test_pure_packages_import_only_numpy_scipy_stdlib(package: str) -> None:
    files = sorted((ROOT / package).rglob("*.py"))
    if not files:
        pytest.skip(f"app/{package} does not exist yet")
    offenders = []
    for path in files:
        for name in _imports(path):
            top = name.split(".")[0]
            if top in sys.stdlib_module_names or top in ALLOWED_THIRD_PARTY:
                continue
            if name == "app.errors" or (top == "app" and name.startswith(f"app.{package}")):
                continue
            if top == "app" and package == "drift" and name.startswith("app.metrics"):
                continue
            offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not offenders, "\n".join(offenders)
