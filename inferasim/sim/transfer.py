"""Data links with processor sharing: how long moving KV bytes takes.

A :class:`Link` is one pipe (a replica's PCIe path to host DRAM, its NIC to
a KV pool, the handoff path between a prefill and a decode replica). Every
transfer on it needs ``bytes / bandwidth`` of the link's exclusive time
(its *work*); transfers in flight at the same time share the link equally
(processor sharing: with ``n`` in flight each progresses at ``1 / n`` of
the bandwidth), and a transfer is delivered ``latency`` after its last byte
is served (the latency does not occupy the link). Two equal transfers
started together therefore both take twice as long as one alone.

The link is exact (no time step): it keeps the service every in-flight
transfer has received as one *virtual time* (work served per transfer since
the link was made), so a transfer of work ``w`` started at virtual time
``v`` ends when the virtual time reaches ``v + w``. It is advanced lazily
(times asked must never decrease), but its stored state, an anchor
``(time, virtual time)``, moves only at the link's own events: a start, a
cancel, a transfer's service end (at its own computed time). A question at
a time ``t`` processes the service ends up to ``t`` and computes the virtual
time at ``t`` locally, without storing it; so every answer is the same to
the last bit however often, and at whatever times, the link was asked
before.

Units: times in ms, sizes in bytes, bandwidths in GB/s (1e9 bytes per
second, so ``gb_per_s * 1e6`` bytes per ms).
"""

from __future__ import annotations

import heapq
import math
from heapq import heappop, heappush

__all__ = ["Link"]  # (SharedLink: internal, the handoffs' and tiers' NIC)


