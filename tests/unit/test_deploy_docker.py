"""The Dockerfile and .dockerignore, checked without a Docker engine.

The image must build from the context .dockerignore lets through (every COPY
source, everything `pip install .` needs), run as an unprivileged user, start
a command the `priorwatch` CLI accepts, and probe a route the API serves.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer.main
from fastapi.testclient import TestClient

from app.cli import cli
from app.config import Settings
from app.main import create_app

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


@dataclass(frozen=True)
class Instruction:
    keyword: str
    arguments: str
    stage: int


def parse_dockerfile(text: str) -> list[Instruction]:
    """Instructions with continuation lines joined and comments dropped."""
    instructions: list[Instruction] = []
    stage = -1
    logical = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not logical and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):  # comment inside a continued instruction
            continue
        if line.endswith("\\"):
            logical += line[:-1] + " "
            continue
        logical += line
        keyword, _, arguments = logical.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            stage += 1
        instructions.append(Instruction(keyword, arguments.strip(), stage))
        logical = ""
    assert not logical, "Dockerfile ends inside a continued instruction"
    return instructions


INSTRUCTIONS = parse_dockerfile(DOCKERFILE.read_text())
FINAL_STAGE = max(i.stage for i in INSTRUCTIONS)


def _final(keyword: str) -> list[str]:
    return [i.arguments for i in INSTRUCTIONS if i.keyword == keyword and i.stage == FINAL_STAGE]


def _exec_form(arguments: str) -> list[str]:
    argv = json.loads(arguments)
    assert isinstance(argv, list) and all(isinstance(a, str) for a in argv), arguments
    return argv


def check_priorwatch_argv(argv: list[str]) -> None:
    """Fail unless ``argv`` is an invocation the installed ``priorwatch`` CLI accepts."""
    assert argv[0] in PYPROJECT["project"]["scripts"], f"{argv[0]} is not a console script"
    group = typer.main.get_command(cli)  # a click group (typer may vendor click)
    name, *args = argv[1:]
    command = getattr(group, "commands", {}).get(name)
    assert command is not None, f"priorwatch has no command {name!r}"
    with group.context_class(group, info_name=argv[0]) as parent:
        command.make_context(name, list(args), parent=parent)  # raises on bad options


# --- .dockerignore ---------------------------------------------------------------


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        elif pattern[i] == "[":
            end = pattern.index("]", i)
            out += pattern[i : end + 1]
            i = end + 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out)


def dockerignore_rules(text: str) -> list[tuple[bool, re.Pattern[str]]]:
    """(negated, regex) per pattern, in file order."""
    rules = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = line.lstrip("!").strip("/")
        rules.append((negated, _pattern_regex(pattern)))
    return rules


def in_context(relative: str, rules: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """Whether ``relative`` (a path under the context root) is sent to the builder.

    As Docker does: the last pattern matching the path or one of its parent
    directories decides; ``!`` re-includes.
    """
    parts = relative.split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    included = True
    for negated, regex in rules:
        if any(regex.fullmatch(prefix) for prefix in prefixes):
            included = negated
    return included


RULES = dockerignore_rules(DOCKERIGNORE.read_text())


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("pyproject.toml", True),
        ("app/metrics/labeling.py", True),
        ("migrations/versions/x.py", True),
        ("app/__pycache__/cli.cpython-311.pyc", False),
        ("app/metrics/x.pyc", False),
        ("tests/unit/test_x.py", False),
        (".venv/bin/python", False),
        (".git/HEAD", False),
        (".env", False),
        ("priorwatch.db", False),
    ],
)
def test_dockerignore_sends_only_what_the_build_needs(path: str, expected: bool) -> None:
    assert in_context(path, RULES) is expected


def _source_files() -> list[str]:
    skip = {".git", ".venv", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache"}
    found = []
    for directory, subdirs, files in os.walk(ROOT):
        subdirs[:] = [d for d in subdirs if d not in skip and not d.endswith(".egg-info")]
        found += [str((Path(directory) / f).relative_to(ROOT)) for f in files]
    return found


def test_context_holds_every_file_pip_install_needs() -> None:
    needed = ["pyproject.toml", PYPROJECT["project"]["readme"]]
    package_patterns = PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]
    package_roots = {pattern.rstrip("*") for pattern in package_patterns}
    data_suffixes = {
        pattern.lstrip("*")
        for patterns in PYPROJECT["tool"]["setuptools"]["package-data"].values()
        for pattern in patterns
    }
    for path in _source_files():
        top = path.split("/")[0]
        if top in package_roots and (path.endswith(".py") or path.endswith(tuple(data_suffixes))):
            needed.append(path)
    assert any(p.startswith("migrations/versions/") for p in needed)
    missing = [p for p in needed if not in_context(p, RULES)]
    assert not missing


# --- Dockerfile ---------------------------------------------------------------------


def test_every_stage_builds_from_python_3_11_slim() -> None:
    bases = [i.arguments.split()[0] for i in INSTRUCTIONS if i.keyword == "FROM"]
    assert bases and set(bases) == {"python:3.11-slim"}
    assert FINAL_STAGE >= 1, "multi-stage: the runtime stage holds no build leftovers"


def test_every_copy_source_is_in_the_context() -> None:
    for instruction in INSTRUCTIONS:
        if instruction.keyword != "COPY" or "--from=" in instruction.arguments:
            continue
        *sources, _destination = shlex.split(instruction.arguments)
        for source in sources:
            assert (ROOT / source).exists(), source
            if source != ".":
                assert in_context(source, RULES), f"{source} is excluded by .dockerignore"


def test_runtime_runs_as_an_unprivileged_user() -> None:
    (user,) = _final("USER")
    name = user.split(":")[0]
    assert name not in {"root", "0"}
    assert name.isdigit(), "numeric uid, so Kubernetes runAsNonRoot can verify it"


def test_default_command_is_a_valid_serve_invocation() -> None:
    (cmd,) = _final("CMD")
    argv = _exec_form(cmd)
    assert argv == ["priorwatch", "serve", "--host", "0.0.0.0", "--port", "8000"]
    check_priorwatch_argv(argv)


def test_check_priorwatch_argv_rejects_bad_invocations() -> None:
    with pytest.raises(AssertionError):
        check_priorwatch_argv(["priorwatch", "srve"])
    with pytest.raises(Exception, match="No such option") as unknown:
        check_priorwatch_argv(["priorwatch", "serve", "--hots", "0.0.0.0"])
    assert type(unknown.value).__name__ == "NoSuchOption"
    with pytest.raises(Exception, match="valid integer") as bad_type:
        check_priorwatch_argv(["priorwatch", "serve", "--port", "http"])
    assert type(bad_type.value).__name__ == "BadParameter"


def test_healthcheck_probes_the_served_port_and_a_real_route(tmp_path: Path) -> None:
    (healthcheck,) = _final("HEALTHCHECK")
    (expose,) = _final("EXPOSE")
    (cmd,) = _final("CMD")
    argv = _exec_form(cmd)
    port = argv[argv.index("--port") + 1]
    assert expose == port
    found = re.search(r"http://127\.0\.0\.1:(\d+)(/\w+)", healthcheck)
    assert found, healthcheck
    assert found.group(1) == port
    assert found.group(2) == "/healthz"
    app = create_app(Settings(database_url=f"sqlite:///{tmp_path / 'x.db'}"))
    assert TestClient(app).get(found.group(2)).status_code == 200


def test_healthcheck_command_is_valid_python() -> None:
    (healthcheck,) = _final("HEALTHCHECK")
    argv = _exec_form(healthcheck.split("CMD", 1)[1].strip())
    assert argv[:2] == ["python", "-c"]
    compile(argv[2], "<healthcheck>", "exec")


def test_requirements_step_extracts_the_project_dependencies(tmp_path: Path) -> None:
    """Run the Dockerfile's own `python -c` that lists the dependencies."""
    (step,) = [i.arguments for i in INSTRUCTIONS if i.keyword == "RUN" and "tomllib" in i.arguments]
    code = shlex.split(step)[2]  # python -c "<code>" > /tmp/requirements.txt ...
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert result.stdout.split() == PYPROJECT["project"]["dependencies"]
