"""The shipped way to send PRIORWATCH_METRICS_TOKEN from Prometheus works when enabled.

deploy/prometheus/prometheus.yml and docker-compose.yml carry the lines
commented out (the token is optional); uncommented, the configuration must
be valid and point at the file compose mounts.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "deploy" / "prometheus" / "prometheus.yml"
COMPOSE = ROOT / "docker-compose.yml"
PROMTOOL = shutil.which("promtool")


def _enabled_config() -> str:
    """prometheus.yml with the commented ``authorization`` block uncommented."""
    text = CONFIG.read_text()
    block = re.search(r"\n( *)# authorization:\n\1#   credentials_file: (\S+)\n", text)
    assert block is not None, "the commented authorization block is missing"
    indent, path = block.group(1), block.group(2)
    enabled = f"\n{indent}authorization:\n{indent}  credentials_file: {path}\n"
    return text.replace(block.group(0), enabled)


def test_the_commented_block_sends_the_mounted_token_file() -> None:
    config = yaml.safe_load(_enabled_config())
    job = next(j for j in config["scrape_configs"] if j["job_name"] == "priorwatch-api")
    target = job["authorization"]["credentials_file"]
    mount = re.search(r"# - (\./deploy/prometheus/metrics_token):(\S+):ro", COMPOSE.read_text())
    assert mount is not None and mount.group(2) == target
    api_env = yaml.safe_load(COMPOSE.read_text())["services"]["api"]["environment"]
    assert api_env["PRIORWATCH_METRICS_TOKEN"] == "${PRIORWATCH_METRICS_TOKEN:-}"
    assert "PRIORWATCH_METRICS_TOKEN" not in yaml.safe_load(CONFIG.read_text())  # off by default


@pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed")
def test_promtool_accepts_the_enabled_config(tmp_path: Path) -> None:
    assert PROMTOOL is not None
    text = _enabled_config().replace("/etc/prometheus/metrics_token", str(tmp_path / "token"))
    (tmp_path / "token").write_text("metrics-token-0123456789abcdef\n")
    shutil.copytree(CONFIG.parent / "rules", tmp_path / "rules")
    (tmp_path / "prometheus.yml").write_text(text)
    result = subprocess.run(
        [PROMTOOL, "check", "config", str(tmp_path / "prometheus.yml")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