class Link:
    """A link whose concurrent transfers share its bandwidth (processor sharing).

    Parameters
    ----------
    gb_per_s : float
        Bandwidth in GB/s (1e9 bytes per second), > 0.
    latency_us : float, default 0.0
        Delay from a transfer's last byte served to its delivery, in
        microseconds (does not occupy the link).

    Examples
    --------
    Two 50 MB transfers on a 50 GB/s link: alone one takes 1 ms, together
    both take 2 ms (plus the 10 us latency).

    >>> link = Link(50.0, latency_us=10.0)
    >>> a = link.start(0.0, 50e6); b = link.start(0.0, 50e6)
    >>> link.next_done()
    2.01
    >>> link.pop_done(2.01)
    [0, 1]
    """

    __slots__ = (
        "gb_per_s",
        "latency_ms",
        "_rate",
        "_t",
        "_v",
        "_last",
        "_n",
        "_heap",
        "_active",
        "_sum_vf",
        "_pending",
        "_next_id",
        "bytes",
        "transfers",
    )

    def __init__(self, gb_per_s: float, latency_us: float = 0.0) -> None:
        if not (isinstance(gb_per_s, int | float) and math.isfinite(gb_per_s) and gb_per_s > 0):
            raise ValueError(f"gb_per_s must be a finite number > 0, got {gb_per_s!r}")
        if not (isinstance(latency_us, int | float) and math.isfinite(latency_us)) or (
            latency_us < 0
        ):
            raise ValueError(f"latency_us must be a finite number >= 0, got {latency_us!r}")
        self.gb_per_s = float(gb_per_s)
        self.latency_ms = float(latency_us) / 1000.0
        self._rate = self.gb_per_s * 1e6  # bytes per ms
        self._t = -math.inf  # anchor: time of the last event (start, cancel, service end)
        self._v = 0.0  # anchor: work served to each in-flight transfer by _t (ms)
        self._last = -math.inf  # the latest time asked
        self._n = 0  # transfers in service
        self._heap: list[tuple[float, int]] = []  # (virtual finish, id), stale entries skipped
        self._active: dict[int, float] = {}  # id -> virtual finish, in service
        self._sum_vf = 0.0  # sum of the virtual finishes in service
        self._pending: list[tuple[float, int]] = []  # (delivery time, id): served, in latency
        self._next_id = 0
        self.bytes = 0.0  # bytes of every transfer started
        self.transfers = 0

    def __repr__(self) -> str:
        return f"Link(gb_per_s={self.gb_per_s}, latency_us={self.latency_ms * 1000.0})"

    # ----------------------------------------------------------------- internals
    def _finish(self, t: float) -> None:
        """Process the service ends at or before ``t`` (``t`` never decreases).

        Each service end is an event of the link at its own time, computed
        from the anchor; the anchor ``(_t, _v)`` moves only to such events
        (and to starts and cancels), never to the time asked, so the link's
        floats do not depend on when or how often it is asked.
        """
        if t < self._last:
            raise ValueError(f"link time cannot go back: asked {t} after {self._last}")
        self._last = t
        n = self._n
        if n:
            heap, active = self._heap, self._active
            tt, v = self._t, self._v
            while n:
                vf, tid = heap[0]
                if active.get(tid, -1.0) != vf:  # (virtual finishes are >= 0)
                    heappop(heap)
                    continue
                end = tt + (vf - v) * n
                if end > t:
                    break
                heappop(heap)
                del active[tid]
                self._sum_vf -= vf
                n -= 1
                tt = end
                v = vf
                heappush(self._pending, (end + self.latency_ms, tid))
            self._n = n
            self._t = tt
            self._v = v

    def _event(self, t: float) -> None:
        """Move the anchor to ``t``: a start or a cancel happens there."""
        self._finish(t)
        if self._n:
            self._v += (t - self._t) / self._n
        self._t = t

    # ---------------------------------------------------------------- the API
    def work_ms(self, nbytes: float, gb_per_s: float | None = None) -> float:
        """Exclusive link time of ``nbytes`` (ms) at ``gb_per_s`` (default the link's).

        Examples
        --------
        >>> Link(25.0).work_ms(50e6)
        2.0
        """
        rate = self._rate if gb_per_s is None else gb_per_s * 1e6
        return nbytes / rate

    def start(self, t: float, nbytes: float, gb_per_s: float | None = None) -> int:
        """Start a transfer of ``nbytes`` at ``t``; return its id.

        ``gb_per_s`` overrides the link's bandwidth for this transfer (a
        link with different read and write speeds: the transfer needs
        ``nbytes / gb_per_s`` of the link's exclusive time and shares it
        with the others).

        Examples
        --------
        >>> link = Link(1.0)
        >>> link.start(0.0, 1e6), link.next_done()
        (0, 1.0)
        """
        self._event(t)
        work = self.work_ms(nbytes, gb_per_s)
        tid = self._next_id
        self._next_id += 1
        self.bytes += nbytes
        self.transfers += 1
        vf = self._v + work
        self._active[tid] = vf
        self._sum_vf += vf
        self._n += 1
        heappush(self._heap, (vf, tid))
        return tid

    def cancel(self, t: float, tid: int) -> None:
        """Drop transfer ``tid`` at ``t`` (its unserved bytes free the link).

        Examples
        --------
        >>> link = Link(1.0); a = link.start(0.0, 1e6); b = link.start(0.0, 1e6)
        >>> link.cancel(0.5, a); link.next_done()   # b had 0.25 ms served, 0.75 left
        1.25
        """
        self._event(t)
        vf = self._active.pop(tid, None)
        if vf is not None:
            self._sum_vf -= vf
            self._n -= 1
            return
        self._pending = [p for p in self._pending if p[1] != tid]
        heapq.heapify(self._pending)

    def next_done(self) -> float:
        """Delivery time of the next transfer if no other starts (inf if none).

        Examples
        --------
        >>> Link(1.0).next_done()
        inf
        """
        best = self._pending[0][0] if self._pending else math.inf
        if self._n:
            heap, active = self._heap, self._active
            while active.get(heap[0][1], -1.0) != heap[0][0]:
                heappop(heap)
            end = self._t + (heap[0][0] - self._v) * self._n + self.latency_ms
            if end < best:
                best = end
        return best

    def pop_done(self, t: float) -> list[int]:
        """Ids of the transfers delivered at or before ``t``, in delivery order.

        Examples
        --------
        >>> link = Link(1.0); _ = link.start(0.0, 1e6); _ = link.start(0.0, 3e6)
        >>> link.pop_done(2.0), link.pop_done(4.0)   # 0 ends at 2 (shared), 1 alone after
        ([0], [1])
        """
        self._finish(t)
        out = []
        pending = self._pending
        while pending and pending[0][0] <= t:
            out.append(heappop(pending)[1])
        return out

    def pop_delivered(self, t: float) -> list[tuple[float, int]]:
        """``(delivery time, id)`` of the transfers delivered at or before ``t``, in order.

        Examples
        --------
        >>> link = Link(1.0, latency_us=500.0); _ = link.start(0.0, 1e6)
        >>> link.pop_delivered(2.0)
        [(1.5, 0)]
        """
        self._finish(t)
        out = []
        pending = self._pending
        while pending and pending[0][0] <= t:
            out.append(heappop(pending))
        return out

    def in_flight(self) -> int:
        """Transfers started and not yet delivered.

        Examples
        --------
        >>> link = Link(1.0); _ = link.start(0.0, 1e6); link.in_flight()
        1
        """
        return self._n + len(self._pending)

    def backlog_ms(self, t: float) -> float:
        """Link time still needed at ``t`` by the transfers in flight (ms).

        Processor sharing serves one unit of work per ms while anything is
        in flight, so the backlog falls by ``t - anchor`` from the anchor's.

        Examples
        --------
        >>> link = Link(1.0); _ = link.start(0.0, 1e6); _ = link.start(0.0, 2e6)
        >>> link.backlog_ms(0.0), link.backlog_ms(1.0), link.backlog_ms(5.0)
        (3.0, 2.0, 0.0)
        """
        self._finish(t)
        if not self._n:
            return 0.0
        left = self._sum_vf - self._n * self._v - (t - self._t)
        return left if left > 0.0 else 0.0

    def estimate_ms(self, t: float, nbytes: float, gb_per_s: float | None = None) -> float:
        """How long a transfer started at ``t`` would take if nothing else starts.

        Under processor sharing a job of work ``w`` joining jobs with
        remaining work ``r_i`` ends after ``w + sum(min(r_i, w))``; the
        latency is added. The remaining works are taken at ``t``'s virtual
        time, computed from the anchor and not stored.

        Examples
        --------
        >>> link = Link(1.0); _ = link.start(0.0, 0.5e6)
        >>> link.estimate_ms(0.0, 1e6)   # 1 ms of its own + 0.5 ms shared
        1.5
        """
        self._finish(t)
        w = self.work_ms(nbytes, gb_per_s)
        total = w
        n = self._n
        if not n:
            return total + self.latency_ms
        v = self._v + (t - self._t) / n  # t's virtual time, not stored
        for vf in self._active.values():
            r = vf - v
            total += r if r < w else w
        return total + self.latency_ms


