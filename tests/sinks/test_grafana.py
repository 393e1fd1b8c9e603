"""The Grafana publisher against a contract fake of Grafana's HTTP API (tests/sinks/fake_grafana.py)."""

from __future__ import annotations

import pytest
from pydantic import SecretStr, ValidationError

from replmon.dashboards import build
from replmon.sinks.grafana import (
    GrafanaAuthError,
    GrafanaPublisher,
    GrafanaPublishError,
    GrafanaSettings,
    connect,
    load_dashboards,
)
from replmon.streaming import cli
from tests.redis_server import free_port
from tests.sinks.fake_grafana import FakeGrafana

BOARDS = list(build.build_all().values())


def settings(url: str, **overrides) -> GrafanaSettings:
    values = dict(url=url, token=SecretStr("glsa_test"), redis_url="redis://redis:6379")
    values.update(overrides)
    return GrafanaSettings(**values)


def publish(s: GrafanaSettings, boards=BOARDS):
    return GrafanaPublisher(connect(s), s).publish(boards)


def test_first_publish_creates_folder_datasource_and_dashboards():
    with FakeGrafana() as grafana:
        report = publish(settings(grafana.url))
    assert grafana.violations == []
    assert grafana.routes() == [
        "GET /api/folders/replmon",
        "POST /api/folders",
        "GET /api/datasources/uid/replmon-redis",
        "POST /api/datasources",
        "POST /api/dashboards/db",
        "POST /api/dashboards/db",
        "POST /api/dashboards/db",
    ]
    assert report.folder_created and report.datasource_created
    assert report.dashboards == [
        "/d/replmon-overview/replmon-cluster-overview",
        "/d/replmon-replica/replmon-partition-and-followers",
        "/d/replmon-broker/replmon-broker",
    ]
    assert grafana.folders["replmon"]["title"] == "replmon"
    ds = grafana.datasources["replmon-redis"]
    assert (ds["type"], ds["access"], ds["url"], ds["name"]) == (
        "redis-datasource",
        "proxy",
        "redis://redis:6379",
        "replmon Redis",
    )
    for _method, path, body in grafana.calls:
        if path == "/api/dashboards/db":
            assert body["overwrite"] is True and body["folderUid"] == "replmon" and body["message"]
            assert body["dashboard"]["id"] is None and body["dashboard"]["uid"].startswith("replmon-")


def test_publishing_again_updates_in_place():
    with FakeGrafana() as grafana:
        publish(settings(grafana.url))
        first = len(grafana.calls)
        report = publish(settings(grafana.url))
    assert grafana.routes()[first:] == [
        "GET /api/folders/replmon",
        "GET /api/datasources/uid/replmon-redis",
        "PUT /api/datasources/uid/replmon-redis",
        "POST /api/dashboards/db",
        "POST /api/dashboards/db",
        "POST /api/dashboards/db",
    ]
    assert not report.folder_created and not report.datasource_created
    assert grafana.dashboards["replmon-overview"]["version"] == 2
    assert grafana.violations == []


def test_the_fake_answers_412_without_overwrite_so_the_publisher_needs_it():
    with FakeGrafana() as grafana:
        publish(settings(grafana.url))
        api = connect(settings(grafana.url))
        with pytest.raises(Exception) as refused:
            api.dashboard.update_dashboard({"dashboard": {**BOARDS[0], "version": 99}, "overwrite": False})
    assert getattr(refused.value, "status_code", None) == 412
    assert "changed by someone else" in str(refused.value)


def test_basic_auth_works():
    with FakeGrafana(token=None, basic=("admin", "pw")) as grafana:
        publish(settings(grafana.url, token=None, username="admin", password=SecretStr("pw")))
    assert len(grafana.dashboards) == 3


def test_a_wrong_token_fails_clearly_with_401():
    with (
        FakeGrafana(token="the-right-one") as grafana,
        pytest.raises(GrafanaAuthError, match="401 Unauthorized to 'GET folder replmon'") as failure,
    ):
        publish(settings(grafana.url, token=SecretStr("expired-token")))
    assert "expired-token" not in str(failure.value)
    assert grafana.routes() == ["GET /api/folders/replmon"]  # stops at the first refusal


