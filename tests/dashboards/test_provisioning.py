"""deploy/grafana provisions what the dashboards expect (Grafana cannot run here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from replmon.dashboards import build
from replmon.sinks.grafana import GrafanaSettings
from replmon.sinks.keys import DATASOURCE_UID

yaml = pytest.importorskip("yaml")
DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "grafana"


def load(relative: str) -> dict:
    return yaml.safe_load((DEPLOY / relative).read_text())


def test_the_provisioned_datasource_is_the_one_the_dashboards_name():
    [ds] = load("provisioning/datasources/redis.yaml")["datasources"]
    assert (ds["uid"], ds["type"], ds["access"]) == (DATASOURCE_UID, "redis-datasource", "proxy")
    assert ds["jsonData"]["client"] == "standalone"


def test_the_dashboard_provider_reads_the_built_json():
    [provider] = load("provisioning/dashboards/replmon.yaml")["providers"]
    compose = load("docker-compose.yml")
    sources = {v.split(":")[1]: v.split(":")[0] for v in compose["services"]["grafana"]["volumes"]}
    assert (DEPLOY / sources[provider["options"]["path"]]).resolve() == build.OUT_DIR
    assert provider["folderUid"] == GrafanaSettings.model_fields["folder_uid"].default


def test_compose_installs_the_plugin_and_listens_on_loopback_only():
    services = load("docker-compose.yml")["services"]
    assert "redis-datasource" in services["grafana"]["environment"]["GF_INSTALL_PLUGINS"]
    for service in services.values():
        for port in service.get("ports", []):
            assert port.startswith("127.0.0.1:"), port
