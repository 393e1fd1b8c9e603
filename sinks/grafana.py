"""Publish the dashboards to a running Grafana: folder, Redis data source, dashboards.

    replmon dashboards publish [--input dashboards/json]

takes its settings from the settings loader (streaming/settings.load_grafana_settings reads
REPLMON_GRAFANA__* into GrafanaSettings; docs/grafana.md) and is safe to run again: the folder
and data source are looked up by uid and updated, dashboards are saved with overwrite=true.
Deploys that prefer file provisioning use deploy/grafana instead; both give the same uids.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import niquests
from grafana_client import GrafanaApi
from grafana_client.client import GrafanaClientError, GrafanaException, GrafanaUnauthorizedError
from pydantic import BaseModel, ConfigDict, PositiveFloat, SecretStr, model_validator

from replmon.sinks.keys import DATASOURCE_PLUGIN, DATASOURCE_UID

log = logging.getLogger(__name__)

DASHBOARDS_DIR = Path(str(resources.files("replmon.dashboards") / "json"))  # package data


class GrafanaPublishError(Exception):
    """Publishing failed; the message says which call and why."""


class GrafanaAuthError(GrafanaPublishError):
    """Grafana refused the credentials (401) or their permissions (403)."""


class GrafanaSettings(BaseModel):
    """Where Grafana is, how to authenticate, and how Grafana reaches Redis. The one statement of
    these settings and their defaults; the settings loader fills it from REPLMON_GRAFANA__*
    (streaming/settings.load_grafana_settings): a sink reads no environment."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str = "http://127.0.0.1:3000"
    token: SecretStr | None = None  # service account token (Bearer)
    username: str | None = None  # or basic auth
    password: SecretStr | None = None
    verify_tls: bool = True
    timeout_s: PositiveFloat = 10.0
    folder_uid: str = "replmon"
    folder_title: str = "replmon"
    datasource_uid: str = DATASOURCE_UID  # the uid every dashboard query names
    datasource_name: str = "replmon Redis"
    redis_url: str = "redis://redis:6379"  # as Grafana's server reaches Redis
    redis_username: str | None = None
    redis_password: SecretStr | None = None
    redis_tls: bool = False
    redis_tls_skip_verify: bool = False

    @model_validator(mode="after")
    def _one_way_to_authenticate(self) -> GrafanaSettings:
        basic = self.username is not None or self.password is not None
        if self.token is not None and basic:
            raise ValueError("set REPLMON_GRAFANA__TOKEN or USERNAME/PASSWORD, not both")
        if basic and (self.username is None or self.password is None):
            raise ValueError("REPLMON_GRAFANA__USERNAME and REPLMON_GRAFANA__PASSWORD go together")
        if self.token is None and not basic:
            raise ValueError("set REPLMON_GRAFANA__TOKEN, or REPLMON_GRAFANA__USERNAME and _PASSWORD")
        if urlsplit(self.url).scheme not in ("http", "https") or urlsplit(self.url).password:
            raise ValueError("url must be http(s)://host[:port][/sub-path], without credentials")
        return self

    def credential(self) -> str | tuple[str, str]:
        if self.token is not None:
            return self.token.get_secret_value()
        if self.username is None or self.password is None:  # the validator above refuses this
            raise ValueError("no credential: set a token, or a username and password")
        return (self.username, self.password.get_secret_value())


def connect(settings: GrafanaSettings) -> GrafanaApi:
    """A GrafanaApi for settings.url (which may carry a sub-path, e.g. https://host/grafana)."""
    url = urlsplit(settings.url)
    prefix = url.path.strip("/")
    return GrafanaApi(
        settings.credential(),
        host=url.hostname,
        port=url.port,
        protocol=url.scheme,
        url_path_prefix=f"{prefix}/" if prefix else "",
        verify=settings.verify_tls,
        timeout=settings.timeout_s,
    )


def datasource_body(settings: GrafanaSettings) -> dict:
    """The data source as the redis-datasource plugin reads its settings."""
    json_data: dict[str, Any] = {
        "client": "standalone",
        "poolSize": 5,
        "timeout": 10,
        "pingInterval": 0,
        "pipelineWindow": 0,
        "tlsAuth": settings.redis_tls,
        "tlsSkipVerify": settings.redis_tls_skip_verify,
        "acl": settings.redis_username is not None,
    }
    if settings.redis_username is not None:
        json_data["user"] = settings.redis_username
    body = {
        "uid": settings.datasource_uid,
        "name": settings.datasource_name,
        "type": DATASOURCE_PLUGIN,
        "access": "proxy",
        "url": settings.redis_url,
        "jsonData": json_data,
    }
    if settings.redis_password is not None:
        body["secureJsonData"] = {"password": settings.redis_password.get_secret_value()}
    return body


def load_dashboards(directory: Path = DASHBOARDS_DIR) -> list[dict]:
    boards = []
    for path in sorted(directory.glob("*.json")):
        board = json.loads(path.read_text(encoding="utf-8"))
        if not board.get("uid") or not board.get("title"):
            raise GrafanaPublishError(
                f"{path} has no uid or title: not a dashboard built by dashboards.build"
            )
        boards.append(board)
    if not boards:
        raise GrafanaPublishError(f"no dashboards in {directory}: run replmon dashboards build")
    return boards


