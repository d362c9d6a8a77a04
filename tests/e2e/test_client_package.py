"""The two distributions of the one client source tree, built and installed for real.

* ``pip install ./clients/python`` into a fresh virtualenv (no system site
  packages; numpy, httpx and orjson from the package index): the client
  imports, logs and flushes against a mock service, and nothing of the
  server (``app``, scipy, FastAPI, ...) is installed or importable.
* The server's wheel, built from the files the Docker context holds, carries
  ``priorwatch_client`` at the top level next to ``app``: installing the
  server installs the client its CLI imports.

Both copy the sources to a temporary directory first (setuptools builds in
the source tree), so concurrent runs share nothing. Slow: a virtualenv and a
package install (about a minute).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLIENT_DIR = ROOT / "clients" / "python"

pytestmark = pytest.mark.slow

_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")

# Run inside the fresh virtualenv, from a directory holding no sources: what a
# producer's service sees after `pip install ./clients/python`.
_PROBE = """
import importlib.metadata as md, importlib.util, json, sys
from datetime import UTC, datetime

import httpx
import priorwatch_client as pc
from priorwatch_client import AsyncClient, Client, InvalidInput

posts = []

def service(request):
    path = request.url.path
    if path == "/v1/models/m":
        doc = {"name": "m", "window": "1h", "thresholds": [0.5], "segments": [], "pi0": 0.1}
        return httpx.Response(200, json={**doc, "n_bins": 2})
    if path == "/v1/models/m/bins":
        return httpx.Response(200, json={"edges": [0.0, 0.5, 1.0]})
    posts.append(json.loads(request.read()))
    return httpx.Response(202, json={"batch_id": "b", "count": 1})

at = datetime(2026, 11, 26, 10, 30, tzinfo=UTC)
with Client("http://svc", "pw_x", "m", transport=httpx.MockTransport(service)) as pw:
    pw.log([0.2, 0.7, 0.9], [0, 1, 1], timestamp=at)
    pw.log_scores([0.1], timestamp=at)
    pw.flush()
    try:
        pw.log([1.5], [0])
    except InvalidInput as exc:
        refused = exc.field
dist = md.distribution("priorwatch-client")
print(json.dumps({
    "module": pc.__file__,
    "api": [callable(getattr(Client, name)) for name in ("log", "log_scores", "flush", "windows")],
    "async": AsyncClient.__name__,
    "posts": sorted(posts, key=lambda p: "unlabelled" in p["histogram"]),
    "refused": refused,
    "requires": sorted(dist.requires or []),
    "top_level": sorted({f.parts[0] for f in dist.files or [] if ".dist-info" not in f.parts[0]}),
    "typed": any(f.name == "py.typed" for f in dist.files or []),
    "server_importable": [
        n for n in ("app", "migrations", "scipy", "fastapi", "sqlalchemy", "pydantic")
        if importlib.util.find_spec(n) is not None
    ],
    "loaded": sorted(m for m in sys.modules if m.split(".")[0] in ("app", "scipy")),
}))
"""


def test_the_client_installs_alone_in_a_clean_venv(tmp_path: Path) -> None:
    source = tmp_path / "python"
    shutil.copytree(CLIENT_DIR, source, ignore=_IGNORE)  # only clients/python: self-contained
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", str(source)],
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    run = subprocess.run(
        [str(python), "-I", "-c", _PROBE], cwd=tmp_path, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    assert got["module"].startswith(str(venv)), got["module"]  # the installed copy
    assert got["api"] == [True] * 4 and got["async"] == "AsyncClient"
    labelled, unlabelled = got["posts"]
    assert labelled["timestamp"] == "2026-11-26T10:30:00Z"
    assert labelled["histogram"]["positives"] == {"bins": [1], "counts": [2]}
    assert labelled["histogram"]["negatives"] == {"bins": [0], "counts": [1]}
    assert unlabelled["histogram"] == {"unlabelled": {"bins": [0], "counts": [1]}}
    assert got["refused"] == "scores"
    names = {r.split(">")[0].split("=")[0].split("<")[0].strip() for r in got["requires"]}
    assert names == {"numpy", "httpx", "orjson"}
    assert got["top_level"] == ["priorwatch_client"] and got["typed"]
    assert got["server_importable"] == [] and got["loaded"] == []


def test_the_server_wheel_carries_the_client_package(tmp_path: Path) -> None:
    tree = tmp_path / "src"
    tree.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tree / name)
    for directory in ("app", "migrations", "clients/python/priorwatch_client"):
        shutil.copytree(ROOT / directory, tree / directory, ignore=_IGNORE)
    out = tmp_path / "dist"
    pip = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation"]
    build = subprocess.run([*pip, "-w", str(out), str(tree)], capture_output=True, text=True)
    assert build.returncode == 0, build.stdout + build.stderr
    (wheel,) = out.glob("priorwatch-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    client = sorted(n for n in names if n.startswith("priorwatch_client/"))
    sources = sorted(p.name for p in (CLIENT_DIR / "priorwatch_client").glob("*.py"))
    assert client == sorted(f"priorwatch_client/{n}" for n in [*sources, "py.typed"])
    assert "app/cli/__init__.py" in names and "migrations/env.py" in names
    assert not [n for n in names if n.startswith(("clients/", "app/client/"))]
