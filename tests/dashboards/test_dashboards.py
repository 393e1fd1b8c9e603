"""The dashboards as built: valid, deterministic, and reading only keys the sink writes."""

from __future__ import annotations

import inspect
import json
import re

import pytest

from replmon.dashboards import build, panels
from replmon.sinks.grafana_annotations import tags_of
from replmon.sinks.keys import DATASOURCE_UID, Keys, part, partition_member
from replmon.sinks.redis_sink import RedisSink
from replmon.streaming.cli import main as replmon
from tests.sinks import records as r

BOARDS = build.build_all()
# Variable values as Grafana splices them into keys: index-set members, already escaped.
VARIABLES = {
    "cluster": part("c1"),
    "topic": part("orders"),
    "partition": part(0),
    "replica": part(3),
    "broker": part(3),
    "hosted": partition_member("orders", 0),
}


def substitute(template: str) -> str:
    for variable in sorted(VARIABLES, key=len, reverse=True):
        template = template.replace(f"${variable}", VARIABLES[variable])
    return template


def all_panels():
    return [(name, panel) for name, board in BOARDS.items() for panel in board["panels"]]


def queried_keys() -> list[tuple[str, str]]:
    """(where, key template) for every key a panel target or a variable reads."""
    found = []
    for name, panel in all_panels():
        for target in panel["targets"]:
            key = target["keyName"] if target["type"] == "command" else target["query"].split()[1]
            found.append((f"{name} / {panel['title']}", key))
    for name, board in BOARDS.items():
        for variable in board["templating"]["list"]:
            found.append((f"{name} / ${variable['name']}", variable["query"].split()[1]))
    return found


def key_templates(keys: Keys) -> set[str]:
    """Every key sinks.keys can name, with Grafana variables in place of the parts."""
    templates = set()
    for name, method in inspect.getmembers(keys, inspect.ismethod):
        if name.startswith("_"):
            continue
        params = list(inspect.signature(method).parameters)
        templates.add(method(*(f"${p}" for p in params)))
    return templates


def test_building_twice_gives_identical_json(tmp_path):
    first = build.write(tmp_path / "a")
    second = build.write(tmp_path / "b")
    assert [p.read_bytes() for p in first] == [p.read_bytes() for p in second]


def test_committed_json_is_what_the_build_writes():
    for name, board in BOARDS.items():
        committed = (build.OUT_DIR / name).read_text(encoding="utf-8")
        assert committed == build.render(board), f"{name} is stale: run replmon dashboards build"


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_dashboard_shape(name):
    board = json.loads(build.render(BOARDS[name]))
    assert board["uid"] == name.removesuffix(".json") and len(board["uid"]) <= 40
    assert board["schemaVersion"] == build.SCHEMA_VERSION and board["title"]
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    cells = set()
    for panel in board["panels"]:
        assert panel["type"] in {"timeseries", "table", "stat"}
        grid = panel["gridPos"]
        assert grid["w"] > 0 and grid["h"] > 0 and grid["x"] + grid["w"] <= 24
        area = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not cells & area, f"panel {panel['title']!r} overlaps another"
        cells |= area


def test_every_query_uses_the_redis_datasource():
    for _, panel in all_panels():
        assert panel["datasource"] == panels.DATASOURCE
        for target in panel["targets"]:
            assert target["datasource"] == {"type": "redis-datasource", "uid": DATASOURCE_UID}
            assert target["refId"] and target["type"] in {"command", "cli"}
            if target["type"] == "command":
                assert target["command"] in {
                    "xrange",
                    "xrevrange",
                    "hgetall",
                    "hlen",
                    "scard",
                    "smembers",
                    "get",
                }
    for board in BOARDS.values():
        for variable in board["templating"]["list"]:
            assert variable["datasource"] == panels.DATASOURCE
            assert variable["query"].startswith("smembers ")


def test_variables_used_by_a_board_are_defined_on_it():
    for name, board in BOARDS.items():
        defined = {v["name"] for v in board["templating"]["list"]}
        used = set(
            re.findall(
                r"\$(\w+)",
                json.dumps(board["panels"])
                + json.dumps(board["templating"])
                + json.dumps(board["annotations"]),
            )
        )
        assert used - {"time", "streamId"} <= defined, name


def test_every_queried_key_is_a_key_of_the_layout():
    templates = key_templates(Keys())
    for where, key in queried_keys():
        assert key in templates, f"{where} reads {key}, which sinks/keys.py does not name"


def test_every_queried_key_is_written_by_the_sink(redis_client):
    sink = RedisSink(redis_client)
    batch = r.full_batch()
    sink.write_batch(
        1,
        batch["alerts"],
        batch["partition_status"],
        batch["replica_status"],
        batch["quarantine"],
        verdicts=[r.verdict()],
    )
    for where, template in queried_keys():
        key = substitute(template)
        assert redis_client.exists(key), f"{where} reads {key}, which the sink did not write"


def test_series_panels_read_fields_the_sink_writes(redis_client):
    sink = RedisSink(redis_client)
    batch = r.full_batch()
    sink.write_batch(
        1, batch["alerts"], batch["partition_status"], batch["replica_status"], batch["quarantine"]
    )
    for _where, panel in all_panels():
        for transformation in panel.get("transformations", []):
            if transformation["id"] != "filterFieldsByName":
                continue
            key = substitute(panel["targets"][0]["keyName"])
            [(_, fields)] = redis_client.xrange(key)
            wanted = set(transformation["options"]["include"]["names"]) - {"$time"}
            assert wanted <= {f.decode() for f in fields}, f"{panel['title']} wants {wanted}"