def test_a_token_without_permission_fails_clearly_with_403():
    with (
        FakeGrafana(read_only=True) as grafana,
        pytest.raises(GrafanaAuthError, match="403 Forbidden to 'create folder replmon'"),
    ):
        publish(settings(grafana.url))


def test_a_wrong_sub_path_fails_clearly_with_404():
    with (
        FakeGrafana() as grafana,
        pytest.raises(GrafanaPublishError, match="404 Not Found to 'create folder replmon'"),
    ):
        publish(settings(grafana.url + "/grafana"))
    assert grafana.routes()[0] == "GET /grafana/api/folders/replmon"


def test_a_folder_title_taken_by_another_uid_is_explained():
    with FakeGrafana() as grafana:
        grafana.folders["other"] = {"id": 9, "uid": "other", "title": "replmon", "version": 1}
        with pytest.raises(GrafanaPublishError, match="REPLMON_GRAFANA__FOLDER_UID"):
            publish(settings(grafana.url))


def test_redis_credentials_go_to_secure_json_data():
    with FakeGrafana() as grafana:
        publish(settings(grafana.url, redis_username="grafana-reader", redis_password=SecretStr("r-pw")))
    [body] = [b for m, p, b in grafana.calls if p == "/api/datasources"]
    assert body["jsonData"]["acl"] is True and body["jsonData"]["user"] == "grafana-reader"
    assert body["secureJsonData"] == {"password": "r-pw"}
    assert grafana.datasources["replmon-redis"]["secureJsonFields"] == {"password": True}


def test_grafana_unreachable_is_a_publish_error():
    s = settings(f"http://127.0.0.1:{free_port()}", timeout_s=2)
    with pytest.raises(GrafanaPublishError, match="cannot complete 'GET folder replmon'"):
        publish(s)


def test_settings_need_exactly_one_way_to_authenticate():
    with pytest.raises(ValidationError, match="not both"):
        GrafanaSettings(token=SecretStr("t"), username="a", password=SecretStr("b"))
    with pytest.raises(ValidationError, match="go together"):
        GrafanaSettings(username="admin")
    with pytest.raises(ValidationError, match="REPLMON_GRAFANA__TOKEN"):
        GrafanaSettings()
    with pytest.raises(ValidationError, match="without credentials"):
        GrafanaSettings(url="http://admin:admin@grafana:3000", token=SecretStr("t"))
    assert "glsa" not in repr(GrafanaSettings(token=SecretStr("glsa_secret")))


def test_the_cli_publishes_the_committed_json(monkeypatch, capsys):
    with FakeGrafana() as grafana:
        monkeypatch.setenv("REPLMON_GRAFANA__URL", grafana.url)
        monkeypatch.setenv("REPLMON_GRAFANA__TOKEN", "glsa_test")
        assert cli.main(["dashboards", "publish"]) == 0
        monkeypatch.setenv("REPLMON_GRAFANA__TOKEN", "wrong")
        assert cli.main(["dashboards", "publish"]) == 2
    out, err = capsys.readouterr()
    assert err.startswith("replmon dashboards publish: ")
    assert f"{grafana.url}/d/replmon-overview/" in out
    assert "401 Unauthorized" in err and "wrong" not in err.replace("is wrong", "")
    assert [b["uid"] for b in load_dashboards()] == ["replmon-broker", "replmon-overview", "replmon-replica"]


def test_a_grafana_answering_503_fails_the_publish_clearly_and_a_rerun_completes_it():
    with FakeGrafana() as grafana:
        grafana.unavailable = True
        with pytest.raises(
            GrafanaPublishError, match=r"cannot complete 'GET folder replmon'.*Server Error 503"
        ):
            publish(settings(grafana.url))
        grafana.unavailable = False
        report = publish(settings(grafana.url))
    assert report.folder_created and len(grafana.dashboards) == 3
    assert grafana.violations == []
