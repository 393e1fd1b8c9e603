"""The Grafana annotation calls the annotation consumer makes, with Grafana's errors sorted.

    GET   /api/annotations?tags=replmon&tags=alert_id:<id>&type=annotation&limit=..   find
    POST  /api/annotations                                                               create
    PATCH /api/annotations/:id                                                           close

(docs/sources/developers/http_api/annotations.md in grafana/grafana). Errors come out as one
of three kinds, because the consumer does something different for each: GrafanaUnavailable
(unreachable, timed out, 5xx, 429: try again later, the entry stays pending),
GrafanaAuthError (401/403: stop, a person must fix the token), AnnotationRefused (any other
4xx: this entry can never be written as it is; it is quarantined with Grafana's answer).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import niquests
from grafana_client import GrafanaApi
from grafana_client.client import GrafanaClientError, GrafanaException, GrafanaUnauthorizedError

from replmon.sinks.grafana import GrafanaAuthError, GrafanaPublishError
from replmon.sinks.grafana_annotations import TAG, Annotation, alert_id_tag

log = logging.getLogger(__name__)


class GrafanaUnavailable(GrafanaPublishError):
    """Grafana could not be reached or failed on its side; the same call may work later."""


class AnnotationRefused(GrafanaPublishError):
    """Grafana refused this annotation (a 4xx other than 401/403/429): retrying cannot help."""


class AnnotationApi:
    def __init__(self, api: GrafanaApi, url: str) -> None:
        self._client = api.client
        self._url = url

    def find(self, alert_id: str) -> Annotation | None:
        """The annotation of one episode, by its alert id tag; the oldest if there are several."""
        query = urlencode(
            [("tags", TAG), ("tags", alert_id_tag(alert_id)), ("type", "annotation"), ("limit", "100")]
        )
        found = self._call(f"find annotation of alert {alert_id}", self._client.GET, f"/annotations?{query}")
        if not isinstance(found, list):
            raise GrafanaUnavailable(
                f"Grafana at {self._url} answered the annotation search with "
                f"{type(found).__name__}, not a list"
            )
        if not found:
            return None
        if len(found) > 1:
            log.warning(
                "alert %s has %d annotations in Grafana; keeping the oldest (id %s)",
                alert_id,
                len(found),
                min(a["id"] for a in found),
            )
        oldest = min(found, key=lambda a: a["id"])
        return Annotation(
            int(oldest["id"]),
            int(oldest["time"]),
            int(oldest.get("timeEnd") or oldest["time"]),
            oldest.get("text", ""),
        )

    def create(self, body: dict[str, Any]) -> int:
        answer = self._call("create annotation", self._client.POST, "/annotations", json=body)
        try:
            return int(answer["id"])
        except (KeyError, TypeError, ValueError):
            raise GrafanaUnavailable(
                f"Grafana at {self._url} created an annotation but answered without its id: {answer!r:.200}"
            ) from None

    def patch(self, annotation_id: int, body: dict[str, Any]) -> None:
        self._call(
            f"patch annotation {annotation_id}",
            self._client.PATCH,
            f"/annotations/{annotation_id}",
            json=body,
        )

    def _call(self, what: str, fn: Callable, *args, **kwargs) -> Any:
        url = self._url
        try:
            return fn(*args, **kwargs)
        except GrafanaUnauthorizedError as exc:
            raise GrafanaAuthError(
                f"Grafana at {url} answered 401 Unauthorized to '{what}': the token "
                f"or username/password is wrong, expired or revoked"
            ) from exc
        except GrafanaClientError as exc:
            if exc.status_code == 403:
                raise GrafanaAuthError(
                    f"Grafana at {url} answered 403 Forbidden to '{what}': the "
                    f"credentials lack the annotations:write permission "
                    f"(the Editor role has it)"
                ) from exc
            if exc.status_code == 429:
                raise GrafanaUnavailable(f"Grafana at {url} is rate limiting '{what}' (429)") from exc
            raise AnnotationRefused(
                f"Grafana at {url} refused '{what}' ({exc.status_code}): {exc.message}"
            ) from exc
        except GrafanaException as exc:  # 5xx, timeouts, connection failures (status 0)
            if 400 <= (exc.status_code or 0) < 500:  # GrafanaBadInputError: 400
                raise AnnotationRefused(f"Grafana at {url} refused '{what}' (400): {exc.message}") from exc
            raise GrafanaUnavailable(f"cannot complete '{what}' at {url}: {exc.message}") from exc
        except niquests.exceptions.RequestException as exc:
            raise GrafanaUnavailable(f"cannot complete '{what}' at {url}: {exc}") from exc
        except ValueError as exc:  # a 2xx that is not JSON: a proxy's page, not Grafana's answer
            raise GrafanaUnavailable(f"'{what}' at {url} answered something that is not JSON: {exc}") from exc
