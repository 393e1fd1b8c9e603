"""The conformance scenarios (docs/kafka-rules.md §10) all pass, and the runner can fail.

The project's own scenarios (tests/state/data/conformance/) always run; the shared ones
(../shared/conformance/) run in addition when that folder is beside the repository, and the
session summary says whether they did (tests/state/conftest.py).
"""

import copy
import io
import json

import pytest

import replmon.state.legacy
import replmon.state.partition
import replmon.state.replica
from replmon.state.conformance import Failure, format_failure, run_scenario, validate_scenario
from replmon.state.partition import PartitionLeader
from replmon.streaming.conformance_cmd import run

from .conformance_files import SHARED_ABSENT, load, own_files, shared_files

T = 1_000_000  # initial.t_ms of every scenario
OWN_FILE = own_files()[0]


def _scenarios() -> list[dict]:
    return load(own_files())


def _scenario(name: str) -> dict:
    found = [s for s in _scenarios() if s["name"] == name]
    assert len(found) == 1, f"{name}: {len(found)} scenarios of that name in {own_files()}"
    return copy.deepcopy(found[0])


def _shared_params() -> list:
    scenarios = load(shared_files())
    if not scenarios:
        return [pytest.param(None, id="absent", marks=pytest.mark.skip(reason=SHARED_ABSENT))]
    return [pytest.param(s, id=s["name"]) for s in scenarios]


@pytest.mark.parametrize("scenario", [pytest.param(s, id=s["name"]) for s in _scenarios()])
def test_own_scenario_passes(scenario):
    assert [format_failure(f) for f in run_scenario(scenario)] == []


@pytest.mark.parametrize("scenario", _shared_params())
def test_shared_scenario_passes(scenario):
    assert [format_failure(f) for f in run_scenario(scenario)] == []


def test_own_scenarios_have_unique_names_apart_from_the_shared_ones():
    names = [s["name"] for s in _scenarios()]
    assert len(names) == len(set(names)) >= 10
    assert not set(names) & {s["name"] for s in load(shared_files())}


def test_command_runs_the_whole_file():
    out = io.StringIO()
    assert run([str(OWN_FILE)], out=out) == 0
    assert out.getvalue().splitlines() == [f"{len(load([OWN_FILE]))} passed, 0 failed"]


# ---- the runner reports what disagrees ---------------------------------------------------------------------

CREDIT = "credit_from_previous_fetch_keeps_follower_at_exact_lag_limit"
IDLE = "empty_idle_log_keeps_silent_followers_until_the_first_write"
NON_ISR_HOLDS = "caught_up_follower_outside_isr_holds_hw_until_its_credit_lapses"
SHUTTING_DOWN = "shutting_down_follower_out_of_isr_does_not_hold_hw"
MIN_ISR = "hw_frozen_under_min_isr_through_pending_changes"
EPOCHS = "leader_epoch_bumps_reset_followers_same_epoch_does_not"
FAILED_FETCHES = "failed_fetches_do_not_count"
SLOW = "follower_slower_than_producer_removed_then_rejoins"
FOLLOWER_HW = "follower_hw_follows_responses_down_as_well_as_up"
SINGLE = "single_replica_min_isr_is_capped_by_replica_count"


