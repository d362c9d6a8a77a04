"""deploy/prometheus/prometheus.sharded.yml: a valid config whose jobs scrape every
shard of /metrics exactly once and read, to the rules and dashboard, as one job."""

from __future__ import annotations

from typing import Any

from test_deploy_prometheus import PROMETHEUS_DIR, _load, _promtool, needs_promtool

SHARDED = PROMETHEUS_DIR / "prometheus.sharded.yml"


def _shard_jobs() -> list[dict[str, Any]]:
    jobs = _load(SHARDED)["scrape_configs"]
    return [j for j in jobs if "shard" in j.get("params", {})]


@needs_promtool
def test_promtool_check_config() -> None:
    result = _promtool("check", "config", str(SHARDED))
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_jobs_cover_every_shard_once() -> None:
    jobs = _shard_jobs()
    counts = {j["params"]["shards"][0] for j in jobs}
    assert len(counts) == 1 and len(jobs) == int(counts.pop()) > 1
    assert sorted(int(j["params"]["shard"][0]) for j in jobs) == list(range(len(jobs)))


def test_every_shard_reads_as_the_api_job_with_its_shard_label() -> None:
    main = next(j for j in _load(PROMETHEUS_DIR / "prometheus.yml")["scrape_configs"])
    for job in _shard_jobs():
        relabel = {r["target_label"]: r["replacement"] for r in job["relabel_configs"]}
        assert relabel == {"job": main["job_name"], "shard": job["params"]["shard"][0]}
        assert job["metrics_path"] == main["metrics_path"]
        assert job["dns_sd_configs"] == main["dns_sd_configs"]
