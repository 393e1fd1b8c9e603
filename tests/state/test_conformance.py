"""The published conformance scenarios (RULES.md §10) all pass, and the runner can fail."""

import copy
import io
import json
from pathlib import Path

import pytest

import replmon.state.legacy
import replmon.state.partition
import replmon.state.replica
from replmon.state.conformance import Failure, format_failure, run_scenario, validate_scenario
from replmon.streaming.conformance_cmd import run

SHARED = Path(__file__).parents[2] / ".." / "shared" / "conformance"
SCENARIO_FILE = SHARED / "kafka_rules.jsonl"

pytestmark = pytest.mark.skipif(not SHARED.is_dir(), reason=f"shared conformance folder {SHARED} is absent")


def _scenarios() -> list[dict]:
    if not SCENARIO_FILE.is_file():
        return []
    return [json.loads(line) for line in SCENARIO_FILE.read_text().splitlines() if line.strip()]


def _scenario(name: str) -> dict:
    return copy.deepcopy(next(s for s in _scenarios() if s["name"] == name))


@pytest.mark.parametrize("scenario", [pytest.param(s, id=s["name"]) for s in _scenarios()])
def test_published_scenario_passes(scenario):
    assert [format_failure(f) for f in run_scenario(scenario)] == []


def test_command_runs_the_whole_file():
    out = io.StringIO()
    assert run([str(SCENARIO_FILE)], out=out) == 0
    assert out.getvalue().splitlines() == [f"{len(_scenarios())} passed, 0 failed"]


# ---- the runner reports what disagrees ---------------------------------------------------------------------


# (scenario, after_event, key, a wrong expected value, the key the failure names)
@pytest.mark.parametrize(
    "name, after_event, key, wrong, failed_key",
    [
        pytest.param("hw_is_min_leo_over_isr", 1, "hw", 31, "hw", id="hw"),
        pytest.param("stuck_follower_removed_strictly_after_lag", 6, "isr", [1, 2, 3], "isr", id="isr"),
        pytest.param(
            "stuck_follower_removed_strictly_after_lag",
            6,
            "out_of_sync",
            [],
            "out_of_sync",
            id="out_of_sync on a tick (ISR before the tick)",
        ),
        pytest.param(
            "stuck_follower_removed_strictly_after_lag",
            6,
            "shrink_proposed",
            [2, 3],
            "shrink_proposed",
            id="shrink_proposed",
        ),
        pytest.param(
            "pending_shrink_keeps_maximal_isr_until_commit", 2, "pending", None, "pending", id="pending"
        ),
        pytest.param(
            "pending_shrink_keeps_maximal_isr_until_commit",
            2,
            "maximal_isr",
            [1, 2],
            "maximal_isr",
            id="maximal_isr",
        ),
        pytest.param(
            "lcu_current_fetch_and_previous_fetch_rule",
            2,
            "replica_state",
            {"2": {"last_caught_up_ms": 1001000}},
            "replica_state.2.last_caught_up_ms",
            id="replica_state",
        ),
        pytest.param(
            "not_at_log_end_time_rule_and_caught_up_non_isr_holds_hw",
            5,
            "caught_up",
            {"2": True},
            "caught_up.2",
            id="caught_up",
        ),
        pytest.param(
            "fetch_offset_beyond_leader_leo_rejected",
            2,
            "fetch_accepted",
            True,
            "fetch_accepted",
            id="fetch_accepted",
        ),
        pytest.param(
            "fetch_response_carries_pre_update_hw", 0, "response_hw", 100, "response_hw", id="response_hw"
        ),
        pytest.param("single_replica_partition", 0, "at_min_isr", False, "at_min_isr", id="at_min_isr"),
        pytest.param(
            "new_leader_resets_follower_leo_to_unknown",
            2,
            "leader_epoch_start_offset",
            50,
            "leader_epoch_start_offset",
            id="leader_epoch_start_offset",
        ),
        pytest.param(
            "follower_hw_is_min_of_leader_hw_and_own_leo",
            3,
            "follower_view",
            {"2": {"hw": 100}},
            "follower_view.2.hw",
            id="follower_view",
        ),
        pytest.param(
            "idle_partition_follower_at_leo_never_removed",
            1,
            "legacy",
            {"v0_8": []},
            "legacy.v0_8",
            id="legacy",
        ),
    ],
)
def test_broken_expectation_is_reported(name, after_event, key, wrong, failed_key):
    scenario = _scenario(name)
    block = next(e for e in scenario["expect"] if e["after_event"] == after_event)
    block[key] = wrong
    failures = run_scenario(scenario)
    assert [(f.event_index, f.key) for f in failures] == [(after_event, failed_key)]