# (scenario, after_event, key, a wrong expected value, the key the failure names)
@pytest.mark.parametrize(
    "name, after_event, key, wrong, failed_key",
    [
        pytest.param(CREDIT, 5, "hw", 54, "hw", id="hw"),
        pytest.param(CREDIT, 5, "isr", [1, 2, 3], "isr", id="isr"),
        pytest.param(
            CREDIT, 5, "out_of_sync", [], "out_of_sync", id="out_of_sync on a tick (ISR before the tick)"
        ),
        pytest.param(CREDIT, 5, "shrink_proposed", [3], "shrink_proposed", id="shrink_proposed"),
        pytest.param(MIN_ISR, 2, "pending", None, "pending", id="pending"),
        pytest.param(MIN_ISR, 2, "maximal_isr", [3], "maximal_isr", id="maximal_isr"),
        pytest.param(
            CREDIT,
            3,
            "replica_state",
            {"2": {"last_caught_up_ms": T}},
            "replica_state.2.last_caught_up_ms",
            id="replica_state",
        ),
        pytest.param(NON_ISR_HOLDS, 5, "caught_up", {"3": True}, "caught_up.3", id="caught_up"),
        pytest.param(FAILED_FETCHES, 0, "fetch_accepted", True, "fetch_accepted", id="fetch_accepted"),
        pytest.param(CREDIT, 1, "response_hw", 30, "response_hw", id="response_hw"),
        pytest.param(SINGLE, 0, "at_min_isr", False, "at_min_isr", id="at_min_isr"),
        pytest.param(
            EPOCHS,
            4,
            "leader_epoch_start_offset",
            300,
            "leader_epoch_start_offset",
            id="leader_epoch_start_offset",
        ),
        pytest.param(
            FOLLOWER_HW, 2, "follower_view", {"2": {"hw": 70}}, "follower_view.2.hw", id="follower_view"
        ),
        pytest.param(IDLE, 2, "legacy", {"v0_8": []}, "legacy.v0_8", id="legacy"),
    ],
)
def test_broken_expectation_is_reported(name, after_event, key, wrong, failed_key):
    scenario = _scenario(name)
    block = next(e for e in scenario["expect"] if e["after_event"] == after_event)
    block[key] = wrong
    failures = run_scenario(scenario)
    assert [(f.event_index, f.key) for f in failures] == [(after_event, failed_key)]


def test_initial_hw_that_makeleader_would_move_is_reported():
    scenario = _scenario(CREDIT)  # checkpointed HW 25, leader LEO 40
    scenario["initial"]["followers"] = {"2": {"leo": 40}, "3": {"leo": 40}}
    assert Failure(CREDIT, -1, "initial.hw", 25, 40) in run_scenario(scenario)


def test_command_prints_failures_and_exits_1(tmp_path):
    scenario = _scenario(CREDIT)
    next(e for e in scenario["expect"] if e["after_event"] == 5)["hw"] = 54
    path = tmp_path / "broken.jsonl"
    path.write_text(json.dumps(scenario) + "\n" + json.dumps(_scenario(SINGLE)) + "\n")
    out = io.StringIO()
    assert run([str(path)], out=out) == 1
    assert out.getvalue().splitlines() == [f"{CREDIT} #5 hw: expected 54, got 55", "1 passed, 1 failed"]


# ---- each rule mistake of docs/kafka-rules.md §10.5 fails named scenarios ------------------------------


def _failing(scenarios: list[dict]) -> set[str]:
    return {s["name"] for s in scenarios if run_scenario(s)}


@pytest.mark.parametrize(
    "broken, fails",
    [
        pytest.param(
            lambda s, leo, now, lag: s.leo == leo or now - s.last_caught_up_ms < lag,
            {CREDIT, SLOW},
            id="< instead of <= at the lag boundary",
        ),
        pytest.param(
            lambda s, leo, now, lag: now - s.last_caught_up_ms <= lag, {IDLE}, id="no LEO-equality exemption"
        ),
    ],
)
def test_caught_up_mistakes_fail_the_scenarios(monkeypatch, broken, fails):
    for module in (replmon.state.partition, replmon.state.legacy):
        monkeypatch.setattr(module, "is_caught_up", broken)
    assert _failing(_scenarios()) >= fails


def test_missing_previous_fetch_credit_fails_the_scenarios(monkeypatch):
    real = replmon.state.replica.update_fetch_state

    def without_credit(st, **kw):
        lcu = st.last_caught_up_ms
        real(st, **kw)
        if kw["fetch_offset"] < kw["leader_leo"]:
            st.last_caught_up_ms = lcu

    monkeypatch.setattr(replmon.state.partition, "update_fetch_state", without_credit)
    assert _failing(_scenarios()) >= {CREDIT}