class SharedLink(Link):
    """A :class:`Link` two parties use: a prefill instance's NIC carrying both its
    KV tier traffic and its handoffs (``Disaggregated(handoff_tier=...)``).

    Transfers started with :meth:`start_handoff` belong to the handoffs, every
    other to the tiers. Each party takes its own deliveries:
    :meth:`pop_done` gives the handoffs' ids, :meth:`pop_delivered` the
    tiers' ``(time, id)`` pairs; a delivery one party's call reaches first is
    held for the other. :meth:`next_done` and :meth:`in_flight` count both
    parties' transfers in flight (a party asking early finds nothing of its
    own).

    Examples
    --------
    A 1 GB/s link: a handoff of 1e6 bytes and a tier write of 1e6 bytes at
    t=0 share it, both end at 2 ms; the tiers' call takes its own only.

    >>> nic = SharedLink(1.0)
    >>> h = nic.start_handoff(0.0, 1e6); w = nic.start(0.0, 1e6)
    >>> nic.pop_delivered(2.0), nic.pop_done(2.0)
    ([(2.0, 1)], [0])
    """

    __slots__ = ("handoff", "held_handoffs", "held_tiers")

    def __init__(self, gb_per_s: float, latency_us: float = 0.0) -> None:
        super().__init__(gb_per_s, latency_us)
        self.handoff: set[int] = set()  # ids of the handoffs in flight
        self.held_handoffs: list[tuple[float, int]] = []  # delivered, for pop_done
        self.held_tiers: list[tuple[float, int]] = []  # delivered, for pop_delivered

    def start_handoff(self, t: float, nbytes: float, gb_per_s: float | None = None) -> int:
        """:meth:`Link.start` for a handoff."""
        tid = self.start(t, nbytes, gb_per_s)
        self.handoff.add(tid)
        return tid

    def _split(self, t: float) -> None:
        """Move the deliveries up to ``t`` to the party they belong to."""
        self._finish(t)
        pending = self._pending
        handoff = self.handoff
        while pending and pending[0][0] <= t:
            d = heappop(pending)
            if d[1] in handoff:
                handoff.discard(d[1])
                self.held_handoffs.append(d)
            else:
                self.held_tiers.append(d)

    def pop_done(self, t: float) -> list[int]:
        """The handoffs delivered at or before ``t``, in delivery order."""
        self._split(t)
        held = self.held_handoffs
        out = [tid for _, tid in sorted(held)]
        held.clear()
        return out

    def pop_delivered(self, t: float) -> list[tuple[float, int]]:
        """The tiers' ``(delivery time, id)`` at or before ``t``, in order."""
        self._split(t)
        held = self.held_tiers
        out = sorted(held)
        held.clear()
        return out

    def cancel(self, t: float, tid: int) -> None:
        """:meth:`Link.cancel` (a handoff's or a tier transfer's)."""
        super().cancel(t, tid)
        self.handoff.discard(tid)
        self.held_handoffs = [d for d in self.held_handoffs if d[1] != tid]

    def next_done(self) -> float:
        """The next delivery of a transfer in flight or of a handoff held (inf if
        none). (A tier delivery held is the tiers' to take, at their next drain:
        :meth:`in_flight` counts it.)"""
        best = super().next_done()
        for when, _ in self.held_handoffs:
            if when < best:
                best = when
        return best

    def in_flight(self) -> int:
        """Transfers of either party not yet taken by it."""
        return super().in_flight() + len(self.held_handoffs) + len(self.held_tiers)