@dataclass
class PublishReport:
    folder_created: bool = False
    datasource_created: bool = False
    dashboards: list[str] = field(default_factory=list)  # urls Grafana returned


class GrafanaPublisher:
    def __init__(self, api: GrafanaApi, settings: GrafanaSettings) -> None:
        self._api = api
        self._settings = settings

    def publish(self, dashboards: list[dict]) -> PublishReport:
        report = PublishReport()
        report.folder_created = self.ensure_folder()
        report.datasource_created = self.upsert_datasource()
        for board in dashboards:
            report.dashboards.append(self.upload_dashboard(board))
        return report

    def ensure_folder(self) -> bool:
        """True if created. A folder is found by uid, so renaming it in Grafana is kept."""
        s = self._settings
        if self._call(
            f"GET folder {s.folder_uid}", self._api.folder.get_folder, s.folder_uid, absent_ok=True
        ):
            return False
        try:
            self._call(
                f"create folder {s.folder_uid}",
                self._api.folder.create_folder,
                s.folder_title,
                uid=s.folder_uid,
                conflict_ok=False,
            )
        except _Conflict:
            if self._call(
                f"GET folder {s.folder_uid}", self._api.folder.get_folder, s.folder_uid, absent_ok=True
            ):
                return False  # created meanwhile by someone else
            raise GrafanaPublishError(
                f"Grafana refused to create folder {s.folder_title!r} (409): a folder with that title "
                f"exists under another uid; set REPLMON_GRAFANA__FOLDER_UID to its uid"
            ) from None
        log.info("created Grafana folder %s", s.folder_uid)
        return True

    def upsert_datasource(self) -> bool:
        """True if created, False if updated in place."""
        s = self._settings
        body = datasource_body(s)
        found = self._call(
            f"GET data source {s.datasource_uid}",
            self._api.datasource.get_datasource_by_uid,
            s.datasource_uid,
            absent_ok=True,
        )
        if found:
            self._call(
                f"update data source {s.datasource_uid}",
                self._api.datasource.update_datasource_by_uid,
                s.datasource_uid,
                body,
            )
            return False
        try:
            self._call(
                f"create data source {s.datasource_uid}",
                self._api.datasource.create_datasource,
                body,
                conflict_ok=False,
            )
        except _Conflict:
            raise GrafanaPublishError(
                f"Grafana refused to create data source {s.datasource_name!r} (409): that name is taken "
                f"by a data source with another uid; rename it or set REPLMON_GRAFANA__DATASOURCE_NAME"
            ) from None
        log.info("created Grafana data source %s -> %s", s.datasource_uid, s.redis_url)
        return True

    def upload_dashboard(self, board: dict[str, Any]) -> str:
        payload = {
            "dashboard": {**board, "id": None},
            "folderUid": self._settings.folder_uid,
            "overwrite": True,
            "message": "published by replmon (replmon dashboards publish)",
        }
        answer = self._call(f"save dashboard {board['uid']}", self._api.dashboard.update_dashboard, payload)
        log.info("saved dashboard %s (version %s)", board["uid"], answer.get("version"))
        return answer.get("url", "")

    def _call(
        self, what: str, fn: Callable, *args, absent_ok: bool = False, conflict_ok: bool = True, **kwargs
    ) -> Any:
        url = self._settings.url
        try:
            return fn(*args, **kwargs)
        except GrafanaUnauthorizedError as exc:
            raise GrafanaAuthError(
                f"Grafana at {url} answered 401 Unauthorized to '{what}': the token or "
                f"username/password is wrong, expired or revoked"
            ) from exc
        except GrafanaClientError as exc:
            if exc.status_code == 403:
                raise GrafanaAuthError(
                    f"Grafana at {url} answered 403 Forbidden to '{what}': the credentials are valid but "
                    f"lack the permission (managing data sources needs the Admin role)"
                ) from exc
            if exc.status_code == 404 and absent_ok:
                return None
            if exc.status_code == 404:
                raise GrafanaPublishError(
                    f"Grafana at {url} answered 404 Not Found to '{what}': is {url} Grafana's root URL, "
                    f"with its sub-path if it has one?"
                ) from exc
            if exc.status_code == 409 and not conflict_ok:
                raise _Conflict from exc
            raise GrafanaPublishError(f"Grafana at {url} refused '{what}': {exc}") from exc
        except (GrafanaException, niquests.exceptions.RequestException) as exc:
            raise GrafanaPublishError(f"cannot complete '{what}' at {url}: {exc}") from exc


class _Conflict(Exception):
    """A 409 the caller resolves."""


def publish(directory: Path, settings: GrafanaSettings) -> list[str]:
    """`replmon dashboards publish`: the dashboards in `directory` to the Grafana of `settings`.
    Returns their URLs."""
    report = GrafanaPublisher(connect(settings), settings).publish(load_dashboards(directory))
    return [f"{settings.url.rstrip('/')}{url}" for url in report.dashboards]
