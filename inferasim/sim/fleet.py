"""The two topologies of a fleet, as the event loop drives them (internal, compiled).

A fleet answers four things for :func:`inferasim.sim.loop.run_loop`: when its
next event is (``next_event``), what happens at an instant before that
instant's arrivals (``advance_to``), how an arriving request is placed
(``place``: routing, admission, enqueueing), and the end of the run
(``finish``).

* :class:`AggregatedFleet`: replicas serving prefill and decode. Replicas
  are independent between arrivals, so nothing is an event: each replica is
  advanced only when someone reads its state (the routers' views, lazily)
  and at the end. Two things couple them in time and make their state
  changes events, processed in global time order (ties by replica index): a
  shared KV tier (what one writes at ``t`` another may read after ``t``:
  every replica's changes are events, except inside a decode stretch whose
  HBM evictions reach no shared tier, which is one event at its end:
  :attr:`Replica.next_sync`), and a closed loop (a finish issues
  the next turn: the changes of replicas holding a request with a waiting
  next turn are events).
* :class:`DisaggregatedFleet`: prefill instances and decode instances with
  :class:`~inferasim.sim.handoff.Handoffs` between them; the prefill
  instances' changes and the links' deliveries are events, the decode
  instances' too while a handoff waits for room or a closed loop waits for a
  finish (:attr:`Handoffs.busy`).

Time semantics at one instant ``T``: steps ending at ``T`` complete before
the requests arriving at ``T`` are routed; those join the first step that
starts at or after ``T``; state changes of one replica at ``T`` happen in
its own order, replicas by index.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from inferasim.sim.arrivals import Arrivals, Columns
from inferasim.sim.handoff import Handoffs
from inferasim.sim.replica import Replica
from inferasim.sim.sequence import RequestLog, Seq
from inferasim.sim.views import RoutingContext, View

__all__: list[str] = []


def replica_index(r: Any, rid: int, n: int, what: str = "") -> int:
    """The router's answer for request ``rid`` as a replica index in ``[0, n)``.

    Examples
    --------
    >>> replica_index(1, 0, 2)
    1
    >>> replica_index(2, 7, 2, " (a prefill instance)")
    Traceback (most recent call last):
    ...
    ValueError: routing returned 2 for request 7; expected an int in [0, 2) (a prefill instance)
    """
    try:
        r = operator.index(r)
        if not 0 <= r < n:
            raise IndexError
    except (TypeError, IndexError):
        raise ValueError(
            f"routing returned {r!r} for request {rid}; expected an int in [0, {n}){what}"
        ) from None
    return int(r)


def admitted(answer: Any, rid: int) -> bool:
    """The admission policy's answer for request ``rid``: True or False (a
    numpy bool too); anything else is an error, as a router's bad answer is.

    Examples
    --------
    >>> admitted(True, 0), admitted(np.bool_(False), 1)
    (True, False)
    >>> admitted(None, 7)
    Traceback (most recent call last):
    ...
    ValueError: admission returned None for request 7; expected True (admit) or False (reject)
    """
    if answer is True or answer is False:
        return answer
    if isinstance(answer, np.bool_):
        return bool(answer)
    raise ValueError(
        f"admission returned {answer!r} for request {rid}; expected True (admit) or False (reject)"
    )


def _request(cls: Any, i: int, a: float, p: int, o: int, ids: list[int]) -> Any:
    """The :class:`~inferasim.sim.router.Request` routers read (a named tuple,
    built without the Python-level ``__new__`` of its class)."""
    return tuple.__new__(cls, (i, a, p, o, tuple(ids)))


def _rejected(admission: Any) -> str:
    """The reason an admission policy gives for its last rejection."""
    return getattr(admission, "last_reason", "") or "rejected by admission"


class Fleet:
    """What the event loop asks a topology (see the module)."""

    def next_event(self) -> float:
        """The earliest state change that is an event (inf: none)."""
        raise NotImplementedError

    def advance_to(self, T: float) -> None:
        """What happens at ``T`` before the arrivals at ``T``."""
        raise NotImplementedError

    def place(self, i: int, a: float) -> None:
        """Route, admit and enqueue request ``i`` arriving at ``a``."""
        raise NotImplementedError

    def after_arrivals(self) -> None:
        """What happens at an instant after its arrivals."""

    def finish(self) -> None:
        """Bring every replica to the end of the run; check nothing is left over."""
        raise NotImplementedError


class AggregatedFleet(Fleet):
    """Replicas serving prefill and decode (see the module)."""

    def __init__(
        self,
        reps: list[Replica],
        col: Columns,
        out: RequestLog,
        ctx: RoutingContext,
        router: Any,
        admission: Any,
        request: Any,
        arrivals: Arrivals,
        coupled: bool,
        closed: bool,
    ) -> None:
        self.reps = reps
        self.col = col
        self.out = out
        self.ctx = ctx
        self.views = [View(rep, ctx) for rep in reps]
        self.router = router
        self.admission = admission
        self.request = request  # the Request class routers and admission read
        self.arrivals = arrivals
        self.coupled = coupled
        self.closed = closed
        # closed loop: routed requests with next turns, not finished yet, per replica
        self.pend = [0] * len(reps)
        self.watch: set[int] = set(arrivals.waited_for()) if closed else set()
        if closed:
            for rep in reps:
                rep.sched.watch = self.watch

    def next_event(self) -> float:
        """The earliest state change that is an event (inf: none)."""
        best = math.inf
        if self.coupled:
            pend = self.pend
            for j in range(len(pend)):
                # (a closed loop's turn waits for a finish: every change is an event)
                w = self.reps[j].next_wake if pend[j] else self.reps[j].next_sync
                if w < best:
                    best = w
        elif self.closed:
            pend = self.pend
            for j in range(len(pend)):
                if pend[j]:
                    w = self.reps[j].wake()
                    if w < best:
                        best = w
        return best

    def advance_to(self, T: float) -> None:
        """Bring the replicas whose changes are events up to ``T`` (index order)."""
        if self.coupled or self.closed:
            pend = self.pend
            for j in range(len(self.reps)):
                rep = self.reps[j]
                if pend[j]:
                    if rep.next_wake <= T:
                        rep.advance(T)
                elif self.coupled and rep.next_sync <= T:
                    rep.advance(T)
            if self.closed:
                self.drain()

    def drain(self) -> None:
        """Closed loop: issue the next turns of the requests finished since the last
        drain."""
        out = self.out
        for j in range(len(self.reps)):
            sched = self.reps[j].sched
            if sched.finished:
                for rid in sched.finished:
                    self.pend[j] -= 1
                    self.arrivals.answered(rid, out.finish[rid])
                sched.finished.clear()

    def place(self, i: int, a: float) -> None:
        """Route, admit and enqueue request ``i`` arriving at ``a``."""
        col = self.col
        if i in col.reasons:  # never fits: answered by the rejection
            self.arrivals.answered(i, a)
            return
        p = col.plen[i]
        ids, limit = col.ids(i)
        self.ctx.place(ids, limit, a, p)
        req = _request(self.request, i, a, p, col.olen[i], ids)
        r = replica_index(self.router(req, self.views), i, len(self.reps))
        rep = self.reps[r]
        rep.advance(a)
        admission = self.admission
        if admission is not None and not admitted(admission(req, (self.views[r],), a), i):
            col.reasons[i] = _rejected(admission)
            self.arrivals.answered(i, a)
            return
        if self.closed:
            for other in self.reps:
                if other.sched.finished:  # (advance_to leaves no waited-for finish by a)
                    raise RuntimeError(
                        f"internal error: request {other.sched.finished[0]} finished unseen "
                        f"before the arrival of request {i} at {a}"
                    )
            if i in self.watch:
                self.pend[r] += 1
        rep.arrive(Seq(i, p, col.olen[i], ids, col.bs), a)

    def finish(self) -> None:
        """Advance every replica to the end; check nothing is left over."""
        for rep in self.reps:
            rep.advance(math.inf)
        if self.closed:
            if self.arrivals.left() or any(self.pend) or any(r.sched.finished for r in self.reps):
                raise RuntimeError("internal error: closed-loop turns left at the end of the run")
            for rep in self.reps:
                rep.sched.watch = None


class DisaggregatedFleet(Fleet):
    """Prefill instances, decode instances and the handoffs between them (see the module)."""

    def __init__(
        self,
        pre: list[Replica],
        dec: list[Replica],
        hs: Handoffs,
        col: Columns,
        out: RequestLog,
        ctx: RoutingContext,
        router: Any,
        admission: Any,
        request: Any,
        arrivals: Arrivals,
        closed: bool,
    ) -> None:
        self.pre = pre
        self.dec = dec
        self.hs = hs
        self.col = col
        self.out = out
        self.ctx = ctx
        self.views = [View(rep, ctx, hs.links[p]) for p, rep in enumerate(pre)]
        self.dviews = [View(rep, ctx) for rep in dec]
        self.router = router
        self.admission = admission
        self.request = request
        self.arrivals = arrivals
        self.closed = closed
        if closed:
            watch = set(arrivals.waited_for())
            for rep in pre + dec:
                rep.sched.watch = watch
        # the prefill instances' wakes read by next_event (nothing changes between it
        # and the advance_to of the same instant, which reads them)
        self.pre_wake = [0.0] * len(pre)

    def next_event(self) -> float:
        """The earliest prefill change, delivery or (when they are events) decode change."""
        best = self.hs.next_delivery()
        pre_wake = self.pre_wake
        for p in range(len(self.pre)):
            w = pre_wake[p] = self.pre[p].wake()
            if w < best:
                best = w
        if self.hs.busy:
            for rep in self.dec:
                w = rep.wake()
                if w < best:
                    best = w
        return best

    def advance_to(self, T: float) -> None:
        """At ``T``: prefill steps ending by ``T`` (first tokens), their handoffs in
        time order, deliveries, handoffs waiting for room, then the new ones."""
        hs = self.hs
        pre_wake = self.pre_wake
        for p in range(len(self.pre)):
            if pre_wake[p] <= T:
                self.pre[p].advance(T)
        events = hs.collect(T)
        # (a prefill step that started before T, right after the previous event: its
        # layerwise transfers start then, before anything at T; a zero-time step can
        # also start and end there: its first token too)
        early = 0
        while early < len(events) and events[early][2] < T:
            early += 1
        for j in range(early):
            done, seq, te, p = events[j]
            hs.handle(done, seq, te, p)
        if hs.inflight or hs.eager:  # (closed loop, or decode instances on a shared
            # tier) decode finishes up to T, after the early
            # handoffs: a decode step starting at their time must see their
            # reservations, as it does when the decode instances advance lazily
            for rep in self.dec:
                if rep.wake() <= T:
                    rep.advance(T)
        hs.deliver_due(T)
        hs.retry_waiting(T)
        for j in range(early, len(events)):
            done, seq, te, p = events[j]
            hs.handle(done, seq, te, p)
        if self.closed:
            self.drain()

    def drain(self) -> None:
        """Closed loop: issue the next turns of the requests finished since the last
        drain (prefill instances first, then decode)."""
        out = self.out
        for reps in (self.pre, self.dec):
            for rep in reps:
                sched = rep.sched
                if sched.finished:
                    for rid in sched.finished:
                        self.hs.inflight -= 1
                        self.arrivals.answered(rid, out.finish[rid])
                    sched.finished.clear()

    def place(self, i: int, a: float) -> None:
        """Route request ``i`` arriving at ``a`` to a prefill instance, admit, enqueue."""
        col = self.col
        if i in col.reasons:  # never fits: answered by the rejection
            self.arrivals.answered(i, a)
            return
        p_len = col.plen[i]
        ids, limit = col.ids(i)
        self.ctx.place(ids, limit, a, p_len)
        req = _request(self.request, i, a, p_len, col.olen[i], ids)
        r = replica_index(self.router(req, self.views), i, len(self.pre), " (a prefill instance)")
        rep = self.pre[r]
        rep.advance(a)
        admission = self.admission
        if admission is not None:
            need = -(-(p_len + 1) // col.page)
            d = self.hs.decode_with_room(need, a)
            if d < 0:  # (no room anywhere: the view of the first, brought up to a)
                d = 0
                self.dec[0].advance(a)
            if not admitted(admission(req, (self.views[r], self.dviews[d]), a), i):
                col.reasons[i] = _rejected(admission)
                self.arrivals.answered(i, a)
                return
        if self.closed and i in self.arrivals.waited_for():
            self.hs.inflight += 1
        rep.arrive(Seq(i, p_len, col.olen[i], ids, col.bs), a)

    def after_arrivals(self) -> None:
        """After the arrivals at an instant: issue the next turns of what finished."""
        if self.closed:
            self.drain()

    def finish(self) -> None:
        """Advance every instance to the end; check nothing is left over."""
        for rep in self.pre:
            rep.advance(math.inf)
        for rep in self.dec:
            rep.advance(math.inf)
        if self.hs.pending():
            raise RuntimeError("internal error: handoffs left at the end of the run")
        if self.closed:
            reps = self.pre + self.dec
            if self.arrivals.left() or self.hs.inflight or any(r.sched.finished for r in reps):
                raise RuntimeError("internal error: closed-loop turns left at the end of the run")
            for rep in reps:
                rep.sched.watch = None