def _hw_rule(*, min_isr_gate: bool = True, caught_up_non_isr: bool = True, eligibility: bool = True):
    """Partition.maybeIncrementLeaderHW (§5.1) restated for this test, with parts that can be left out."""

    def maybe_increment_hw(self: PartitionLeader, now_ms: int) -> bool:
        if min_isr_gate and len(self.isr) < self.effective_min_isr:
            return False
        candidate = self.leader_leo
        for r, state in self.followers.items():
            counts = r in self.maximal_isr or (
                caught_up_non_isr
                and self.is_caught_up(r, now_ms)
                and (not eligibility or self.is_isr_eligible(r))
            )
            if counts and state.leo < candidate:
                candidate = state.leo
        if candidate > self.hw:
            self.hw = candidate
            return True
        return False

    return maybe_increment_hw


def test_the_restated_hw_rule_passes_so_its_broken_variants_can_be_trusted(monkeypatch):
    monkeypatch.setattr(PartitionLeader, "_maybe_increment_hw", _hw_rule())
    assert _failing(_scenarios()) == set()


@pytest.mark.parametrize(
    "mistake, fails",
    [
        pytest.param({"min_isr_gate": False}, {MIN_ISR}, id="no under-min-ISR gate"),
        pytest.param({"caught_up_non_isr": False}, {NON_ISR_HOLDS}, id="HW over the maximal ISR only"),
        pytest.param(
            {"eligibility": False}, {SHUTTING_DOWN}, id="ineligible caught-up followers hold the HW"
        ),
    ],
)
def test_hw_mistakes_fail_the_scenarios(monkeypatch, mistake, fails):
    monkeypatch.setattr(PartitionLeader, "_maybe_increment_hw", _hw_rule(**mistake))
    assert _failing(_scenarios()) >= fails


# ---- malformed input ---------------------------------------------------------------------------------------


def test_malformed_json_line_exits_2_naming_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(_scenario(SINGLE)) + "\n{not json\n")
    out = io.StringIO()
    assert run([str(path)], out=out) == 2
    assert out.getvalue().startswith(f"{path}:2: not valid JSON")


def test_malformed_scenario_exits_2_naming_file_and_line(tmp_path):
    scenario = _scenario(SINGLE)
    scenario["events"][0]["type"] = "produce"
    path = tmp_path / "bad.jsonl"
    path.write_text("\n" + json.dumps(scenario) + "\n")
    out = io.StringIO()
    assert run([str(OWN_FILE), str(path)], out=out) == 2
    assert out.getvalue() == (
        f"{path}:2: malformed scenario: {SINGLE}: event 0: "
        f"unknown type 'produce' (known: append, fetch, tick, alter_partition_response, "
        f"controller_update, broker_state, follower_fetch_response)\n"
    )


def test_unreadable_file_exits_2(tmp_path):
    out = io.StringIO()
    assert run([str(tmp_path / "missing.jsonl")], out=out) == 2
    assert "missing.jsonl: cannot read" in out.getvalue()


def _broken(edit):
    scenario = _scenario(CREDIT)
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
            _broken(lambda s: s["initial"].update(hw=41)), "hw 41 must be in", id="HW above the LEO"
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


def test_own_and_shared_scenarios_are_well_formed():
    for s in _scenarios() + load(shared_files()):
        validate_scenario(s)


def test_engine_error_is_a_reported_failure_not_a_crash(monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("engine bug")

    monkeypatch.setattr(replmon.state.partition.PartitionLeader, "append", boom)
    failures = run_scenario(_scenario(SINGLE))
    assert failures == [Failure(SINGLE, 0, "error", None, "RuntimeError: engine bug")]
