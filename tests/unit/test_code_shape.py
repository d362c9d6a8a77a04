"""The shape of app/'s code, read with :mod:`ast`: no function over
:data:`MAX_FUNCTION_LINES` lines of code, and no module importing another module's
private (leading-underscore) name. Each check is also fed a synthetic offender, to
show that it fails."""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parents[2] / "app"

MAX_FUNCTION_LINES = 80
"""Most lines of code of one function in app/ (split longer ones by concern)."""


def _code_lines(source: str) -> set[int]:
    """The lines of ``source`` holding a token of code (not blank, not only a comment)."""
    skipped = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT}
    skipped |= {tokenize.DEDENT, tokenize.ENDMARKER}
    lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in skipped:
            lines.update(range(token.start[0], token.end[0] + 1))
    return lines


def _docstring_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> set[int]:
    first = node.body[0]
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        return set(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return set()


def long_functions(source: str, filename: str = "<synthetic>") -> list[str]:
    """The functions of ``source`` (methods and nested ones included, a nested one
    counting in its parent too) over :data:`MAX_FUNCTION_LINES` lines of code, from
    their decorators to their end, docstring excluded, as ``name (line): lines``."""
    code = _code_lines(source)
    found = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            span = set(range(start, (node.end_lineno or node.lineno) + 1))
            lines = len((span & code) - _docstring_lines(node))
            if lines > MAX_FUNCTION_LINES:
                found.append(f"{node.name} ({node.lineno}): {lines}")
    return found


def private_imports(source: str, filename: str = "<synthetic>") -> list[str]:
    """The private names ``source`` imports from another module (``from m import _x``),
    as ``line: module._x``. (``from __future__`` is no private import.)"""
    found = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            found.extend(
                f"{node.lineno}: {node.module}.{alias.name}"
                for alias in node.names
                if alias.name.startswith("_")
            )
    return found


def _app_sources() -> list[tuple[str, str]]:
    return [(str(p.relative_to(APP.parent)), p.read_text()) for p in sorted(APP.rglob("*.py"))]


def test_no_function_in_app_is_too_long() -> None:
    offenders = [
        f"{path}: {where}" for path, source in _app_sources() for where in long_functions(source)
    ]
    assert not offenders, "split by concern:\n" + "\n".join(offenders)


def test_no_module_in_app_imports_a_private_name() -> None:
    offenders = [
        f"{path}:{where}" for path, source in _app_sources() for where in private_imports(source)
    ]
    assert not offenders, "make the shared helper public:\n" + "\n".join(offenders)


def _function(code_lines: int, *, docstring_lines: int = 0, comments: int = 0) -> str:
    """A function of ``code_lines`` lines of code (its ``def`` and ``return`` included)."""
    doc = ['    """A long docstring.', *(["    more"] * (docstring_lines - 2)), '    """']
    body = [f"    x{i} = {i}" for i in range(code_lines - 2)]
    noise = ["    # a comment", ""] * comments
    return "\n".join(["def f():", *(doc if docstring_lines else []), *noise, *body, "    return 0"])


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (_function(MAX_FUNCTION_LINES + 1), ["f (1): 81"]),
        (_function(MAX_FUNCTION_LINES, docstring_lines=30, comments=20), []),
        (
            "class C:\n    @staticmethod\n    " + _function(90).replace("\n", "\n    "),
            ["f (3): 91"],
        ),
    ],
    ids=["one-line-too-many", "docstring-and-comments-do-not-count", "method-with-decorator"],
)
def test_a_long_function_fails_the_check(source: str, expected: list[str]) -> None:
    assert long_functions(source) == expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from app.exporter.reads import ModelRow, _json", ["1: app.exporter.reads._json"]),
        ("def f():\n    from app.x import _y as y", ["2: app.x._y"]),
        ("from __future__ import annotations\nfrom app.x import public", []),
    ],
    ids=["private", "lazy-and-renamed", "public"],
)
def test_a_private_import_fails_the_check(source: str, expected: list[str]) -> None:
    assert private_imports(source) == expected
