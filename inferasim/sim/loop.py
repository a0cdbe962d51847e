"""The event loop: one for every topology (internal, compiled).

In the shape of SimPy's ``Environment.step``: find the next instant ``T``
(the next arrival, or the fleet's next event, whichever comes first), let
the fleet handle what happens at ``T`` before arrivals (steps ending,
handoffs, deliveries, finishes that issue closed-loop turns), then place
the requests arriving at ``T``; repeat until nothing is left, then bring
every replica to the end. An aggregated fleet is the topology with no
handoff; a closed loop is an arrival source that issues a turn when the
previous one is answered (:mod:`inferasim.sim.arrivals`); what is an event
is the fleet's to say (:mod:`inferasim.sim.fleet`).

A livelock guard looks for progress every ``STALL_CHECK`` instants and
raises an internal error after ``STALL_LIMIT`` checks in a row without any:
a bug, never a valid run. Progress is a request arriving (placed by the
loop; a closed loop's issued turn follows a finish) or, when none arrived
since the last check, a first token, delivery or finish reached
(:func:`milestones`, a scan of the request log, so it is read only then).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from inferasim.sim.arrivals import Arrivals
from inferasim.sim.fleet import Fleet
from inferasim.sim.replica import Replica
from inferasim.sim.sequence import RequestLog

__all__: list[str] = []

#: Livelock guard: instants between checks, and checks without progress allowed.
STALL_CHECK = 4096
STALL_LIMIT = 32


def run_loop(fleet: Fleet, arrivals: Arrivals, n: int, bar: Any, out: RequestLog) -> None:
    """Run ``fleet`` on ``arrivals`` (``n`` requests; ``bar`` a progress bar or None)."""
    inf = math.inf
    count = 0
    ticks = stalls = 0
    seen = mark = -1
    while True:
        T = arrivals.next_time()
        e = fleet.next_event()
        if e < T:
            T = e
        if T == inf:
            break
        ticks += 1
        if ticks >= STALL_CHECK:  # the livelock guard
            ticks = 0
            if count != seen:  # an arrival is progress (and needs no scan of the log)
                seen = count
                stalls = 0
                mark = -1
            else:
                now = milestones(out)
                stalls = stalls + 1 if now == mark else 0
                mark = now
            if stalls >= STALL_LIMIT:
                raise RuntimeError(
                    f"internal error: {STALL_CHECK * STALL_LIMIT} instants without progress "
                    f"(no arrival, first token, delivery or finish), simulated time {T!r} ms: "
                    "a livelock"
                )
        fleet.advance_to(T)
        while arrivals.next_time() <= T:
            i, a = arrivals.pop()
            count += 1
            if bar is not None and not count & 1023:
                bar.update(1024)
            fleet.place(i, a)
        fleet.after_arrivals()
    fleet.finish()


def milestones(out: RequestLog) -> int:
    """First tokens, deliveries and finishes reached so far (the livelock guard's measure).

    Examples
    --------
    >>> o = RequestLog(2)
    >>> o.first_token[0] = o.finish[0] = 1.0
    >>> milestones(o)
    2
    """
    return sum(
        int(np.isfinite(np.frombuffer(a, dtype=np.float64)).sum())
        for a in (out.first_token, out.delivered, out.finish)
    )


def check_outputs(
    out: RequestLog, arrival: np.ndarray, reasons: dict[int, str], reps: list[Replica]
) -> None:
    """The run's invariants, checked once at its end (vectorised, cheap).

    Every request not rejected finished, with finite times ordered
    ``arrival <= scheduled <= first_token <= finish``; no replica held more
    KV blocks than its capacity. A violation is a bug (or a cost model whose
    finite step times overflow): an error naming the first bad request,
    never a frame with bad rows.

    Examples
    --------
    >>> o = RequestLog(1)
    >>> o.scheduled[0], o.first_token[0], o.finish[0] = 1.0, 2.0, 3.0
    >>> check_outputs(o, np.array([0.0]), {}, [])
    >>> o.finish[0] = float("nan")
    >>> check_outputs(o, np.array([0.0]), {}, [])
    Traceback (most recent call last):
    ...
    RuntimeError: internal error: request 0 has times arrival=0.0, scheduled=1.0, first_token=2.0, finish=nan ...
    """
    sched = np.frombuffer(out.scheduled, dtype=np.float64)
    first = np.frombuffer(out.first_token, dtype=np.float64)
    fin = np.frombuffer(out.finish, dtype=np.float64)
    ok = (arrival <= sched) & (sched <= first) & (first <= fin) & (fin < math.inf)
    if reasons:
        ok[list(reasons)] = True
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        raise RuntimeError(
            f"internal error: request {i} has times arrival={float(arrival[i])!r}, "
            f"scheduled={float(sched[i])!r}, first_token={float(first[i])!r}, "
            f"finish={float(fin[i])!r} (not finite and ordered); "
            "no result frames were built (a cost model whose step times sum beyond float64 "
            "range gives this too)"
        )
    for rep in reps:
        if rep.kv.peak > rep.kv.capacity:
            raise RuntimeError(
                f"internal error: replica {rep.index} held {rep.kv.peak} KV blocks, "
                f"capacity {rep.kv.capacity}"
            )
