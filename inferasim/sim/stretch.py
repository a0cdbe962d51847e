"""Pure-decode stretches, priced and applied in one jump: :class:`DecodeStretch`
(internal, compiled).

While nothing but decoding happens on a replica (no prefill, admission or
preemption), step ``j`` of the stretch decodes the group's sequences minus
those finished before it, with the context grown by one token a sequence
a step: its time is the cost model's decode step time, and its end the
running sum of them. A stretch ends at the first finish when requests
wait (a finish frees a slot and memory for them), else when the last
sequence finishes (sequences finishing on the way leave at their step);
before the first step whose new blocks would not fit (before the first
eviction when requests wait: an eviction can change what they may
reuse); after ``cap`` steps; or when an arrival, a delivery or a
reservation cuts it (:meth:`DecodeStretch.cut`).

Steps are priced lazily, only as far as the times asked for need, as
sequential sums equal to the step-by-step loop's ``t += dt``, and applied
lazily (:meth:`DecodeStretch.progress`). During a stretch the state a
router sees (KV use, cache content, queue) changes only at the end of a
step with finishes (or of the stretch), ``weak``, and at the start of a
step after the first one that allocates blocks, ``strict``: the replica
wakes there (:meth:`DecodeStretch.wake`); in between only the decode
progress moves, which :meth:`DecodeStretch.outstanding_at` and
:meth:`DecodeStretch.kv_at` read off the plan.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from typing import Any

from inferasim.sim.decode import DecodeGroup
from inferasim.sim.kernels import StepKernel, bad_step
from inferasim.sim.kv import KVManager
from inferasim.sim.recorder import Recorder
from inferasim.sim.scheduler import BatchScheduler
from inferasim.sim.sequence import Seq

__all__: list[str] = []

#: A stretch runs through at most this many finishes (each costs a little Python;
#: 2 when the replica's last stretch ran at most 64 steps).
MAX_FINISHES = 8


class DecodeStretch:
    """The plan of the replica's current pure-decode stretch (see the module)."""

    def __init__(
        self,
        sched: BatchScheduler,
        group: DecodeGroup,
        kv: KVManager,
        recorder: Recorder,
        kernel: StepKernel,
        cost: Any,
    ) -> None:
        self.sched = sched
        self.group = group
        self.kv = kv
        self.rec = recorder
        self.kernel = kernel
        self.cost = cost  # (named in errors)
        self.steps = 0  # steps in the plan; 0: no stretch under way
        self.pos = 0  # the running step (steps before it are applied)
        self.pos_blocks = 0  # _cum(pos)
        self.ends: list[float] = []  # ends of the steps priced so far
        # new blocks of steps 1..j (:meth:`_cum`), in closed form: decode step d
        # allocates ``phase[d % bs]`` (a period of ``bs`` steps allocates
        # ``period``; ``head[i]``: the first ``i`` steps of a period) minus one
        # every ``bs`` steps from each finished sequence's first page boundary
        # after its finish (``gone_from``)
        self.bs = group.bs
        self.period = 0
        self.head: list[int] = [0]
        self.gone_from: list[int] = []
        self.fsteps: list[int] = []  # steps with finishes, in order
        self.fi = 0  # the next of them
        # pricing: step j decodes batch0 - g sequences with context0 - gctx +
        # (batch0 - g) * j, g (gctx) the count (context) of fins entries with f < j
        self.start = 0.0
        self.batch0 = 0
        self.context0 = 0
        self.fins: list[tuple[int, int]] = []  # (step, context) of each finish
        self.gi = 0
        self.gone = 0
        self.gone_ctx = 0
        self.chunk = 8  # steps priced next (doubles each time)
        self.last_len = 0  # steps of the last stretch (sizes the first pricing chunk)
        # routing-visible state changes at a step ending at/after weak or
        # starting after strict
        self.weak = 0.0
        self.strict = 0.0

    # ---------------------------------------------------------------- plan
    def plan(self, t: float, cap: int) -> float:
        """Price a stretch starting at ``t`` of at most ``cap`` steps; return the end
        of its first step (``steps`` stays 0 for a single step)."""
        group = self.group
        B, S, D = group.batch, group.context, group.steps
        waiting = bool(self.sched.waiting)
        K = group.first_finish() - D  # steps up to and including the first finish
        fins: list[tuple[int, Seq]] = []
        if K < cap and not waiting:
            # continue past the next few finishes (fewer when arrivals cut this
            # replica's stretches short anyway)
            valid = group.next_finishes(MAX_FINISHES if self.last_len > 64 else 2)
            K = valid[-1][0] - D
            if K > cap:
                K = cap
            # (step at whose end the sequence finishes, sequence), before the last step
            fins = [(e[0] - D - 1, e[3]) for e in valid if e[0] - D - 1 < K - 1]
        if K > cap:
            K = cap
        if K == 1:
            return self.single(t)
        self._new_blocks(K, D, fins)
        self.steps = K  # (the bound of the searches below)
        kv = self.kv
        free = kv.free
        # (no eviction while requests wait, unless none could let one in)
        limit = free if waiting and self.sched.evictions_matter() else free + kv.cache.evictable
        if self._cum(K - 1) > limit:  # (blocks freed by finishes ignored: a shorter stretch)
            K = self._fitting(0, limit) + 1
            if K == 1:
                return self.single(t)
            fins = [x for x in fins if x[0] < K - 1]
        if fins:
            # sequences finishing at step f leave the decode group from step f + 1
            self.fins = [(f, seq.c_join + D - seq.d_join + 1) for f, seq in fins]
            self.fsteps = sorted({f for f, _ in fins})
        else:
            self.fins = []
            self.fsteps = []
        self.fi = 0
        self.start = t
        self.batch0 = B
        self.context0 = S
        self.gi = self.gone = self.gone_ctx = 0
        # first chunk: what the previous stretch used (arrivals cut stretches at a
        # similar pace), at least 8 steps
        used = self.last_len
        self.chunk = used if used > 8 else 8
        self.ends = []
        self.steps = K
        self.pos = 0
        self.pos_blocks = 0
        self._set_horizon()  # (prices the steps it needs: at least the first one)
        return self.ends[0]

    def single(self, t: float) -> float:
        """One decode step alone at ``t`` (no stretch); its end."""
        self.steps = 0
        group = self.group
        return self.checked_run([], t, group.batch, group.context, 1)

    def _new_blocks(self, K: int, D: int, fins: list[tuple[int, Seq]]) -> None:
        """Set up :meth:`_cum` for steps 1..K-1 after decode step ``D``: decode step
        ``d`` allocates ``phase[d % bs]``, minus the sequences finished before it.

        (The closed form costs O(min(K, bs)) a plan where the running sums of
        the K - 1 steps cost O(K); on the conversation trace with tiers it
        took 7% of a run's instructions.)"""
        group = self.group
        bs = group.bs
        lo = (D + 1) % bs
        n = K - 1 if K - 1 < bs else bs  # (steps of the first period needed)
        if lo + n <= bs:
            counts = group.phases(lo, lo + n)
        else:
            counts = group.phases(lo, bs) + group.phases(0, lo + n - bs)
        head = [0] * (n + 1)
        acc = 0
        for x in range(n):
            acc += counts[x]
            head[x + 1] = acc
        self.head = head
        self.period = acc  # (read only when n == bs)
        # a sequence finishing at the end of step f stops allocating from the step
        # of its next page boundary, index f + ((d_join - c_join - D - f - 1) % bs)
        self.gone_from = [f + ((seq.d_join - seq.c_join - D - f - 1) % bs) for f, seq in fins]

    def checked_run(self, ends: list[float], e: float, b: int, s: int, k: int) -> float:
        """The kernel's run of ``k`` decode steps after ``e``, its end checked:
        finite and not before ``e``."""
        end = self.kernel.run(ends, e, b, s, k)
        if not e <= end < math.inf:
            raise bad_step(self.cost, f"{end - e!r} in total over {k} step(s)", 0, 0, b, s)
        return end

    def cut(self) -> None:
        """End the stretch with its running step (the queue or memory changed)."""
        self.steps = self.pos + 1
        self.weak = self.sched.step_end
        self.strict = math.inf

    def ended(self) -> None:
        """The stretch's last step completed."""
        self.last_len = self.steps
        self.steps = 0

    # ------------------------------------------------------------- pricing
    def price(self, j: int, until: float = 0.0) -> None:
        """Price the steps up to ``j`` (and a few more, growing geometrically;
        as far as ``until`` at the recent pace)."""
        ends = self.ends
        L = len(ends)
        if j < L:
            return
        K = self.steps
        target = j + 1
        if target < L + self.chunk:
            target = L + self.chunk
        self.chunk *= 2
        if until > 0.0 and L > 1:  # enough steps to reach ``until`` at the recent pace
            pace = (ends[-1] - self.start) / L
            if pace > 0.0:
                more = (until - ends[-1]) / pace
                if more > K:
                    target = K
                elif L + int(more * 1.1) + 4 > target:
                    target = L + int(more * 1.1) + 4
        if target > K:
            target = K
        e = ends[-1] if L else self.start
        fins = self.fins
        nf = len(fins)
        gi, g, gctx = self.gi, self.gone, self.gone_ctx
        B0, S0 = self.batch0, self.context0
        while L < target:
            while gi < nf and fins[gi][0] < L:
                g += 1
                gctx += fins[gi][1]
                gi += 1
            stop = fins[gi][0] + 1 if gi < nf else target
            if stop > target:
                stop = target
            b = B0 - g
            e = self.checked_run(ends, e, b, S0 - gctx + b * L, stop - L)
            L = stop
        self.gi, self.gone, self.gone_ctx = gi, g, gctx

    def blocks_left(self) -> int:
        """Blocks the stretch's steps after the running one still allocate."""
        return self._cum(self.steps - 1) - self.pos_blocks

    def _cum(self, j: int) -> int:
        """Blocks the stretch allocates in its steps 1..j (``0 <= j < steps``)."""
        if not j:
            return 0
        bs = self.bs
        blocks = (j // bs) * self.period + self.head[j % bs]
        for x in self.gone_from:
            if j > x:
                blocks -= (j - 1 - x) // bs + 1
        return blocks

    def _blocks_at(self, j: int) -> int:
        """``_cum(j)``, read off the applied position when ``j`` is it (``j >= pos``)."""
        return self.pos_blocks if j == self.pos else self._cum(j)

    def _next_allocating(self, j: int) -> int:
        """The first ``x >= j`` whose step ``x + 1`` allocates (``_cum(x + 1) >
        _cum(x)``), at most ``steps - 1`` (``j >= pos``): ``_fitting(j, _cum(j))``
        step by step (the next step mostly allocates)."""
        blocks = self._blocks_at(j)
        last = self.steps - 1
        x = j
        while x < last and self._cum(x + 1) == blocks:
            x += 1
        return x

    def _fitting(self, j: int, limit: int, hi: int = -1) -> int:
        """The most steps ``m`` (``j <= m <= hi``, by default ``hi = steps - 1``)
        whose blocks 1..m add up to at most ``limit``, given ``_cum(j) <= limit``
        (``_cum`` never decreases): ``bisect_right`` over the running sums, capped
        at ``hi``. (Galloping from ``j``: the answer is mostly near it.)"""
        lo = j
        if hi < 0:
            hi = self.steps - 1
        step = 1
        while lo + step <= hi:
            if self._cum(lo + step) > limit:
                hi = lo + step - 1
                break
            lo += step
            step *= 2
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._cum(mid) <= limit:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _set_horizon(self) -> None:
        """When the stretch next changes what a router sees (``weak``, ``strict``).

        Step ends never decrease, so only the earlier of the two needs
        pricing: a later one is implied by it."""
        K = self.steps
        w = K - 1
        if self.fi < len(self.fsteps):
            f = self.fsteps[self.fi]
            if f < w:
                w = f
        # the first step after pos that allocates is step i + 1 with _cum(i + 1) > _cum(pos)
        pos = self.pos
        i = self._next_allocating(pos)
        ends = self.ends
        if i >= w:  # t > ends[i] implies t >= ends[w]
            if w >= len(ends):
                self.price(w)
            self.weak = ends[w]
            self.strict = math.inf
            return
        if i + 1 >= len(ends):
            self.price(i + 1)
        strict = ends[i]
        self.strict = strict
        if ends[i + 1] > strict:  # then t >= ends[w] implies t > strict
            self.weak = ends[i + 1]
        else:  # zero-time steps: find ends[w] itself
            if w >= len(ends):
                self.price(w)
            self.weak = ends[w]

    def last_end(self) -> float:
        """The end of the stretch's last step (priced now if it was not yet)."""
        K = self.steps
        if len(self.ends) < K:
            self.price(K - 1)
        return self.ends[K - 1]

    def step_at(self, t: float) -> int:
        """The first step ending at or after ``t`` (at most the last one), priced."""
        ends = self.ends
        K = self.steps
        while ends[-1] < t and len(ends) < K:
            self.price(len(ends), t)
        jn = bisect_left(ends, t)
        return jn if jn < K - 1 else K - 1

    # ------------------------------------------------------------- queries
    def wake(self) -> float:
        """Earliest ``t`` at which advancing changes the routing-visible state."""
        # weak < nextafter(strict) is weak <= strict (no double between)
        weak, strict = self.weak, self.strict
        return weak if weak <= strict else math.nextafter(strict, math.inf)

    def outstanding_at(self, t: float) -> int:
        """Outstanding tokens at ``t`` (before the stretch wakes): the decode
        progress of the steps ended by ``t`` counted off."""
        done = bisect_right(self.ends, t) - self.pos
        sched = self.sched
        return sched.outstanding - self.group.batch * done if done > 0 else sched.outstanding

    def kv_at(self, t: float, frees_on_finish: bool) -> int:
        """KV blocks held (private plus pinned) after advancing to ``t``, or -1
        when that needs the advance itself.

        Inside a stretch whose steps up to ``t`` neither end it nor end at
        ``t``, advancing applies the steps starting before ``t``: their
        allocations (read off the plan) and, where the sequences hold private
        blocks only (``frees_on_finish``: a decode instance), the finishes of
        the steps ended before ``t``, each freeing the ``ceil(computed /
        block_size)`` blocks of its sequence (``computed = ctx + f``).
        """
        kv = self.kv.running
        if self.sched.step_end > t:
            return kv
        K = self.steps
        pos = self.pos
        if pos >= K - 1:  # (the stretch's last step ends by t)
            return -1
        jn = self.step_at(t)
        if self.ends[jn] <= t:  # (a step ends at t, or the stretch by t: completed there)
            return -1
        if t >= self.weak:  # finishes before t
            if not frees_on_finish:
                return -1
            pt = self.kv.pt
            for f, ctx in self.fins:
                if f >= jn:
                    break
                if f >= pos:
                    kv -= (ctx + f + pt - 1) // pt
        return kv + self._cum(jn) - self.pos_blocks if jn > pos else kv

    # ------------------------------------------------------------ applying
    def progress(self, until: float) -> None:
        """Apply the stretch's steps that start before ``until``."""
        ends = self.ends
        jn = self.step_at(until)
        pos = self.pos
        if jn <= pos:
            return
        sched, group, kv, rec = self.sched, self.group, self.kv, self.rec
        fsteps = self.fsteps
        while pos < jn:
            fi = self.fi
            f = fsteps[fi] if fi < len(fsteps) else jn
            if f >= jn:
                self._uniform(pos, jn)
                break
            if f > pos:
                self._uniform(pos, f)  # step f (with finishes) is running
            e = ends[f]
            if rec.next_sample < e:
                rec.emit(e, sched.timeline_row())
            sched.outstanding -= group.batch
            group.stepped(e)
            seq = group.pop_finished()
            while seq is not None:
                sched.finish(seq, group.leave(seq), e)
                seq = group.pop_finished()
            sched.step_batch = group.batch
            self.fi = fi + 1
            pos = f + 1  # start the next step
            sched.clock = e
            blocks = self._cum(pos)
            alloc = blocks - self._blocks_at(f)
            if alloc:
                kv.allocate(alloc, e)
                kv.note_peak()
            rec.steps += 1
            self.pos = pos
            self.pos_blocks = blocks
            sched.step_end = ends[pos]
        self._set_horizon()

    def _uniform(self, j: int, jn: int) -> None:
        """Complete steps ``j..jn-1`` and start steps up to ``jn``: no finishes.

        With tiers, a step that evicts (and so offloads) must allocate at its
        own start time, as the step-by-step loop does: a run ends with it.
        The steps before it in the run take free blocks only, so booking their
        blocks at that start too changes nothing (the eviction takes the same
        victims; the timeline reads the plan, :meth:`_emit_plan`)."""
        if jn <= j:
            return
        kv = self.kv
        if kv.tiers is not None and self._cum(jn) - self._blocks_at(j) > kv.free:
            while j < jn:
                # steps j + 1 .. m fit in the free memory (_cum(m) <= _cum(j) +
                # free); step m + 1 evicts, at its start ends[m]
                m = self._fitting(j, self._blocks_at(j) + kv.free, jn)
                nxt = m + 1 if m + 1 < jn else jn
                self._uniform_run(j, nxt)
                j = nxt
            return
        self._uniform_run(j, jn)

    def _uniform_run(self, j: int, jn: int) -> None:
        ends = self.ends
        start = ends[jn - 1]
        sched, kv, rec = self.sched, self.kv, self.rec
        if rec.next_sample < start:
            self._emit_plan(j, start)
        k = jn - j
        B = self.group.batch
        self.group.stepped_many(ends[j:jn])
        sched.outstanding -= B * k
        rec.steps += k
        sched.clock = start  # (before allocating: an eviction offloads at the step start)
        blocks = self._cum(jn)
        alloc = blocks - self._blocks_at(j)
        if alloc:
            kv.allocate(alloc, start)
            kv.note_peak()
        self.pos = jn
        self.pos_blocks = blocks
        sched.step_end = ends[jn]

    def _emit_plan(self, j: int, stop: float) -> None:
        """Timeline samples inside the stretch from step ``j`` up to ``stop`` (the
        state after each step's allocations)."""
        ends = self.ends
        cum0 = self._blocks_at(j)
        kv = self.kv
        cache = kv.cache
        free0 = kv.free
        kv0 = kv.running
        ev0 = cache.evictable
        sched = self.sched
        q, r = len(sched.waiting), len(sched.running)
        tiers = kv.tiers
        rec = self.rec
        rec.fit(stop)
        while rec.next_sample < stop:
            s = rec.next_sample
            i = bisect_right(ends, s)
            extra = self._cum(i) - cum0
            evicted = extra - free0 if extra > free0 else 0
            if tiers is None:
                rec.add((q, r, kv0 + extra, ev0 - evicted))
            else:
                rec.add((q, r, kv0 + extra, ev0 - evicted, *tiers.sizes()))