def test_initial_hw_that_makeleader_would_move_is_reported():
    scenario = _scenario("hw_is_min_leo_over_isr")
    scenario["initial"]["followers"] = {"2": {"leo": 100}, "3": {"leo": 100}}
    assert Failure("hw_is_min_leo_over_isr", -1, "initial.hw", 0, 100) in run_scenario(scenario)


def test_command_prints_failures_and_exits_1(tmp_path):
    scenario = _scenario("hw_is_min_leo_over_isr")
    scenario["expect"][1]["hw"] = 31
    path = tmp_path / "broken.jsonl"
    path.write_text(json.dumps(scenario) + "\n" + json.dumps(_scenario("single_replica_partition")) + "\n")
    out = io.StringIO()
    assert run([str(path)], out=out) == 1
    assert out.getvalue().splitlines() == [
        "hw_is_min_leo_over_isr #1 hw: expected 31, got 30",
        "1 passed, 1 failed",
    ]


@pytest.mark.parametrize(
    "broken",
    [
        pytest.param(
            lambda s, leo, now, lag: s.leo == leo or now - s.last_caught_up_ms < lag,
            id="< instead of <= at the lag boundary",
        ),
        pytest.param(
            lambda s, leo, now, lag: now - s.last_caught_up_ms <= lag, id="no LEO-equality exemption"
        ),
    ],
)
def test_rule_mistakes_fail_the_published_scenarios(monkeypatch, broken):
    # RULES §10.5: each of these mistakes makes specific scenarios fail.
    for module in (replmon.state.partition, replmon.state.legacy):
        monkeypatch.setattr(module, "is_caught_up", broken)
    assert any(run_scenario(s) for s in _scenarios())


def test_missing_previous_fetch_credit_fails_the_published_scenarios(monkeypatch):
    real = replmon.state.replica.update_fetch_state

    def without_credit(st, **kw):
        lcu = st.last_caught_up_ms
        real(st, **kw)
        if kw["fetch_offset"] < kw["leader_leo"]:
            st.last_caught_up_ms = lcu

    monkeypatch.setattr(replmon.state.partition, "update_fetch_state", without_credit)
    assert any(run_scenario(s) for s in _scenarios())


# ---- malformed input ---------------------------------------------------------------------------------------


def test_malformed_json_line_exits_2_naming_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(_scenario("single_replica_partition")) + "\n{not json\n")
    out = io.StringIO()
    assert run([str(path)], out=out) == 2
    assert out.getvalue().startswith(f"{path}:2: not valid JSON")


def test_malformed_scenario_exits_2_naming_file_and_line(tmp_path):
    scenario = _scenario("single_replica_partition")
    scenario["events"][0]["type"] = "produce"
    path = tmp_path / "bad.jsonl"
    path.write_text("\n" + json.dumps(scenario) + "\n")
    out = io.StringIO()
    assert run([str(SCENARIO_FILE), str(path)], out=out) == 2
    assert out.getvalue() == (
        f"{path}:2: malformed scenario: single_replica_partition: event 0: "
        f"unknown type 'produce' (known: append, fetch, tick, alter_partition_response, "
        f"controller_update, broker_state, follower_fetch_response)\n"
    )


def test_unreadable_file_exits_2(tmp_path):
    out = io.StringIO()
    assert run([str(tmp_path / "missing.jsonl")], out=out) == 2
    assert "missing.jsonl: cannot read" in out.getvalue()


