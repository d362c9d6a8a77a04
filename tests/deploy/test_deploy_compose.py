"""docker-compose.yml, read as data (no Docker engine here).

The stack must start in order (postgres healthy -> migrate done -> api and
workers), run commands the CLI accepts, mount files that exist where the
Prometheus, Grafana and Alertmanager configurations expect them, and document
every variable it reads.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy.engine import make_url
from test_deploy_docker import check_priorwatch_argv  # same directory (rootdir import)

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
OPERATIONS_DOC = ROOT / "docs" / "operations.md"
RAW = COMPOSE_FILE.read_text()

_VARIABLE = re.compile(r"\$\{(\w+)(?::?[-?]([^}]*))?\}")

#: Service keys of the compose specification used by this project; a typo
#: (`depends_om`) would be silently ignored by YAML, not by this test.
SERVICE_KEYS = {
    "image", "build", "command", "entrypoint", "environment", "env_file", "ports",
    "expose", "volumes", "depends_on", "healthcheck", "restart", "deploy", "profiles",
    "init", "stop_grace_period", "stop_signal", "user", "working_dir", "labels",
    "logging", "networks", "secrets", "configs", "ulimits", "mem_limit", "cpus",
}  # fmt: skip

PRIORWATCH_SERVICES = ("migrate", "api", "worker")


def interpolate(text: str) -> str:
    """Substitute ``${VAR:-default}`` by its default, as with an empty environment."""
    return _VARIABLE.sub(lambda m: m.group(2) or "", text)


COMPOSE: dict[str, Any] = yaml.safe_load(interpolate(RAW))
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]


def _mounts(service: str) -> dict[str, Path]:
    """Container path -> host path of the service's bind mounts."""
    mounts = {}
    for volume in SERVICES[service].get("volumes", []):
        source, target = volume.split(":")[:2]
        if source.startswith("."):
            mounts[target] = (COMPOSE_FILE.parent / source).resolve()
    return mounts


def _container_file(service: str, container_path: str) -> Path:
    """The host file a container path of ``service`` maps to."""
    for target, source in _mounts(service).items():
        if container_path == target or container_path.startswith(target + "/"):
            return source / Path(container_path).relative_to(target)
    raise AssertionError(f"{service}: nothing mounted at {container_path}")


def test_stack_has_the_services() -> None:
    assert set(SERVICES) == {
        "postgres", "migrate", "api", "worker", "prometheus", "grafana", "alertmanager"
    }  # fmt: skip


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_services_use_only_known_keys(service: str) -> None:
    assert set(SERVICES[service]) <= SERVICE_KEYS


def test_only_alertmanager_is_optional() -> None:
    assert SERVICES["alertmanager"]["profiles"] == ["alerting"]
    assert [name for name, s in SERVICES.items() if "profiles" in s] == ["alertmanager"]


def test_start_order_postgres_healthy_then_migrations_then_api_and_workers() -> None:
    assert "pg_isready" in " ".join(SERVICES["postgres"]["healthcheck"]["test"])
    for name in PRIORWATCH_SERVICES:
        assert SERVICES[name]["depends_on"]["postgres"] == {"condition": "service_healthy"}
    for name in ("api", "worker"):
        assert SERVICES[name]["depends_on"]["migrate"] == {
            "condition": "service_completed_successfully"
        }
    assert SERVICES["migrate"]["restart"] == "no"
    assert SERVICES["migrate"]["command"] == ["priorwatch", "migrate"]


def test_two_workers_by_default() -> None:
    assert SERVICES["worker"]["deploy"]["replicas"] == 2
    assert SERVICES["worker"]["command"] == ["priorwatch", "worker"]


def test_workers_share_their_ops_node_directory_on_a_volume() -> None:
    """The workers keep the OPS reference curves and nodes on a named volume, so that
    one worker builds them and the others and every restart read them; the image
    creates the volume's mount point for its unprivileged user (a new named volume
    takes the ownership of the image's directory)."""
    worker = SERVICES["worker"]
    directory = Path(worker["environment"]["PRIORWATCH_WORKER_OPS_NODE_DIR"])
    volume, mount = next(
        (source, target)
        for source, target, *_ in (v.split(":") for v in worker["volumes"])
        if directory.is_relative_to(target)
    )
    assert volume in COMPOSE["volumes"]
    dockerfile = (COMPOSE_FILE.parent / "Dockerfile").read_text()
    assert re.search(rf"install -d -o priorwatch -g priorwatch .*{re.escape(mount)}\b", dockerfile)


@pytest.mark.parametrize("service", PRIORWATCH_SERVICES)
def test_priorwatch_commands_are_valid(service: str) -> None:
    check_priorwatch_argv(SERVICES[service]["command"])


@pytest.mark.parametrize("service", PRIORWATCH_SERVICES)
def test_priorwatch_services_share_the_image_and_reach_the_database(service: str) -> None:
    spec = SERVICES[service]
    assert spec["image"] == SERVICES["api"]["image"]
    assert (COMPOSE_FILE.parent / spec["build"]["context"] / "Dockerfile").exists()
    url = make_url(spec["environment"]["PRIORWATCH_DATABASE_URL"])
    postgres = SERVICES["postgres"]["environment"]
    assert url.drivername == "postgresql+psycopg"
    assert (url.host, url.port) == ("postgres", 5432)
    assert (url.username, url.password, url.database) == (
        postgres["POSTGRES_USER"],
        postgres["POSTGRES_PASSWORD"],
        postgres["POSTGRES_DB"],
    )


