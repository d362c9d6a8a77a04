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
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer.main
from fastapi.testclient import TestClient
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

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
        ("clients/python/priorwatch_client/client.py", True),
        ("clients/python/priorwatch_client/py.typed", True),
        ("clients/python/README.md", False),
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
    find = PYPROJECT["tool"]["setuptools"]["packages"]["find"]
    package_roots = {
        str(Path(where) / pattern.rstrip("*"))
        for where in find["where"]
        for pattern in find["include"]
    }  # e.g. app, clients/python/priorwatch_client
    data_suffixes = {
        pattern.lstrip("*")
        for patterns in PYPROJECT["tool"]["setuptools"]["package-data"].values()
        for pattern in patterns
    }
    for path in _source_files():
        in_package = any(path.startswith(root + "/") for root in package_roots)
        if in_package and (path.endswith(".py") or path.endswith(tuple(data_suffixes))):
            needed.append(path)
    assert any(p.startswith("migrations/versions/") for p in needed)
    assert "clients/python/priorwatch_client/client.py" in needed
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


LOCK = ROOT / "requirements.lock"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


def _lock_pins() -> dict[str, tuple[str, list[str]]]:
    """Canonical name -> (version, hashes) of every requirement of the lock."""
    pins: dict[str, tuple[str, list[str]]] = {}
    name = ""
    for line in LOCK.read_text().splitlines():
        match = _PIN.match(line)
        if match:
            name = canonicalize_name(match.group(1))
            assert name not in pins, f"{name} pinned twice"
            pins[name] = (match.group(2), [])
        elif line.strip().startswith("--hash="):
            pins[name][1].append(line.strip().removeprefix("--hash=").rstrip(" \\"))
        else:
            assert not line.strip() or line.lstrip().startswith("#"), f"unexpected: {line!r}"
    return pins


def test_dependencies_install_from_the_lock_with_hashes() -> None:
    """The build stage installs exactly the lock, then the project without its deps."""
    copies = [i.arguments.split() for i in INSTRUCTIONS if i.keyword == "COPY"]
    assert ["requirements.lock", "./"] in copies
    pip_steps = [
        i.arguments for i in INSTRUCTIONS if i.keyword == "RUN" and "pip install" in i.arguments
    ]
    assert len(pip_steps) == 2, pip_steps
    dependencies, project = (shlex.split(step) for step in pip_steps)
    assert dependencies == ["pip", "install", "--require-hashes", "-r", "requirements.lock"]
    assert project[: project.index("&&")] == [
        "pip", "install", "--no-deps", "--no-build-isolation", "."
    ]  # fmt: skip
    # the lock reaches the build, before the sources (its own cached layer)
    assert in_context("requirements.lock", RULES)
    order = [i.arguments for i in INSTRUCTIONS if i.keyword in {"COPY", "RUN"}]
    assert order.index("requirements.lock ./") < order.index(pip_steps[0]) < order.index(". .")


def test_the_lock_pins_every_dependency_with_hashes() -> None:
    """Every runtime and build requirement of pyproject.toml is pinned, at a version
    that satisfies it, with sha256 hashes (a dependency added without `make lock`
    fails here)."""
    pins = _lock_pins()
    build = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    for text in [*PYPROJECT["project"]["dependencies"], *build]:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} is not in requirements.lock: run `make lock`"
        version, _ = pins[name]
        assert requirement.specifier.contains(version, prereleases=True), (text, version)
        for extra in requirement.extras:  # psycopg[binary] -> psycopg-binary
            assert canonicalize_name(f"{name}-{extra}") in pins, (text, extra)
    for name, (version, hashes) in pins.items():
        assert hashes, f"{name}=={version} has no hash"
        assert all(re.fullmatch(r"sha256:[0-9a-f]{64}", h) for h in hashes), name
    assert not re.search(r"^\s*--(index-url|extra-index-url|find-links)", LOCK.read_text(), re.M)


def test_make_lock_regenerates_the_lock_and_install_uses_its_pins() -> None:
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split("\nlock:", 1)[1].split("\n\n", 1)[0]
    for flag in ("pip-compile", "--generate-hashes", "--allow-unsafe", "--all-build-deps",
                 "--output-file requirements.lock", "pyproject.toml"):  # fmt: skip
        assert flag in recipe, flag
    header = LOCK.read_text().split("\n\n", 1)[0]
    assert "pip-compile" in header and "--output-file=requirements.lock" in header
    assert "grep -E '^[A-Za-z0-9]' requirements.lock" in makefile  # the pins, no hashes
    assert "-c $(VENV)/constraints.txt -e '.[dev]'" in makefile
    assert re.search(r"^\$\(STAMP\): pyproject.toml requirements.lock$", makefile, re.M)
