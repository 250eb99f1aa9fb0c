"""The straggler rule (``find_straggler``): a device is named only when its gap to each
minute's cluster median stays past the threshold over its own last reporting minutes."""

import pytest

from metrics.storage.straggler import find_straggler

MINUTES = 5


def cluster(slow: dict, healthy=7, minutes=range(10)):
    """{key: {minute: value}}: ``healthy`` devices at 90 every minute, and ``slow``'s
    ({key: {minute: value}}) own series."""
    series = {(vm, 0): dict.fromkeys(minutes, 90.0) for vm in range(1, healthy + 1)}
    series.update(slow)
    return series


def test_a_gap_exactly_at_the_threshold_is_not_a_straggler_just_past_it_is():
    at = cluster({(9, 4): dict.fromkeys(range(10), 80.0)})
    assert find_straggler(at, threshold=10.0, minutes=MINUTES) is None
    past = cluster({(9, 4): dict.fromkeys(range(10), 79.9)})
    found = find_straggler(past, threshold=10.0, minutes=MINUTES)
    assert found.key == (9, 4) and found.gap == pytest.approx(-10.1)
    assert found.minutes == MINUTES


def test_a_dip_of_two_minutes_in_five_is_not_sustained_three_are():
    """A checkpoint (one or two minutes) is not a straggler; more than half the window is."""
    dip = {m: 20.0 if m in (7, 8) else 90.0 for m in range(10)}
    assert find_straggler(cluster({(9, 0): dip}), 10.0, MINUTES) is None
    longer = {m: 20.0 if m in (6, 7, 8) else 90.0 for m in range(10)}
    assert find_straggler(cluster({(9, 0): longer}), 10.0, MINUTES).key == (9, 0)


def test_only_the_last_minutes_count_an_old_slowdown_is_over():
    recovered = {m: 40.0 if m < 5 else 90.0 for m in range(10)}
    assert find_straggler(cluster({(9, 0): recovered}), 10.0, MINUTES) is None


def test_a_late_joiner_is_judged_on_its_own_reporting_minutes_only():
    """Four minutes reported: not judged yet, however slow; a fifth makes a sustained gap.
    Minutes it sent nothing neither count against it nor break its window."""
    four = {m: 50.0 for m in (6, 7, 8, 9)}
    assert find_straggler(cluster({(9, 0): four}), 10.0, MINUTES) is None
    five = {m: 50.0 for m in (5, 6, 7, 8, 9)}
    assert find_straggler(cluster({(9, 0): five}), 10.0, MINUTES).gap == pytest.approx(-40.0)
    with_gaps = {m: 50.0 for m in (1, 3, 5, 7, 9)}
    assert find_straggler(cluster({(9, 0): with_gaps}), 10.0, MINUTES).key == (9, 0)


def test_each_minute_is_held_against_that_minutes_median():
    """The whole cluster slowing together (a checkpoint everywhere) names nobody."""
    series = {(vm, 0): {m: 30.0 if m % 2 else 90.0 for m in range(10)} for vm in range(8)}
    assert find_straggler(series, 10.0, MINUTES) is None


def test_of_several_the_furthest_below_is_named_and_ports_are_judged_in_percent():
    series = cluster(
        {(8, 2): dict.fromkeys(range(10), 70.0), (9, 6): dict.fromkeys(range(10), 60.0)}
    )
    assert find_straggler(series, 10.0, MINUTES).key == (9, 6)
    ports = {(vm, 1): dict.fromkeys(range(10), 40e9) for vm in range(1, 6)}
    ports[(6, 3)] = dict.fromkeys(range(10), 31e9)  # 22.5 % below the median
    found = find_straggler(ports, 20.0, MINUTES, relative=True)
    assert found.key == (6, 3) and found.gap == pytest.approx(-22.5)
    assert find_straggler(ports, 25.0, MINUTES, relative=True) is None


def test_a_window_of_no_minutes_is_refused():
    with pytest.raises(ValueError, match="minutes"):
        find_straggler(cluster({}), 10.0, 0)
