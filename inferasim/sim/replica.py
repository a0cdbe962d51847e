"""One serving replica: :class:`Replica` (internal, compiled).

A replica owns five objects, each with one job:

* a batch scheduler (:mod:`inferasim.sim.scheduler`): queues, token budget,
  chunking, preemption, the current step; its role subclass on a
  disaggregated fleet;
* a KV manager (:mod:`inferasim.sim.kv`): HBM blocks, the prefix cache, the
  lower tiers and their loads;
* the decode group (:mod:`inferasim.sim.decode`) and the current decode
  stretch (:mod:`inferasim.sim.stretch`): pure-decode steps in one jump;
* a recorder (:mod:`inferasim.sim.recorder`): timeline, inter-token gaps,
  counters.

The fleet drives it with :meth:`Replica.arrive` (a routed request) and
:meth:`Replica.advance` (bring it up to a time), and asks it two time
questions: when its state next changes (:meth:`Replica.wake`), and its
state at a time without advancing (:meth:`Replica.outstanding_at`,
:meth:`Replica.kv_at`). Time semantics: a step starts when the previous
one ends if there is work; a request arriving at ``t`` joins the first step
that starts at or after ``t``; ``advance(t)`` completes every step ending
at or before ``t`` and starts every step starting before it.

With KV tiers a request whose blocks must be loaded is admitted holding its
memory but waits (LOADING, no chunk) until its last transfer is delivered,
then joins the first step starting after that; blocks evicted from HBM are
offloaded at the start of the step that needs them. While loads are in
flight the replica runs one step at a time (a delivery is new prefill
work), and with nothing else to run it idles until the next delivery or
arrival.
"""

from __future__ import annotations

import math
from typing import Any

from inferasim.sim.cache import BlockCache
from inferasim.sim.decode import DecodeGroup
from inferasim.sim.kernels import StepKernel, bad_step
from inferasim.sim.kv import KVManager
from inferasim.sim.recorder import Recorder
from inferasim.sim.scheduler import (
    BatchScheduler,
    DecodeScheduler,
    PrefillScheduler,
)
from inferasim.sim.sequence import RequestLog, Seq
from inferasim.sim.stretch import DecodeStretch
from inferasim.sim.tiers import ReplicaTiers

__all__: list[str] = []

#: The longest stretch planned at once (steps).
PLAN_CAP = 4096


