"""A PostgreSQL cluster of the fault tests' own: ``initdb`` in a temporary directory,
``pg_ctl`` on a free port; stopped, restarted, frozen and thawed at will.

The shared server on 5432 is never touched. ``initdb`` refuses to run as root,
so every PostgreSQL command runs as the ``postgres`` user (``runuser``); this
needs root. Without root, ``runuser``, a ``postgres`` user or the server
binaries the tests skip, and fail instead under PRIORWATCH_REQUIRE_POSTGRES=1.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import sqlalchemy as sa

PG_CTL_SECONDS = 60
"""Bound of one pg_ctl start or stop (pg_ctl -t)."""


def _unavailable(reason: str) -> None:
    if os.environ.get("PRIORWATCH_REQUIRE_POSTGRES") == "1":
        pytest.fail(f"the fault suite needs its own PostgreSQL cluster: {reason}")
    pytest.skip(f"fault suite skipped: {reason}")


def _server_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


@dataclass
class Cluster:
    """One running cluster in ``root`` (data, socket and log inside it)."""

    root: Path
    bin: Path
    port: int

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, *args: str) -> None:
        done = subprocess.run(
            ["runuser", "-u", "postgres", "--", *args],
            capture_output=True,
            text=True,
            timeout=PG_CTL_SECONDS + 30,
            check=False,
        )
        assert done.returncode == 0, f"{args[0]} failed:\n{done.stdout}{done.stderr}"

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c full_page_writes=off -c max_connections=100"
        )
        self._run(
            str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.log),
            "-o", options, "-t", str(PG_CTL_SECONDS), "-w", "start",
        )  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        self._run(
            str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode,
            "-t", str(PG_CTL_SECONDS), "-w", "stop",
        )  # fmt: skip

    def pids(self) -> list[int]:
        """The postmaster and every process it started."""
        postmaster = int((self.data / "postmaster.pid").read_text().splitlines()[0])
        children = []
        for stat in glob.glob("/proc/[0-9]*/stat"):
            try:
                fields = Path(stat).read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue  # the process ended meanwhile
            if int(fields[1]) == postmaster:
                children.append(int(Path(stat).parent.name))
        return [postmaster, *children]

    def freeze(self) -> list[int]:
        """SIGSTOP the whole cluster: connections stay open, nothing answers."""
        pids = self.pids()
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        return pids

    @staticmethod
    def thaw(pids: list[int]) -> None:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)

    def create_database(self, name: str) -> str:
        engine = sa.create_engine(self.url(), isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        finally:
            engine.dispose()
        return self.url(name)


def start_cluster(port: int) -> Cluster:
    """initdb and start a cluster on ``port`` (skips where that is impossible)."""
    server_bin = _server_bin()
    if os.geteuid() != 0:
        _unavailable("initdb must run as the postgres user, which needs root")
    if server_bin is None:
        _unavailable("the PostgreSQL server binaries (initdb) are not installed")
    if shutil.which("runuser") is None:
        _unavailable("runuser is not installed")
    try:
        user = pwd.getpwnam("postgres")
    except KeyError:
        _unavailable("there is no postgres user")
    assert server_bin is not None
    root = Path(tempfile.mkdtemp(prefix="priorwatch-faults-"))
    os.chown(root, user.pw_uid, user.pw_gid)
    cluster = Cluster(root, server_bin, port)
    cluster._run(
        str(server_bin / "initdb"), "-D", str(cluster.data), "-U", "postgres",
        "-A", "trust", "--no-sync", "-E", "UTF8",
    )  # fmt: skip
    cluster.start()
    return cluster


def remove_cluster(cluster: Cluster) -> None:
    """Stop the cluster (immediately) and delete its directory."""
    if (cluster.data / "postmaster.pid").exists():
        cluster.stop("immediate")
    shutil.rmtree(cluster.root, ignore_errors=True)