def test_build_cli_writes_every_board(tmp_path, capsys):
    assert replmon(["dashboards", "build", "--output", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "replmon-broker.json",
        "replmon-overview.json",
        "replmon-replica.json",
    ]
    assert replmon(["dashboards", "build", "--print", "--redis-prefix", "staging"]) == 0
    assert '"smembers staging:clusters"' in capsys.readouterr().out


# --- Grafana's own dashboard model (grafana-foundation-sdk) --------------------------------
@pytest.fixture(scope="module")
def schema_problems():
    pytest.importorskip("grafana_foundation_sdk", reason="in the test extra: run bash deploy/dev.sh setup")
    from tests.dashboards.grafana_schema import schema_problems

    return schema_problems


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_dashboard_passes_grafanas_schema(name, schema_problems):
    assert schema_problems(json.loads(build.render(BOARDS[name]))) == []


def _spoiled(change) -> dict:
    board = json.loads(build.render(BOARDS["replmon-replica.json"]))
    change(board)
    return board


@pytest.mark.parametrize(
    "change, expected, why",
    [
        (
            lambda b: b["panels"][0].update(type="timeseriez"),
            "'timeseriez' is not a Grafana panel type",
            "a misspelt panel type would render as 'Panel plugin not found'",
        ),
        (
            lambda b: b["panels"][0].update(gridPosition=b["panels"][0]["gridPos"]),
            "panels[0].gridPosition",
            "a wrong field name on a panel",
        ),
        (
            lambda b: b["panels"][0]["options"]["legend"].update(position="bottom"),
            "options.legend.position",
            "an option the time series panel does not have (it is 'placement')",
        ),
        (
            lambda b: b["panels"][0]["fieldConfig"]["defaults"]["custom"].update(lineInterpolate="linear"),
            "custom.lineInterpolate",
            "a misspelt field config of the time series panel",
        ),
        (
            lambda b: b["templating"]["list"][0].update(defintion="x"),
            "templating.list[0].defintion",
            "a misspelt variable field",
        ),
        (
            lambda b: b["annotations"]["list"][0].update(iconColour="red"),
            "annotations.list[0].iconColour",
            "a misspelt annotation query field",
        ),
        (lambda b: b.update(schemaVer=39), "dashboard.schemaVer", "a misspelt top-level field"),
    ],
)
def test_the_schema_check_fails_on_what_grafana_would_not_know(change, expected, why, schema_problems):
    problems = schema_problems(_spoiled(change))
    assert any(expected in p for p in problems), (why, problems)


# --- annotations and links --------------------------------------------------------------------
def test_annotation_queries_match_the_tags_the_annotation_consumer_writes():
    alert = {
        k: "" if v is None else str(v)
        for k, v in r.alert(cluster="c1", topic="orders", partition=0, replica=3).items()
    }
    written = set(tags_of(alert))
    broker_alert = {
        **alert,
        "name": "BrokerUnavailable",
        "topic": "",
        "partition": "",
        "replica": "",
        "broker": "3",
    }
    for name, board in BOARDS.items():
        queries = board["annotations"]["list"]
        assert queries, f"{name} shows no annotations"
        for query in queries:
            assert query["datasource"] == panels.GRAFANA and query["target"]["type"] == "tags"
            wanted = {substitute(t) for t in query["target"]["tags"]}
            assert wanted <= written or wanted <= set(tags_of(broker_alert)), (name, query["name"], wanted)


def test_alert_rows_link_to_the_partition_view_with_its_variables():
    replica_board = BOARDS["replmon-replica.json"]
    defined = {v["name"] for v in replica_board["templating"]["list"]}
    linked = 0
    for name, panel in all_panels():
        for override in panel.get("fieldConfig", {}).get("overrides", []):
            for prop in override["properties"]:
                if prop["id"] != "links":
                    continue
                for link in prop["value"]:
                    assert link["url"].startswith(f"/d/{replica_board['uid']}?")
                    assert set(re.findall(r"var-(\w+)=", link["url"])) == defined
                    fields = set(re.findall(r"__data\.fields\.(\w+)", link["url"]))
                    assert fields <= set(r.alert()), f"{name}: the link reads a field alerts lack"
                    linked += 1
    assert linked >= 3  # overview firing alerts, broker alerts, stalled fetchers


def test_overview_counts_and_alert_table_are_live():
    overview = BOARDS["replmon-overview.json"]
    live = [
        p["title"]
        for p in overview["panels"]
        if p["type"] in ("stat", "table") and all(t.get("streaming") for t in p["targets"])
    ]
    assert {"Firing alerts", "Under-replicated partitions", "Under min ISR", "Out-of-sync followers"} <= set(
        live
    )
    for panel in overview["panels"]:
        for target in panel["targets"]:
            if target.get("streaming"):
                assert target["streamingInterval"] <= 5_000 and target["streamingDataType"] in (
                    "DataFrame",
                    "TimeSeries",
                )