class Replica:
    """One engine: scheduler, KV memory, decode stretch, recorder (see the module)."""

    def __init__(
        self,
        index: int,
        *,
        cost: Any,
        kernel: StepKernel,
        block_size: int,
        capacity: int,
        max_num_seqs: int,
        max_batched_tokens: int,
        chunked_prefill: bool,
        eviction: Any,
        out: RequestLog,
        period: float,
        t0: float,
        jump: bool,
        role: str = "both",
        tiers: ReplicaTiers | None = None,
        write_through: bool = False,
        load_always: bool = False,
        rules: Any = None,
    ) -> None:
        self.index = index
        # "both" (aggregated), "prefill" (hands sequences off after their first
        # token) or "decode" (receives them through deliver)
        self.role = role
        self.cost = cost
        self.kernel = kernel
        self.rec = Recorder(period, t0)
        page = rules.page_for(block_size) if rules is not None else block_size
        self.group = DecodeGroup(page, self.rec)
        generated = rules is not None and rules.cache_generated
        self.kv = KVManager(
            capacity, block_size,
            BlockCache(eviction, block_size // page, partial=tiers is None),
            tiers, kernel, write_through, load_always, page, generated,
        )
        kind = PrefillScheduler if role == "prefill" else DecodeScheduler if role == "decode" else BatchScheduler
        self.sched: BatchScheduler = kind(
            index, self.kv, self.group, self.rec, out, max_num_seqs, max_batched_tokens,
            chunked_prefill,
        )
        self.sched.clock = t0
        if rules is not None:
            self.sched.full_prompt = rules.full_prompt_admission
            self.sched.on_schedule = rules.cache_on_schedule
        self.stretch = DecodeStretch(self.sched, self.group, self.kv, self.rec, kernel, cost)
        self.plan_cap = PLAN_CAP if jump else 1
        # a shared tier another replica writes may let a waiting request in at any step
        self.coupled = False
        # (coupled) a decode stretch touches no shared tier: its HBM evictions
        # reach none (see :meth:`_rewake`)
        self.private_stretches = False
        self.stalled = False  # work waits but nothing can run (KV held or reserved)
        self.idle_wait = False  # nothing can run before a load arrives (clock = then)
        self.next_wake = math.inf  # see wake()
        self.next_sync = math.inf  # see _rewake()
        # a decode instance keeping a prefix cache (its finishes may free no page)
        self.decode_cache = False

    # --------------------------------------------------------------- driving
    def arrive(self, seq: Seq, t: float) -> None:
        """Enqueue a request routed here at ``t`` (after ``advance(t)``)."""
        sched = self.sched
        rec = self.rec
        if rec.next_sample < t:
            rec.emit(t, sched.timeline_row())
        if self.stretch.steps:
            self.stretch.cut()  # the queue changed: the stretch ends here
        if not sched.in_step and (self.idle_wait or not sched.has_work):
            sched.clock = t  # (idle_wait: after advance(t) the planned retry is at or after t)
            self.idle_wait = False
        sched.enqueue(seq)
        self._rewake()

    def advance(self, until: float) -> None:
        """Complete every step ending at or before ``until``; start every step
        starting before it."""
        self._advance(until)
        self._rewake()

    def _advance(self, until: float) -> None:
        sched = self.sched
        stretch = self.stretch
        while True:
            if sched.in_step:
                if sched.step_end > until:
                    return
                if stretch.steps and stretch.pos < stretch.steps - 1:
                    stretch.progress(until)
                    if sched.step_end > until:
                        return
                self._complete()
            if sched.clock >= until or not sched.has_work or self.stalled:
                return
            self._start_step()

    def _start_step(self) -> None:
        sched, kv, rec, group = self.sched, self.kv, self.rec, self.group
        t = sched.clock
        if rec.next_sample < t:
            rec.emit(t, sched.timeline_row())
        rec.start_busy(t)
        self.idle_wait = False
        if sched.n_loading:
            sched.collect_loads(t)
        chunks, budget, need, avail, preempted = sched.compose()
        ev0 = kv.cache.evicted_pages  # (an entry that lost only tail pages counts)
        if sched.on_schedule:  # vLLM's order: the running allocate and cache first
            if need:
                kv.allocate(need, t)
                need = 0
            if chunks:
                sched.cache_scheduled(chunks)
            avail = kv.available
            if not preempted and sched.waiting:
                sched.admit(t, chunks, budget, avail)
        elif not preempted and sched.waiting:
            need += sched.admit(t, chunks, budget, avail - need)
        B = group.batch  # (sequences whose KV was delivered joined the decode batch)
        if need:
            kv.allocate(need, t)
        evicted = kv.cache.evicted_pages != ev0
        kv.note_peak()
        if not chunks and not B:
            if sched.n_loading:
                # nothing runs before a load arrives: retry then (or at an arrival)
                sched.clock = kv.tiers.next_delivery(t)  # type: ignore[union-attr]
                self.idle_wait = True
            elif sched.stall(preempted):  # memory was freed: admit again
                self._start_step()
            else:
                # a prefill instance whose memory is held by handed-off KV, or a decode
                # instance whose memory is reserved for KV in flight: wait for it
                self.stalled = True
                rec.stop_busy(t)
            return
        sched.in_step = True
        sched.step_batch = B
        rec.steps += 1
        if chunks:
            pt = pa = 0
            for seq, n in chunks:
                pt += n
                pa += n * seq.computed + n * (n + 1) // 2
            sched.chunks = chunks
            S = group.context
            dt = self.kernel.step(pt, pa, B, S)
            e = t + dt
            if not (dt >= 0.0 and e < math.inf):  # NaN fails too; the end must be finite
                raise bad_step(self.cost, dt, pt, pa, B, S)
            sched.step_end = e
            return
        sched.chunks = []
        # After a preemption, or an eviction while requests wait (it can shorten
        # their cached prefix and so change their memory need, unless
        # BatchScheduler.evictions_matter rules that out), the next step must be
        # scheduled afresh: no stretch; nor while loads are in flight (a delivery
        # is new prefill work, like an arrival), nor while requests wait behind a
        # shared tier (another replica's write may let one in at the next step),
        # nor while requests wait and transfers are in flight (their loads' price
        # falls as the links drain).
        single = (
            preempted
            or (sched.waiting and (self.coupled or (evicted and sched.evictions_matter())))
            or sched.n_loading
            or (sched.waiting and kv.tiers is not None and kv.tiers.in_flight())
        )
        sched.step_end = self.stretch.plan(t, 1 if single else self.plan_cap)

    def _complete(self) -> None:
        """End the current step at ``step_end``."""
        sched, group, rec = self.sched, self.group, self.rec
        e = sched.step_end
        if rec.next_sample < e:
            rec.emit(e, sched.timeline_row())
        sched.clock = e
        sched.in_step = False
        if self.stretch.steps:
            self.stretch.ended()
        if sched.step_batch:
            sched.outstanding -= sched.step_batch
            group.stepped(e)
            seq = group.pop_finished()
            while seq is not None:
                sched.finish(seq, group.leave(seq), e)
                seq = group.pop_finished()
        if sched.chunks:
            sched.complete_chunks(e)
            if self.kv.write_through:  # the step's computed blocks, in bulk
                self.kv.tiers.flush(e)  # type: ignore[union-attr]
        if not sched.has_work:
            rec.stop_busy(e)

    # ------------------------------------------------------- time questions
    def wake(self) -> float:
        """The earliest ``t`` at which ``advance(t)`` changes the queue, the running
        set, the KV use or the cache (state as it is now); inf when nothing is due.

        Inside a stretch only the decode progress moves before that (read it
        with :meth:`outstanding_at` and :meth:`kv_at`). (A pure function of the
        replica's state, kept in :attr:`next_wake` by every method that changes
        it.)"""
        return self.next_wake

    def _rewake(self) -> None:
        """Keep :attr:`next_wake` and :attr:`next_sync` (the state changed).

        ``next_sync`` answers a coupled fleet's question: the earliest ``t`` at
        which ``advance(t)`` may read or write a shared tier (or change what a
        step reading one sees). It is :meth:`wake`, except inside a stretch
        whose evictions reach no shared tier (:attr:`private_stretches`): its
        decode steps, finishes and offloads stay in the replica, so the
        stretch's last step is the next such instant; routers still see its
        earlier changes (through :meth:`wake`, read by the views)."""
        w = self._wake()
        self.next_wake = w
        if self.private_stretches and self.stretch.steps:
            self.next_sync = self.stretch.last_end()
        else:
            self.next_sync = w

    def _wake(self) -> float:
        """:meth:`wake` computed afresh."""
        if self.stretch.steps:
            return self.stretch.wake()
        sched = self.sched
        if sched.in_step:
            return sched.step_end
        if sched.has_work and not self.stalled:
            return math.nextafter(sched.clock, math.inf)
        return math.inf

    def outstanding_at(self, t: float) -> int:
        """Outstanding tokens at ``t`` (``t`` before :meth:`wake`)."""
        if self.stretch.steps:
            return self.stretch.outstanding_at(t)
        return self.sched.outstanding

    def kv_at(self, t: float) -> int:
        """KV blocks held (private plus pinned) after ``advance(t)``, without
        advancing, or -1 when that needs the advance itself."""
        if self.stretch.steps:
            return self.stretch.kv_at(t, self.role == "decode" and not self.decode_cache)
        return self.kv.running if self.next_wake > t else -1

    # ------------------------------------------------------- disaggregation
    def reserve(self, n: int, t: float) -> None:
        """Reserve ``n`` KV blocks at ``t`` for a sequence whose KV is about to arrive
        (decode instance; after ``advance(t)``; the caller checked the room;
        blocks it evicts go to its tiers at ``t``).

        A stretch under way goes on when the blocks its later steps allocate
        still fit in the free memory left (as its plan checked: no step of it
        could preempt or evict), else it ends with the running step."""
        kv = self.kv
        kv.allocate(n, t)
        stretch = self.stretch
        if stretch.steps and stretch.blocks_left() > kv.free:
            stretch.cut()  # the stretch priced its allocations on the old free memory
        kv.note_peak()
        self._rewake()

    def pin_prefix(self, ids: list[int], tokens: int) -> int:
        """Pin the leading run of a ``tokens``-token prompt's blocks ``ids`` this
        decode instance holds (see :meth:`KVManager.held_prefix`), for a handoff
        placed now (after ``advance(t)``); returns its length (hash blocks)."""
        kv = self.kv
        m = kv.held_prefix(ids, tokens)
        if m:
            if self.stretch.steps:  # (revived pages are no longer evictable)
                self.stretch.cut()
                self._rewake()
            kv.cache.acquire(ids[:m])
        return m

    def load_held(self, seq: Seq, t: float, m: int, r: int, counts: list[int]) -> None:
        """Start loading blocks ``m..r`` of a handoff placed now (after
        ``advance(t)`` and :meth:`pin_prefix`) from this decode instance's tiers
        at ``t`` (``counts`` per tier, see :meth:`KVManager.held_run`); the
        handoff moves the rest."""
        sched = self.sched
        assert isinstance(sched, DecodeScheduler)
        sched.inbound(seq, m, r, counts, t)

    def unreserve(self, n: int, t: float, ids: list[int] | None = None) -> None:
        """Free ``n`` blocks reserved for a handoff called off at ``t``, and unpin
        the held prefix ``ids`` (decode instance; after ``advance(t)``)."""
        self._changed_at(t)
        self.kv.private -= n
        if ids:
            self.kv.cache.release(ids)
        self._unstall(t, busy=True)
        self._rewake()

    def deliver(self, seq: Seq, t: float, held: int = -1) -> None:
        """A handed-off sequence's KV arrived at ``t`` (decode instance; after
        ``advance(t)``): it joins the decode batch at the next step (once the
        blocks it loads from this instance's tiers are delivered, if any).
        ``held`` (with a prefix cache): its leading blocks pinned at placement;
        the prompt's other full blocks are cached when it joins."""
        self._changed_at(t)
        sched = self.sched
        if not sched.in_step and not sched.has_work:
            sched.clock = t
        assert isinstance(sched, DecodeScheduler)
        sched.deliver(seq, held)
        self._unstall(t, busy=False)
        self._rewake()

    def release_kv(self, seq: Seq, t: float) -> None:
        """Free a handed-off sequence's KV at ``t`` (prefill instance; after
        ``advance(t)``)."""
        rec = self.rec
        if rec.next_sample < t:
            rec.emit(t, self.sched.timeline_row())
        sched = self.sched
        assert isinstance(sched, PrefillScheduler)
        sched.release(seq)
        self._unstall(t, busy=True)
        self._rewake()

    def _changed_at(self, t: float) -> None:
        """Memory or the queue changes at ``t`` from outside: sample, end a stretch."""
        rec = self.rec
        if rec.next_sample < t:
            rec.emit(t, self.sched.timeline_row())
        if self.stretch.steps:  # the stretch priced its allocations on the old memory
            self.stretch.cut()

    def _unstall(self, t: float, busy: bool) -> None:
        """Work may run again from ``t`` (memory was freed or a sequence arrived)."""
        if self.stalled:
            self.stalled = False
            self.sched.clock = t
            if busy:
                self.rec.start_busy(t)