def test_only_the_api_gets_the_admin_token_and_an_http_healthcheck() -> None:
    for name in PRIORWATCH_SERVICES:
        has_token = "PRIORWATCH_ADMIN_TOKEN" in SERVICES[name]["environment"]
        assert has_token is (name == "api"), name
        # the image's HEALTHCHECK probes the API port: off where nothing serves it
        assert ("healthcheck" not in SERVICES[name]) is (name == "api"), name
    for name in ("migrate", "worker"):
        assert SERVICES[name]["healthcheck"] == {"disable": True}


def test_api_port_is_the_one_prometheus_scrapes() -> None:
    (port,) = SERVICES["api"]["ports"]
    assert port.endswith(":8000")
    config = yaml.safe_load(
        _container_file("prometheus", "/etc/prometheus/prometheus.yml").read_text()
    )
    job = next(j for j in config["scrape_configs"] if j["job_name"] == "priorwatch-api")
    assert job["dns_sd_configs"][0]["names"] == ["api"]
    assert job["dns_sd_configs"][0]["port"] == 8000


def test_bind_mounts_exist() -> None:
    for service in SERVICES:
        for target, source in _mounts(service).items():
            assert source.exists(), f"{service}: {source} (for {target}) is missing"


def test_prometheus_gets_its_config_and_rules() -> None:
    command = SERVICES["prometheus"]["command"]
    config_path = next(a for a in command if a.startswith("--config.file=")).split("=", 1)[1]
    config_file = _container_file("prometheus", config_path)
    config = yaml.safe_load(config_file.read_text())
    rules = [p for pattern in config["rule_files"] for p in config_file.parent.glob(pattern)]
    assert rules, "the rule_files glob matches nothing in the mounted directory"
    am = config["alerting"]["alertmanagers"][0]["dns_sd_configs"][0]
    assert am["names"] == ["alertmanager"]
    assert SERVICES["alertmanager"]["ports"][0].endswith(f":{am['port']}")
    am_config = next(
        a for a in SERVICES["alertmanager"]["command"] if a.startswith("--config.file=")
    ).split("=", 1)[1]
    assert _container_file("alertmanager", am_config).is_file()


def test_grafana_gets_its_datasource_and_dashboards() -> None:
    provisioning = _container_file("grafana", "/etc/grafana/provisioning")
    (datasource,) = yaml.safe_load((provisioning / "datasources" / "prometheus.yml").read_text())[
        "datasources"
    ]
    assert datasource["url"] == "http://prometheus:9090"
    assert SERVICES["prometheus"]["ports"][0].endswith(":9090")
    (provider,) = yaml.safe_load((provisioning / "dashboards" / "priorwatch.yml").read_text())[
        "providers"
    ]
    # start.sh writes the mounted dashboards to the provider's path, then runs Grafana
    grafana = SERVICES["grafana"]
    shell, script, *command = grafana["entrypoint"]
    assert shell == "/bin/sh" and command == ["/run.sh"]  # the image's own entry point
    start = _container_file("grafana", script)
    assert start == ROOT / "deploy" / "grafana" / "start.sh"
    text = start.read_text()
    source = re.search(r'src="\$\{PRIORWATCH_DASHBOARDS_SOURCE:-([^}]+)\}"', text)
    written = re.search(r'out="\$\{PRIORWATCH_DASHBOARDS_DIR:-([^}]+)\}"', text)
    assert source is not None and written is not None
    assert (_container_file("grafana", source.group(1)) / "priorwatch.json").is_file()
    assert provider["options"]["path"] == written.group(1)
    home = Path(grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"])
    assert home.parent == Path(written.group(1)) and home.name == "priorwatch.json"
    # the dashboard's api_url comes from the environment, not localhost
    assert "PRIORWATCH_PUBLIC_URL: ${PRIORWATCH_PUBLIC_URL:-" in RAW
    assert "PRIORWATCH_PUBLIC_URL" in text


def test_third_party_images_are_pinned() -> None:
    for name, spec in SERVICES.items():
        if name in PRIORWATCH_SERVICES:
            continue
        image = spec["image"]
        tag = image.rpartition(":")[2]
        assert ":" in image and tag and tag != "latest", f"{name}: {image} is not pinned"


def test_published_ports_bind_to_loopback_by_default() -> None:
    for name, spec in SERVICES.items():
        for port in spec.get("ports", []):
            assert port.startswith("127.0.0.1:"), f"{name}: {port}"


def test_every_variable_is_documented() -> None:
    variables = {m.group(1) for m in _VARIABLE.finditer(RAW)}
    assert "PRIORWATCH_ADMIN_TOKEN" in variables
    header = RAW.split("\nname:", 1)[0]
    docs = OPERATIONS_DOC.read_text()
    for variable in variables:
        assert variable in header, f"{variable}: not described in the compose file header"
        assert variable in docs, f"{variable}: not described in docs/operations.md"


def test_interpolate_uses_defaults_as_with_an_empty_environment() -> None:
    assert interpolate("a ${X:-1} b ${Y:-} c ${Z-2}") == "a 1 b  c 2"
