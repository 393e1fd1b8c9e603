"""The follower's own HW and ConsumerLag (docs/kafka-rules.md §5.2, §6.4)."""

import pytest

from replmon.state.follower import FollowerView, consumer_lag, follower_high_watermark, process_fetch_response


@pytest.mark.parametrize(
    "leader_hw, leo, log_start, hw",
    [
        pytest.param(80, 50, 0, 50, id="own LEO below the leader HW caps it"),
        pytest.param(90, 100, 0, 90, id="leader HW below the own LEO"),
        pytest.param(5, 100, 10, 10, id="floored at the log start"),
    ],
)
def test_follower_high_watermark(leader_hw, leo, log_start, hw):
    assert follower_high_watermark(leader_hw, leo, log_start) == hw


@pytest.mark.parametrize(
    "leader_hw, next_offset, lag",
    [
        pytest.param(80, 50, 30, id="behind the leader HW"),
        pytest.param(90, 100, 0, id="ahead of the HW (fetched above it): never negative"),
    ],
)
def test_consumer_lag(leader_hw, next_offset, lag):
    assert consumer_lag(leader_hw, next_offset) == lag


@pytest.mark.parametrize(
    "before, response, after",
    [
        pytest.param(
            (0, 0), (0, 50, 80), (50, 50, 30), id="records appended: LEO = end offset, HW capped by it"
        ),
        pytest.param(
            (100, 100),
            (100, 100, 95),
            (100, 95, 0),
            id="no records: LEO = fetch offset; a lower leader HW lowers it (not monotonic)",
        ),
    ],
)
def test_process_fetch_response(before, response, after):
    view = FollowerView(leo=before[0], hw=before[1])
    fetch_offset, records_end_offset, leader_hw = response
    process_fetch_response(
        view, fetch_offset=fetch_offset, records_end_offset=records_end_offset, leader_hw=leader_hw
    )
    assert (view.leo, view.hw, view.consumer_lag) == after


def test_consumer_lag_is_minus_one_until_the_first_response():
    assert FollowerView().consumer_lag == -1
