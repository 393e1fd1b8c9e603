"""The dashboards as built: valid, deterministic, and reading only keys the sink writes."""

from __future__ import annotations

import inspect
import json
import re

import pytest

from replmon.dashboards import build, panels
from replmon.sinks.keys import Keys, part
from replmon.sinks.redis_sink import RedisSink
from tests.sinks import records as r

BOARDS = build.build_all()
VARIABLES = {"cluster": "c1", "topic": "orders", "partition": "0", "replica": "3"}


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
        assert committed == build.render(board), f"{name} is stale: run python -m replmon.dashboards.build"


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
        area = {(x, y) for x in range(grid["x"], grid["x"] + grid["w"])
                for y in range(grid["y"], grid["y"] + grid["h"])}
        assert not cells & area, f"panel {panel['title']!r} overlaps another"
        cells |= area


def test_every_query_uses_the_redis_datasource():
    for _, panel in all_panels():
        assert panel["datasource"] == panels.DATASOURCE
        for target in panel["targets"]:
            assert target["datasource"] == {"type": "redis-datasource", "uid": panels.DATASOURCE_UID}
            assert target["refId"] and target["type"] in {"command", "cli"}
            if target["type"] == "command":
                assert target["command"] in {"xrange", "xrevrange", "hgetall", "hlen", "scard",
                                             "smembers", "get"}
    for board in BOARDS.values():
        for variable in board["templating"]["list"]:
            assert variable["datasource"] == panels.DATASOURCE
            assert variable["query"] == variable["definition"]


def test_variables_used_by_a_board_are_defined_on_it():
    for name, board in BOARDS.items():
        defined = {v["name"] for v in board["templating"]["list"]}
        used = set(re.findall(r"\$(\w+)", json.dumps(board["panels"]) + json.dumps(board["templating"])))
        assert used - {"time", "streamId"} <= defined, name


def test_every_queried_key_is_a_key_of_the_layout():
    templates = key_templates(Keys())
    for where, key in queried_keys():
        assert key in templates, f"{where} reads {key}, which sinks/keys.py does not name"


def test_every_queried_key_is_written_by_the_sink(redis_client):
    sink = RedisSink(redis_client)
    batch = r.full_batch()
    sink.write_batch(1, batch["alerts"], batch["partition_status"], batch["replica_status"],
                     batch["quarantine"])
    for where, template in queried_keys():
        key = template
        for variable, value in VARIABLES.items():
            key = key.replace(f"${variable}", part(value))
        assert redis_client.exists(key), f"{where} reads {key}, which the sink did not write"


def test_series_panels_read_fields_the_sink_writes(redis_client):
    sink = RedisSink(redis_client)
    batch = r.full_batch()
    sink.write_batch(1, batch["alerts"], batch["partition_status"], batch["replica_status"],
                     batch["quarantine"])
    for where, panel in all_panels():
        for transformation in panel.get("transformations", []):
            if transformation["id"] != "filterFieldsByName":
                continue
            key = panel["targets"][0]["keyName"]
            for variable, value in VARIABLES.items():
                key = key.replace(f"${variable}", part(value))
            [(_, fields)] = redis_client.xrange(key)
            wanted = set(transformation["options"]["include"]["names"]) - {"$time"}
            assert wanted <= {f.decode() for f in fields}, f"{panel['title']} wants {wanted}"


def test_build_cli_writes_both_files(tmp_path, capsys):
    assert build.main(["--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["replmon-overview.json", "replmon-replica.json"]
    assert build.main(["--print", "--prefix", "staging"]) == 0
    assert '"smembers staging:clusters"' in capsys.readouterr().out