def _broken(edit):
    scenario = _scenario("lcu_current_fetch_and_previous_fetch_rule")
    edit(scenario)
    return scenario


@pytest.mark.parametrize(
    "scenario, message",
    [
        pytest.param([], "must be a JSON object", id="not an object"),
        pytest.param(_broken(lambda s: s.pop("name")), "missing or empty 'name'", id="no name"),
        pytest.param(_broken(lambda s: s.pop("events")), "missing field 'events'", id="no events"),
        pytest.param(
            _broken(lambda s: s["config"].pop("alter_partition")),
            "missing field 'alter_partition'",
            id="config without alter_partition",
        ),
        pytest.param(
            _broken(lambda s: s["config"].update(alter_partition="later")),
            "alter_partition must be one of",
            id="unknown AlterPartition mode",
        ),
        pytest.param(
            _broken(lambda s: s["initial"].update(leader=9)),
            "leader 9 is not among the replicas",
            id="leader outside the replicas",
        ),
        pytest.param(
            _broken(lambda s: s["initial"].update(isr=[1, 5])), "not a subset", id="ISR outside the replicas"
        ),
        pytest.param(
            _broken(lambda s: s["initial"].update(hw=11)), "hw 11 must be in", id="HW above the LEO"
        ),
        pytest.param(
            _broken(lambda s: s["events"][0].pop("replica")),
            "event 0 (fetch): missing field 'replica'",
            id="fetch without replica",
        ),
        pytest.param(
            _broken(lambda s: s["events"][0].update(fetch_offset="3")),
            "fetch_offset must be an integer",
            id="offset as a string",
        ),
        pytest.param(
            _broken(lambda s: s["events"][0].update(fetch_offset=True)),
            "fetch_offset must be an integer",
            id="a boolean is not an integer",
        ),
        pytest.param(
            _broken(lambda s: s["expect"][0].update(after_event=99)),
            "after_event must be an event index",
            id="after_event out of range",
        ),
        pytest.param(
            _broken(lambda s: s["expect"][0].update(shrink_proposed=[])),
            "'shrink_proposed' is only checked after a tick",
            id="shrink_proposed after a fetch",
        ),
    ],
)
def test_validate_scenario_refuses(scenario, message):
    with pytest.raises(ValueError) as e:
        validate_scenario(scenario)
    assert message in str(e.value)


def test_informational_fields_are_accepted():
    # Scenarios in this format carry prose (source, description, note); a field the runner does
    # not know in config, initial or an event is information, not a malformed file.
    scenario = _broken(
        lambda s: (s.update(reviewed_by="someone"), s["events"][1].update(comment="leader log grows"))
    )
    validate_scenario(scenario)
    assert run_scenario(scenario) == []


@pytest.mark.parametrize(
    "edit, key",
    [
        pytest.param(lambda s: s["expect"][0].update(hww=3), "hww", id="typo in an expectation key"),
        pytest.param(
            lambda s: s["expect"][0].update(replica_state={"2": {"lcu": 1}}),
            "replica_state.2.lcu",
            id="unknown replica_state field",
        ),
        pytest.param(
            lambda s: s["expect"][4].update(legacy={"v0_7": []}), "legacy.v0_7", id="unknown legacy rule set"
        ),
    ],
)
def test_unknown_expectation_is_a_failing_check_not_a_silent_pass(edit, key):
    failures = run_scenario(_broken(edit))
    assert [f.key for f in failures] == [key]


def test_published_scenarios_are_well_formed():
    for s in _scenarios():
        validate_scenario(s)


def test_engine_error_is_a_reported_failure_not_a_crash(monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("engine bug")

    monkeypatch.setattr(replmon.state.partition.PartitionLeader, "append", boom)
    failures = run_scenario(_scenario("single_replica_partition"))
    assert failures == [Failure("single_replica_partition", 0, "error", None, "RuntimeError: engine bug")]
