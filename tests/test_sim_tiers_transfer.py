"""The processor-sharing link (inferasim.sim.transfer.Link).

Hand-computed cases, then a cross-check against an independent direct
simulation of processor sharing (remaining bytes per job, recomputed at
every event) on random transfer sets.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferasim.sim.transfer import Link


def test_one_transfer_alone():
    # 100 MB at 50 GB/s = 5e7 bytes per ms -> 2 ms, plus 20 us latency.
    link = Link(50.0, latency_us=20.0)
    tid = link.start(10.0, 100e6)
    assert link.next_done() == pytest.approx(12.02)
    assert link.pop_done(12.0) == []
    assert link.pop_done(12.02) == [tid]
    assert link.in_flight() == 0


def test_two_concurrent_transfers_each_take_twice_as_long():
    # Two equal 1 ms transfers started together share the link: both end at 2 ms.
    link = Link(1.0)
    a = link.start(0.0, 1e6)
    b = link.start(0.0, 1e6)
    assert link.next_done() == pytest.approx(2.0)
    assert link.pop_done(2.0) == [a, b]


def test_late_joiner_shares_the_rest():
    # a: 2 ms of work from t=0. b: 1 ms of work from t=1. At t=1 a has 1 ms left;
    # both share until both have 0: a and b each need 1 ms at half rate -> both end at 3.
    link = Link(1.0)
    a = link.start(0.0, 2e6)
    b = link.start(1.0, 1e6)
    assert link.next_done() == pytest.approx(3.0)
    assert sorted(link.pop_done(3.0)) == [a, b]


def test_different_rates_share_link_time():
    # A write at 10 GB/s of 20 MB needs 2 ms of link time; a read at 20 GB/s of
    # 20 MB needs 1 ms. Together: the read gets half the link until it ends at
    # 2 ms; the write has 1 ms left at 2 ms and ends at 3 ms.
    link = Link(20.0)
    w = link.start(0.0, 20e6, gb_per_s=10.0)
    r = link.start(0.0, 20e6)
    assert link.pop_done(2.0) == [r]
    assert link.next_done() == pytest.approx(3.0)
    assert link.pop_done(3.0) == [w]


def test_backlog_and_estimate():
    link = Link(1.0, latency_us=100.0)
    link.start(0.0, 1e6)
    link.start(0.0, 3e6)
    assert link.backlog_ms(0.0) == pytest.approx(4.0)
    assert link.backlog_ms(1.0) == pytest.approx(3.0)
    # at t=1 the jobs have 0.5 and 2.5 ms left; a new 1 ms job would end after
    # 1 + 0.5 + 1 = 2.5 ms (+ 0.1 latency)
    assert link.estimate_ms(1.0, 1e6) == pytest.approx(2.6)


def test_cancel_frees_the_link():
    link = Link(1.0)
    a = link.start(0.0, 1e6)
    b = link.start(0.0, 1e6)
    link.cancel(1.0, a)  # each had 0.5 ms served; b alone needs 0.5 ms more
    assert link.next_done() == pytest.approx(1.5)
    assert link.pop_done(10.0) == [b]


def test_bad_parameters_and_time_going_back():
    with pytest.raises(ValueError, match="gb_per_s"):
        Link(0.0)
    with pytest.raises(ValueError, match="latency_us"):
        Link(1.0, latency_us=-1.0)
    link = Link(1.0)
    link.start(5.0, 1.0)
    with pytest.raises(ValueError, match="cannot go back"):
        link.start(4.0, 1.0)


def reference_ps(jobs: list[tuple[float, float]], latency: float) -> list[float]:
    """Delivery times of (start, work) jobs under processor sharing, by direct
    simulation: between consecutive events every active job loses dt / n work."""
    n = len(jobs)
    rem = [w for _, w in jobs]
    done = [None] * n
    t = 0.0
    order = sorted(range(n), key=lambda i: jobs[i][0])
    arrived: list[int] = []
    k = 0
    while any(d is None for d in done):
        active = [i for i in arrived if done[i] is None]
        next_arrival = jobs[order[k]][0] if k < n else float("inf")
        if not active:
            t = next_arrival
            arrived.append(order[k])
            k += 1
            continue
        m = len(active)
        first_end = t + min(rem[i] for i in active) * m
        if next_arrival < first_end:
            for i in active:
                rem[i] -= (next_arrival - t) / m
            t = next_arrival
            arrived.append(order[k])
            k += 1
        else:
            dt = first_end - t
            for i in active:
                rem[i] -= dt / m
            t = first_end
            for i in active:
                if rem[i] <= 1e-9:
                    done[i] = t
    return [d + latency for d in done]


@settings(max_examples=60, deadline=None)
@given(
    jobs=st.lists(
        st.tuples(
            st.sampled_from([0.0, 0.5, 1.0, 2.5, 4.0]), st.sampled_from([0.25, 1.0, 1.5, 3.0])
        ),
        min_size=1,
        max_size=8,
    ),
    latency_us=st.sampled_from([0.0, 300.0]),
)
def test_matches_a_direct_simulation(jobs, latency_us):
    jobs = sorted(jobs)
    link = Link(1.0, latency_us=latency_us)  # 1e6 bytes = 1 ms of work
    delivered: dict[int, float] = {}
    ids = []
    for start, work in jobs:
        # deliveries before this start, observed at their own times
        while link.next_done() <= start:
            t = link.next_done()
            for tid in link.pop_done(t):
                delivered[tid] = t
        ids.append(link.start(start, work * 1e6))
    while link.in_flight():
        t = link.next_done()
        for tid in link.pop_done(t):
            delivered[tid] = t
    expected = reference_ps(jobs, latency_us / 1000.0)
    assert [delivered[i] for i in ids] == pytest.approx(expected, abs=1e-9)
