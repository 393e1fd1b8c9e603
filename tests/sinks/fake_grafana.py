"""A contract fake of the Grafana HTTP API endpoints the publisher uses.

Grafana cannot run here, so this server checks requests against the documented contract
(docs/sources/developers/http_api/{folder,data_source,dashboard,annotations}.md in
grafana/grafana) and answers with the documented bodies and status codes; it records every call
for the tests. `unavailable` makes it answer 503 to everything (a Grafana whose database is
down); `outage()` closes its port and opens it again after (a Grafana that is not running).
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

ANNOTATION_CREATE_KEYS = {"dashboardUID", "dashboardId", "panelId", "time", "timeEnd", "tags", "text"}
ANNOTATION_PATCH_KEYS = {"time", "timeEnd", "tags", "text"}


class ContractViolation(AssertionError):
    pass


class FakeGrafana:
    def __init__(
        self,
        token: str | None = "glsa_test",
        basic: tuple[str, str] | None = None,
        read_only: bool = False,
        max_body_bytes: int | None = None,
    ) -> None:
        self.token, self.basic, self.read_only = token, basic, read_only
        self.max_body_bytes = max_body_bytes  # a reverse proxy's limit (nginx client_max_body_size): 413
        self.calls: list[tuple[str, str, dict | None]] = []
        self.violations: list[str] = []
        self.folders: dict[str, dict] = {}
        self.datasources: dict[str, dict] = {}
        self.dashboards: dict[str, dict] = {}  # uid -> {"dashboard", "folderUid", "version"}
        self.annotations: dict[int, dict] = {}  # id -> the stored annotation
        self.unavailable = False  # answer 503 to every request
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._port = self._server.server_address[1]
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    def __enter__(self) -> FakeGrafana:
        self._start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop()

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def _stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    @contextlib.contextmanager
    def outage(self):
        """Grafana is not running: its port refuses connections until the block ends."""
        self._stop()
        try:
            yield
        finally:
            self._server = ThreadingHTTPServer(("127.0.0.1", self._port), _handler(self))
            self._start()

    def routes(self) -> list[str]:
        return [f"{method} {path}" for method, path, _ in self.calls]

    # --- authentication -------------------------------------------------------------------
    def authorized(self, header: str | None) -> bool:
        if header is None:
            return False
        if self.token is not None and header == f"Bearer {self.token}":
            return True
        if self.basic is not None and header.startswith("Basic "):
            return base64.b64decode(header[6:]).decode() == ":".join(self.basic)
        return False

    # --- endpoints: (status, body) --------------------------------------------------------
    def get_folder(self, uid: str):
        if uid in self.folders:
            return 200, self.folders[uid]
        return 404, {"message": "folder not found", "status": "not-found"}

    def create_folder(self, body: dict):
        self.expect(set(body) <= {"uid", "title", "parentUid"}, f"folder body keys {sorted(body)}")
        self.expect(isinstance(body.get("title"), str) and body["title"], "folder title is required")
        uid = body.get("uid") or f"f{len(self.folders) + 1}"
        self.expect(len(uid) <= 40, "folder uid longer than 40")
        if uid in self.folders or any(f["title"] == body["title"] for f in self.folders.values()):
            return 409, {"message": "a folder with the same name already exists"}
        folder = {
            "id": len(self.folders) + 1,
            "uid": uid,
            "title": body["title"],
            "url": f"/dashboards/f/{uid}/{body['title'].lower()}",
            "version": 1,
        }
        self.folders[uid] = folder
        return 200, folder

    def get_datasource(self, uid: str):
        if uid in self.datasources:
            return 200, self.datasources[uid]
        return 404, {"message": "Data source not found"}

    def _check_datasource(self, body: dict) -> None:
        for key in ("name", "type", "access", "url"):
            self.expect(isinstance(body.get(key), str) and body[key], f"data source needs {key}")
        self.expect(body.get("access") in ("proxy", "direct"), "access is proxy or direct")
        self.expect(isinstance(body.get("jsonData", {}), dict), "jsonData is an object")
        self.expect(isinstance(body.get("secureJsonData", {}), dict), "secureJsonData is an object")

    def create_datasource(self, body: dict):
        self._check_datasource(body)
        if any(d["name"] == body["name"] for d in self.datasources.values()):
            return 409, {"message": "data source with the same name already exists"}
        uid = body.get("uid") or f"ds{len(self.datasources) + 1}"
        stored = self._store_datasource(uid, body, version=1)
        return 200, {
            "datasource": stored,
            "id": stored["id"],
            "message": "Datasource added",
            "name": stored["name"],
        }

    def update_datasource(self, uid: str, body: dict):
        if uid not in self.datasources:
            return 404, {"message": "Data source not found"}
        self._check_datasource(body)
        stored = self._store_datasource(uid, body, version=self.datasources[uid]["version"] + 1)
        return 200, {
            "datasource": stored,
            "id": stored["id"],
            "message": "Datasource updated",
            "name": stored["name"],
        }

    def _store_datasource(self, uid: str, body: dict, version: int) -> dict:
        secure = body.get("secureJsonData") or {}
        previous = self.datasources.get(uid, {})
        stored = {k: v for k, v in body.items() if k != "secureJsonData"}
        stored.update(
            id=previous.get("id", len(self.datasources) + 1),
            uid=uid,
            orgId=1,
            version=version,
            readOnly=False,
            secureJsonFields={**previous.get("secureJsonFields", {}), **dict.fromkeys(secure, True)},
        )
        self.datasources[uid] = stored
        return stored

    def save_dashboard(self, body: dict):
        self.expect(
            set(body) <= {"dashboard", "folderId", "folderUid", "overwrite", "message"},
            f"dashboards/db body keys {sorted(body)}",
        )
        board = body.get("dashboard")
        self.expect(isinstance(board, dict) and board.get("title"), "dashboard with a title is required")
        uid = board.get("uid")
        self.expect(uid is None or (isinstance(uid, str) and len(uid) <= 40), "uid at most 40 chars")
        folder_uid = body.get("folderUid")
        if folder_uid is not None and folder_uid not in self.folders:
            return 400, {"message": "folder not found", "status": "not-found"}
        existing = self.dashboards.get(uid)
        if existing and not body.get("overwrite") and board.get("version") != existing["version"]:
            return 412, {
                "message": "The dashboard has been changed by someone else",
                "status": "version-mismatch",
            }
        version = existing["version"] + 1 if existing else 1
        self.dashboards[uid] = {"dashboard": board, "folderUid": folder_uid, "version": version}
        slug = re.sub(r"[^a-z0-9]+", "-", board["title"].lower()).strip("-")
        return 200, {
            "id": len(self.dashboards),
            "uid": uid,
            "url": f"/d/{uid}/{slug}",
            "status": "success",
            "version": version,
            "slug": slug,
        }

    # --- annotations ------------------------------------------------------------------------
    def create_annotation(self, body: dict):
        self.expect(
            isinstance(body, dict) and set(body) <= ANNOTATION_CREATE_KEYS,
            f"annotation body keys {sorted(body)}",
        )
        if not body.get("text"):  # pkg/api/annotations.go: "text field should not be empty"
            return 400, {"message": "Failed to save annotation"}
        self.expect(isinstance(body.get("time"), int) and body["time"] > 0, "time is epoch ms")
        self.expect(isinstance(body.get("timeEnd", body["time"]), int), "timeEnd is epoch ms")
        self.expect(body.get("timeEnd", body["time"]) >= body["time"], "timeEnd before time")
        tags = body.get("tags") or []
        self.expect(
            isinstance(tags, list) and all(isinstance(t, str) and t for t in tags), "tags are strings"
        )
        uid = body.get("dashboardUID")
        if uid is not None and uid not in self.dashboards:
            uid = None  # PostAnnotation ignores a uid it cannot resolve: an organization annotation
        with self._lock:
            annotation_id = len(self.annotations) + 1
            self.annotations[annotation_id] = {
                "id": annotation_id,
                "alertId": 0,
                "dashboardUID": uid or "",
                "panelId": body.get("panelId") or 0,
                "time": body["time"],
                "timeEnd": body.get("timeEnd", body["time"]),
                "tags": tags,
                "text": body["text"],
                "type": "annotation",
            }
        return 200, {"message": "Annotation added", "id": annotation_id}

    def patch_annotation(self, annotation_id: int, body: dict):
        self.expect(
            isinstance(body, dict) and set(body) <= ANNOTATION_PATCH_KEYS,
            f"annotation patch keys {sorted(body)}",
        )
        stored = self.annotations.get(annotation_id)
        if stored is None:
            return 404, {"message": "Could not find annotation to update"}
        updated = {**stored, **{k: v for k, v in body.items() if v is not None}}
        self.expect(updated["timeEnd"] >= updated["time"], "timeEnd before time")
        self.annotations[annotation_id] = updated
        return 200, {"message": "Annotation patched"}

    def find_annotations(self, query: dict[str, list[str]]):
        self.expect(
            set(query)
            <= {
                "from",
                "to",
                "limit",
                "alertId",
                "dashboardId",
                "dashboardUID",
                "panelId",
                "userId",
                "type",
                "tags",
                "matchAny",
            },
            f"annotation query parameters {sorted(query)}",
        )
        tags = query.get("tags", [])
        match_any = query.get("matchAny", ["false"])[0] == "true"
        limit = int(query.get("limit", ["100"])[0])
        found = [
            a
            for a in self.annotations.values()
            if not tags or (any if match_any else all)(t in a["tags"] for t in tags)
        ]
        if "from" in query:
            found = [a for a in found if a["timeEnd"] >= int(query["from"][0])]
        if "to" in query:
            found = [a for a in found if a["time"] <= int(query["to"][0])]
        found.sort(key=lambda a: a["time"], reverse=True)  # newest first, as Grafana does
        return 200, found[:limit]

    def annotation_calls(self) -> list[str]:
        return [f"{m} {p.split('?')[0]}" for m, p, _ in self.calls if p.startswith("/api/annotations")]

    def expect(self, condition, message: str) -> None:
        if not condition:
            self.violations.append(message)
            raise ContractViolation(message)


def _handler(grafana: FakeGrafana):
    routes = [
        ("GET", re.compile(r"^/api/folders/([^/]+)$"), lambda m, b: grafana.get_folder(m[1])),
        ("POST", re.compile(r"^/api/folders$"), lambda m, b: grafana.create_folder(b)),
        ("GET", re.compile(r"^/api/datasources/uid/([^/]+)$"), lambda m, b: grafana.get_datasource(m[1])),
        ("POST", re.compile(r"^/api/datasources$"), lambda m, b: grafana.create_datasource(b)),
        (
            "PUT",
            re.compile(r"^/api/datasources/uid/([^/]+)$"),
            lambda m, b: grafana.update_datasource(m[1], b),
        ),
        ("POST", re.compile(r"^/api/dashboards/db$"), lambda m, b: grafana.save_dashboard(b)),
        ("POST", re.compile(r"^/api/annotations$"), lambda m, b: grafana.create_annotation(b)),
        (
            "PATCH",
            re.compile(r"^/api/annotations/(\d+)$"),
            lambda m, b: grafana.patch_annotation(int(m[1]), b),
        ),
        ("GET", re.compile(r"^/api/annotations$"), lambda m, b: grafana.find_annotations(m.query)),
    ]

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # quiet
            pass

        def _serve(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = None
            if grafana.max_body_bytes is not None and length > grafana.max_body_bytes:
                grafana.calls.append((method, self.path, None))
                return self._answer(413, {"message": "Request Entity Too Large"})
            try:
                if method in ("POST", "PUT", "PATCH"):
                    grafana.expect(
                        self.headers.get("Content-Type", "").startswith("application/json"),
                        f"{method} {self.path} without a JSON content type",
                    )
                    body = json.loads(raw)
                grafana.calls.append((method, self.path, body))
                if grafana.unavailable:
                    return self._answer(503, {"message": "Service unavailable"})
                if not grafana.authorized(self.headers.get("Authorization")):
                    return self._answer(401, {"message": "Unauthorized"})
                if grafana.read_only and method != "GET":
                    return self._answer(
                        403, {"message": "You'll need additional permissions to perform this action."}
                    )
                path, query = urlsplit(self.path).path, parse_qs(urlsplit(self.path).query)
                for verb, pattern, action in routes:
                    if verb == method and (match := pattern.match(path)):
                        return self._answer(*action(_Match(match, query), body))
                return self._answer(404, {"message": "Not found"})
            except (ContractViolation, ValueError) as exc:
                return self._answer(400, {"message": f"bad request: {exc}"})

        def _answer(self, status: int, body) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=UTF-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self._serve("GET")

        def do_POST(self):
            self._serve("POST")

        def do_PUT(self):
            self._serve("PUT")

        def do_PATCH(self):
            self._serve("PATCH")

    return Handler


class _Match:
    """A route's regex match plus the request's query parameters."""

    def __init__(self, match: re.Match, query: dict[str, list[str]]) -> None:
        self._match, self.query = match, query

    def __getitem__(self, group: int) -> str:
        return self._match[group]
