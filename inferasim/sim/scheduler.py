"""One serving replica: a vLLM-v1-style continuous-batching scheduler.

Each engine step, in this order:

1. every decoding sequence gets one token (the *decode group*);
2. sequences still prefilling get chunks of their remaining tokens, in
   admission order, within ``max_batched_tokens`` (chunked prefill);
3. if the new KV blocks all of that needs exceed the free memory (free
   blocks plus evictable cached blocks), the most recently admitted running
   sequence is preempted (its blocks released, its progress recomputed
   later from the front of the waiting queue) until it fits; a step with a
   preemption admits nobody;
4. waiting requests are admitted first come first served while there is
   token budget, a free sequence slot and KV memory for their first chunk.
   Admission looks the prompt up in the prefix cache: the leading run of
   resident full blocks is reused (at most ``(tokens - 1) // block_size``
   blocks, so at least one token is computed, as vLLM does).

A sequence holds ``ceil(computed_tokens / block_size)`` blocks, allocated
when a chunk or decode token is scheduled. A full prompt block with a hash
id enters the prefix cache when the step that computes its last token ends.
A prefill that reaches the end of its tokens samples a token (the first one
gives the TTFT); every later step of the sequence is a decode step.

With KV tiers (:mod:`inferasim.sim.tiers`) admission continues the cached
run in the lower tiers: a request whose blocks must be loaded is admitted
holding its memory but waits (state ``LOADING``, no chunk) until its last
transfer is delivered, then joins the first step starting after that;
blocks evicted from HBM are offloaded at the start of the step that needs
them. While loads are in flight the replica runs one step at a time (a
delivery is new prefill work), and with nothing else to run it idles until
the next delivery or arrival.

The decode group is kept as aggregates (count, total context, a global
decode-step counter, a heap of finish steps and a histogram of block
boundary phases) so a step costs O(1) in the number of decoding sequences,
and a stretch of pure-decode steps can be priced and applied in one jump.
"""

from __future__ import annotations

import heapq
import math
import struct
from array import array
from collections import deque
from typing import Any

import numpy as np

from inferasim.sim._roofline_kernel import RooflineKernel
from inferasim.sim.cache import BlockCache
from inferasim.sim.tiers import ReplicaTiers

# Internal: the public API is inferasim.sim.Simulator.
__all__: list[str] = []

WAITING, PREFILL, DECODE, DONE, LOADING = 0, 1, 2, 3, 4
# disaggregation: prefill done, KV held for the handoff (prefill instance); KV
# delivered, waiting to join the decode batch (decode instance)
HANDOFF, READY = 5, 6

# Runs of up to this many decode steps are priced with scalar cost calls (cheaper
# than one array call's fixed overhead); the cost protocol makes both equal.
_SCALAR_STEPS = 64

# Block sizes above this keep the decode group's phase histogram in a dict
# (sized by the phases in use, not by the block size: 2**24 would be 128 MiB).
_DENSE_PHASES = 1 << 16

# Decode-step ends kept as Python floats before older ones move to an array.
_DEND_KEEP = 1 << 14

# A stretch runs through at most this many finishes (each costs a little Python;
# 2 when the replica's last stretch ran at most 64 steps).
_MAX_FINISHES = 8


# Typed copies of the bisect module's functions: compiled, each is a native loop
# over unboxed ints or floats (the module's C functions compare boxed objects).
def _bisect_right(a: list[int], x: int) -> int:
    """``bisect.bisect_right`` on a list of ints (a native loop when compiled)."""
    lo, hi = 0, len(a)
    while lo < hi:
        mid = (lo + hi) >> 1
        if x < a[mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _bisect_right_f(a: list[float], x: float) -> int:
    """``bisect.bisect_right`` on a list of floats."""
    lo, hi = 0, len(a)
    while lo < hi:
        mid = (lo + hi) >> 1
        if x < a[mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _bisect_left_f(a: list[float], x: float) -> int:
    """``bisect.bisect_left`` on a list of floats."""
    lo, hi = 0, len(a)
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _smallest_valid(
    heap: list[tuple[int, int, int, Seq]], k: int
) -> list[tuple[int, int, int, Seq]]:
    """Up to ``k`` smallest valid entries of a binary heap, in order, without popping."""
    if k == 2 and len(heap) > 2:  # the second smallest is a child of the root
        a, b = heap[1], heap[2]
        second = a if a < b else b
        s0, s1 = heap[0][3], second[3]
        if (
            s0.state == DECODE
            and s0.epoch == heap[0][2]
            and s1.state == DECODE
            and s1.epoch == second[2]
        ):
            return [heap[0], second]
    if len(heap) <= 2 * k:
        return [e for e in sorted(heap) if e[3].state == DECODE and e[3].epoch == e[2]][:k]
    out: list[tuple[int, int, int, Seq]] = []
    cand = [(heap[0], 0)]
    n = len(heap)
    while cand and len(out) < k:
        entry, i = heapq.heappop(cand)
        seq = entry[3]
        if seq.state == DECODE and seq.epoch == entry[2]:
            out.append(entry)
        for c in (2 * i + 1, 2 * i + 2):
            if c < n:
                heapq.heappush(cand, (heap[c], c))
    return out


def _bad_step(cost: Any, dt: Any, pt: Any, pa: Any, b: Any, s: Any) -> ValueError:
    return ValueError(
        f"cost model {cost!r} returned a step time of {dt!r} ms for step_time_ms("
        f"prefill_tokens={pt!r}, prefill_attention={pa!r}, decode_seqs={b!r}, "
        f"decode_context={s!r}); step times must be finite and >= 0"
    )


class Seq:
    """Scheduler state of one request on its replica (internal)."""

    __slots__ = (
        "rid",
        "prompt",
        "output",
        "ids",
        "pblocks",
        "gen",
        "tokens",
        "computed",
        "hashed",
        "state",
        "d_join",
        "c_join",
        "g_join",
        "epoch",
        "first",
        "tok",
        "loads",
        "loads_left",
        "load_start",
        "load_end",
        "lower",
        "mixed",
    )

    def __init__(self, rid: int, prompt: int, output: int, ids: list[int], block_size: int):
        self.rid = rid
        self.prompt = prompt
        self.output = output if output > 0 else 1
        self.ids = ids  # hashable full prompt blocks only
        self.pblocks = -(-prompt // block_size)
        self.gen = 0
        self.tokens = prompt
        self.computed = 0
        self.hashed: list[int] = []
        self.state = WAITING
        self.d_join = self.c_join = self.g_join = 0
        self.epoch = 0
        self.first = True
        self.tok = 0.0  # time of the last token produced before the current decode episode
        # lower-tier loads of the current admission (tiers only)
        self.loads: list[tuple[int, int]] = []
        self.loads_left = 0
        self.load_start = self.load_end = 0.0
        self.lower: list[int] = []  # ids being loaded, in prompt order
        self.mixed = False  # HBM blocks after the first loaded one


class Outputs:
    """Per-request result columns shared by all replicas (compact arrays)."""

    def __init__(self, n: int, tiers: int = 0) -> None:
        nan = array("d", [float("nan")])
        zero = array("q", [0])
        # blocks hit in each lower tier at the first admission; time waiting for loads
        self.tier_hits = [zero * n for _ in range(tiers)]
        self.load_ms = array("d", [0.0]) * n if tiers else array("d")
        self.replica = array("q", [-1]) * n
        self.scheduled = nan * n
        self.first_token = nan * n
        self.finish = nan * n
        self.cached_blocks = zero * n
        self.cached_tokens = zero * n
        self.computed = zero * n
        self.preemptions = zero * n
        # largest gap between consecutive tokens outside decode episodes (a token
        # sampled by a recompute after preemption); episodes are added at the end
        self.max_gap = nan * n
        # disaggregation
        self.decode_replica = array("q", [-1]) * n
        self.xfer_start = nan * n
        self.delivered = nan * n
        self.decode_start = nan * n


class Replica:
    """One engine: waiting queue, running batch, block cache, clock.

    The engine calls :meth:`advance` to bring the replica up to a time and
    :meth:`arrive` to enqueue a routed request. Internal; see
    :class:`inferasim.sim.Simulator` for the parameters.
    """

    def __init__(
        self,
        index: int,
        *,
        cost: Any,
        block_size: int,
        capacity: int,
        max_num_seqs: int,
        max_batched_tokens: int,
        chunked_prefill: bool,
        eviction: str,
        out: Outputs,
        sample_ms: float,
        jump: bool,
        plan_cap: int = 4096,
        role: str = "both",
        tiers: ReplicaTiers | None = None,
        write_through: bool = False,
        load_policy: str = "faster",
    ) -> None:
        self.index = index
        # "both" (aggregated), "prefill" (hands sequences off after their first
        # token, see handoffs) or "decode" (receives them through deliver)
        self.role = role
        # (prefill done? (None: preempted), seq, time)
        self.handoffs: list[tuple[bool | None, Seq, float]] = []
        self.held = 0  # (prefill) blocks of handed-off KV held until delivered
        # closed loop: the engine's requests whose finish it waits for, and those
        # finished since it last looked
        self.watch: set[int] | None = None
        self.finished: list[int] = []
        self.stalled = False  # work waits but nothing can run (KV held or reserved)
        self.n_ready = 0  # delivered sequences in the waiting queue
        self.cost_model = cost
        self.cost = cost.step_time_ms
        run = getattr(cost, "_decode_run", None)
        self.decode_run = run if callable(run) else self._decode_run
        # the cost model's own run prices long runs as fast as the numpy path
        self.long_runs = callable(run)
        dt = getattr(cost, "_decode_dt", None)
        self.decode_dt = dt if callable(dt) else self._decode_dt
        # the roofline model's formulas, called natively (same step times, bit for bit)
        native = getattr(cost, "_native_kernel", None)
        self.kernel: RooflineKernel | None = native() if callable(native) else None
        self.bs = block_size
        self.capacity = capacity
        self.max_seqs = max_num_seqs
        self.max_tokens = max_batched_tokens
        self.chunked = chunked_prefill
        self.cache = BlockCache(eviction)
        self.out = out
        self.jump = jump
        self.plan_cap = plan_cap if jump else 1
        # lower KV tiers (a ReplicaTiers with at least one tier holding blocks, or None)
        self.tiers: ReplicaTiers | None = tiers
        self.write_through = write_through and tiers is not None
        self.load_always = load_policy == "always"
        self.step0 = float(cost.step_time_ms(0, 0, 0, 0)) if tiers is not None else 0.0
        self.n_loading = 0  # sequences admitted and waiting for loads
        # a shared tier another replica writes may let a waiting request in at any step
        self.coupled = False
        self.idle_wait = False  # nothing can run before a load arrives (clock = then)
        # queues
        self.waiting: deque[Seq] = deque()
        self.running: dict[Seq, None] = {}  # admission order
        self.prefilling: list[Seq] = []
        self.n_private = 0
        # decode group aggregates
        self.B = 0
        self.S = 0
        self.D = 0
        # (a list when dense, else empty and the histogram in the dict sphase)
        self.phase: list[int] = [0] * block_size if block_size <= _DENSE_PHASES else []
        self.sphase: dict[int, int] | None = None if block_size <= _DENSE_PHASES else {}
        self.heap: list[tuple[int, int, int, Seq]] = []
        # end time of decode step d (d = 1, 2, ...; index 0 unused) and the decode
        # episodes (request, d_join, d_leave, time of the token before d_join + 1):
        # a sequence's inter-token gaps in an episode are the durations of steps
        # d_join + 1 .. d_leave (it is in every one, so they run back to back)
        # (the ends of steps dend_base.. in a list, the earlier ones moved to dend_old
        # as C doubles: 8 bytes a step, see _archive_dend)
        self.dend: list[float] = [0.0]
        self.dend_old = array("d")
        self.dend_base = 0
        self.ep_rid = array("q")
        self.ep_a = array("q")
        self.ep_b = array("q")
        self.ep_tok = array("d")
        # current step
        self.clock = 0.0
        self.in_step = False
        self.step_end = 0.0
        self.cur_chunks: list[tuple[Seq, int]] = []
        self.cur_B = 0
        self.p_K = 0
        self.p_pos = 0
        # ends of the steps priced so far (lazily)
        self.p_ends: list[float] = []
        self.p_cum: list[int] = []  # blocks of steps 1..j+1
        self.p_fsteps: list[int] = []
        self.p_fi = 0
        # lazy pricing: step j decodes B0 - g sequences with S0 - gctx + (B0 - g) * j
        # context, g (gctx) the count (context) of p_fins entries with f < j
        self.p_t = 0.0
        self.p_B0 = 0
        self.p_S0 = 0
        self.p_fins: list[tuple[int, int]] = []
        self.p_gi = 0
        self.p_g = 0
        self.p_gctx = 0
        self.p_chunk = 8
        self.p_used = 0  # steps of the last stretch (to size the first pricing chunk)
        # during a stretch, routing-visible state (KV use, cache content, queue)
        # changes only at a step starting after h_strict or ending at/after h_weak
        self.h_weak = 0.0
        self.h_strict = 0.0
        # observable load
        self.outstanding = 0
        self.queued_blocks = 0
        # statistics
        self.requests = 0
        self.preemptions = 0
        self.steps = 0
        self.busy = False
        self.busy_start = 0.0
        self.busy_ms = 0.0
        self.peak_running = 0
        self.peak_kv = 0
        # timeline
        self.period = sample_ms
        self.t0 = 0.0
        self.sample_i = 0
        self.next_sample = 0.0
        self.tl: list[tuple[Any, ...]] = []
        self.peers: list[Replica] = [self]  # replicas sharing the timeline grid
        self.tl_cap = 1 << 62  # samples per replica before the grid coarsens

    # ---------------------------------------------------------------- observe
    @property
    def kv_running(self) -> int:
        """Blocks held by running sequences (private plus pinned cached)."""
        return self.n_private + self.cache.pinned

    def _emit(self, t: float) -> None:
        """Record timeline samples strictly before ``t`` with the current state."""
        tl = self.tl
        if self.sample_i + (t - self.next_sample) / self.period >= self.tl_cap:
            self._fit(t)
        row: tuple[int, ...] = (
            len(self.waiting),
            len(self.running),
            self.n_private + self.cache.pinned,
            self.cache.evictable,
        )
        if self.tiers is not None:
            row = (*row, *self.tiers.sizes())
        while self.next_sample < t:
            tl.append((self.next_sample, *row))
            self.sample_i += 1
            if self.sample_i >= self.tl_cap:
                self._coarsen()
            self.next_sample = self.t0 + self.sample_i * self.period

    def _fit(self, t: float) -> None:
        """Coarsen the grid up front when sampling up to ``t`` would pass the cap."""
        need = self.sample_i + (t - self.next_sample) / self.period
        if need >= self.tl_cap and need < math.inf:
            factor = 2
            while need / factor >= self.tl_cap:
                factor *= 2
            self._coarsen(factor)

    def _coarsen(self, factor: int = 2) -> None:
        """Multiply every replica's sampling period by ``factor`` (a power of two),
        keeping every ``factor``-th sample.

        Row ``k`` of a replica's timeline is sample ``k`` of the grid
        ``t0 + k * period``, so keeping the rows ``k % factor == 0`` leaves the
        grid of ``factor`` times the period: the timeline stays regular and the
        same on all replicas, and never exceeds ``tl_cap`` rows a replica.
        """
        for rep in self.peers:
            rep.tl[:] = rep.tl[::factor]
            rep.sample_i = len(rep.tl)
            rep.period *= factor
            rep.next_sample = rep.t0 + rep.sample_i * rep.period

    # ---------------------------------------------------------------- driving
    def arrive(self, seq: Seq, t: float) -> None:
        """Enqueue a request routed here at time ``t`` (after ``advance(t)``)."""
        if self.next_sample < t:
            self._emit(t)
        if self.p_K:
            self.p_K = self.p_pos + 1  # the queue changed: the stretch ends here
            self.h_weak = self.step_end
            self.h_strict = math.inf
        if not self.in_step and (self.idle_wait or not (self.running or self.waiting)):
            self.clock = t  # (idle_wait: after advance(t) the planned retry is at or after t)
            self.idle_wait = False
        self.waiting.append(seq)
        self.queued_blocks += seq.pblocks
        self.outstanding += seq.prompt + seq.output
        self.requests += 1
        self.out.replica[seq.rid] = self.index

    def advance(self, until: float) -> None:
        """Complete every step ending at or before ``until``; start every step
        starting before it."""
        while True:
            if self.in_step:
                if self.step_end > until:
                    return
                if self.p_K and self.p_pos < self.p_K - 1:
                    self._progress(until)
                    if self.step_end > until:
                        return
                self._complete()
            if self.clock >= until or not (self.running or self.waiting) or self.stalled:
                return
            self._start_step()

    # ------------------------------------------------------------- scheduling
    def _allocate(self, n: int) -> None:
        cache = self.cache
        free = self.capacity - self.n_private - len(cache.ref)
        self.n_private += n
        if n > free:
            if self.tiers is None:
                cache.evict(n - free)
            else:  # offload on evict, at the start of the step that needs the blocks
                gone: list[int] = []
                cache.evict(n - free, gone)
                self.tiers.offload(self.clock, gone)

    def _release(self, seq: Seq, computed: int) -> None:
        held = -(-computed // self.bs)
        if seq.hashed:
            self.cache.release(seq.hashed)
        self.n_private -= held - len(seq.hashed)
        seq.hashed = []
        del self.running[seq]

    def _leave_decode(self, seq: Seq) -> int:
        """Take a decoding sequence out of the decode group; return its computed tokens."""
        D = self.D
        k = D - seq.d_join
        computed = seq.c_join + k
        seq.gen = seq.g_join + k
        if k:
            self.ep_rid.append(seq.rid)
            self.ep_a.append(seq.d_join)
            self.ep_b.append(D)
            self.ep_tok.append(seq.tok)
            seq.tok = self.dend[D - self.dend_base]
        self.B -= 1
        self.S -= computed + 1
        self._phase_add((seq.d_join - seq.c_join) % self.bs, -1)
        return computed

    def _preempt_last(self) -> None:
        seq = next(reversed(self.running))
        if seq.state == DECODE:
            computed = self._leave_decode(seq)
        elif seq.state == LOADING:  # its loads are dropped (the blocks are lost)
            computed = seq.computed
            self.tiers.cancel(self.clock, seq.loads)  # type: ignore[union-attr]
            seq.loads = []
            self.n_loading -= 1
        else:
            computed = seq.computed
            self.prefilling.remove(seq)
        self._release(seq, computed)
        seq.state = WAITING
        seq.epoch += 1
        seq.computed = 0
        seq.tokens = seq.prompt + seq.gen
        self.outstanding += min(computed, seq.prompt)
        self.queued_blocks += seq.pblocks
        self.preemptions += 1
        self.out.preemptions[seq.rid] += 1
        self.waiting.appendleft(seq)
        if self.role == "prefill" and seq.output > 1:  # its KV is gone: so is its handoff
            self.handoffs.append((None, seq, self.clock))

    def _start_step(self) -> None:
        t = self.clock
        if self.next_sample < t:
            self._emit(t)
        if not self.busy:
            self.busy = True
            self.busy_start = t
        self.idle_wait = False
        if self.n_loading:
            for seq in self.tiers.collect(t):  # type: ignore[union-attr]
                self._loaded(seq)
        bs = self.bs
        cache = self.cache
        preempted = False
        while True:
            B = self.B
            budget = self.max_tokens - B
            need = self._phase_at(self.D % bs) if B else 0
            chunks = []
            for seq in self.prefilling:
                if budget <= 0:
                    break
                c = seq.computed
                rem = seq.tokens - c
                n = rem if rem < budget else budget
                need += (c + n + bs - 1) // bs - (c + bs - 1) // bs
                chunks.append((seq, n))
                budget -= n
            avail = self.capacity - self.n_private - cache.pinned
            if need <= avail:
                break
            self._preempt_last()
            preempted = True
        if not preempted and self.waiting:
            need += self._admit(t, chunks, budget, avail - need)
            B = self.B  # (sequences whose KV was delivered join the decode batch)
        evicted = False
        if need:
            ev0 = cache.evictions
            self._allocate(need)
            evicted = cache.evictions != ev0
        kv = self.n_private + cache.pinned
        if kv > self.peak_kv:
            self.peak_kv = kv
        if not chunks and not B:
            if self.n_loading:
                # nothing runs before a load arrives: retry then (or at an arrival)
                self.clock = self.tiers.next_delivery(t)  # type: ignore[union-attr]
                self.idle_wait = True
                return
            if preempted and self.role != "both":  # memory was freed: admit again
                self._start_step()
                return
            if self.role == "both":
                raise RuntimeError("internal error: a step with nothing to run")
            # a prefill instance whose memory is held by handed-off KV, or a decode
            # instance whose memory is reserved for KV in flight: wait for it
            self.stalled = True
            self.busy = False
            self.busy_ms += t - self.busy_start
            return
        self.in_step = True
        self.cur_B = B
        self.steps += 1
        if chunks:
            pt = pa = 0
            for seq, n in chunks:
                pt += n
                pa += n * seq.computed + n * (n + 1) // 2
            self.cur_chunks = chunks
            kernel = self.kernel
            if kernel is not None:
                dt = kernel.step_ints(pt, pa, B, self.S)
            else:
                dt = float(self.cost(pt, pa, B, self.S))
            e = t + dt
            if not (dt >= 0.0 and e < math.inf):  # NaN fails too; the end must be finite
                raise _bad_step(self.cost_model, dt, pt, pa, B, self.S)
            self.step_end = e
            return
        self.cur_chunks = []
        # After a preemption, or an eviction while requests wait (it can shorten
        # their cached prefix and so their memory need), the next step must be
        # scheduled afresh: no stretch; nor while loads are in flight (a delivery
        # is new prefill work, like an arrival), nor while requests wait behind a
        # shared tier (another replica's write may let one in at the next step),
        # nor while requests wait and transfers are in flight (their loads' price
        # falls as the links drain).
        single = (
            preempted
            or (self.waiting and (evicted or self.coupled))
            or self.n_loading
            # (transfers in flight: a waiting request's load-or-recompute choice,
            # priced on the links' backlog, changes from one step start to the next)
            or (self.waiting and self.tiers is not None and self.tiers.in_flight())
        )
        self._plan(t, 1 if single else self.plan_cap)

    def _admit(self, t: float, chunks: list[tuple[Seq, int]], budget: int, avail: int) -> int:
        """Admit waiting requests FCFS while budget, slots and memory allow.

        Returns the new blocks the admitted first chunks need."""
        bs = self.bs
        cache = self.cache
        waiting, running = self.waiting, self.running
        out = self.out
        decoding = self.B > 0
        tiers = self.tiers
        need = 0
        if self.n_ready:
            # sequences whose KV was delivered join the decode batch first: their
            # memory is reserved, so they never wait behind a request that needs more
            for seq in [x for x in waiting if x.state == READY]:
                if budget <= 0 or len(running) >= self.max_seqs:
                    break
                waiting.remove(seq)
                self.n_ready -= 1
                c = seq.computed
                # the block of this step's token was reserved with the transfer: it
                # is allocated with the step's other new blocks
                extra = (c + bs) // bs - (c + bs - 1) // bs
                self.n_private -= extra
                need += extra
                budget -= 1
                running[seq] = None
                self._join_decode(seq, c)
                out.decode_start[seq.rid] = t
        while waiting and budget > 0 and len(running) < self.max_seqs:
            seq = waiting[0]
            if seq.state == READY:
                break
            if seq.epoch and self.role == "prefill" and seq.pblocks > self.capacity - self.held:
                # a preempted prompt waits until it fits beside the handed-off KV held
                # here (else, with zero-time steps, preempt-recompute cycles at one
                # instant never end; with others they only waste time)
                break
            limit = (seq.tokens - 1) // bs
            if limit > len(seq.ids):
                limit = len(seq.ids)
            m, revive = cache.match(seq.ids, limit) if limit > 0 else (0, 0)
            if tiers is not None and m < limit:
                r, counts, mid, more = self._lower_run(seq.ids, m, limit, t)
                if r > m:
                    L = r - m - len(mid)  # blocks to load
                    if L + revive + more > avail:
                        break
                    waiting.popleft()
                    self._admit_loading(seq, t, m, r, counts, mid)
                    avail -= L + revive + more
                    need += L
                    self.queued_blocks -= seq.pblocks
                    self.outstanding -= r * bs
                    continue
            c = m * bs
            rem = seq.tokens - c
            if rem <= budget or self.chunked:
                n = rem if rem <= budget else budget
            elif not decoding and not chunks:
                n = rem  # a whole prompt larger than the budget runs alone
            else:
                break
            new = (c + n + bs - 1) // bs - m
            if new + revive > avail:
                break
            waiting.popleft()
            if m:
                seq.hashed = seq.ids[:m]
                cache.acquire(seq.hashed)
            avail -= new + revive
            need += new
            seq.computed = c
            seq.state = PREFILL
            running[seq] = None
            self.prefilling.append(seq)
            chunks.append((seq, n))
            budget -= n
            self.queued_blocks -= seq.pblocks
            self.outstanding -= c
            if seq.first:
                seq.first = False
                rid = seq.rid
                out.scheduled[rid] = t
                out.cached_blocks[rid] = m
                out.cached_tokens[rid] = c
            if self.role == "prefill" and seq.output > 1:  # (again after a preemption)
                self.handoffs.append((False, seq, t))
        if len(running) > self.peak_running:
            self.peak_running = len(running)
        return need

    def _lower_run(
        self, ids: list[int], m: int, limit: int, t: float
    ) -> tuple[int, list[int], list[int], int]:
        """Continue a leading HBM run of ``m`` blocks in the lower tiers.

        Returns ``(r, counts, mid, revive)``: the run's end (``m`` when loading
        is not worth it), blocks to load from each tier, HBM blocks found
        after the first lower-tier block (reused in place) and how many of
        those are evictable now.
        """
        tiers = self.tiers
        assert tiers is not None
        objs: list[Any] = ids
        if tiers.where(objs[m]) < 0:  # (ids[m] is not in HBM: the usual miss below it too)
            return m, [0] * tiers.n, [], 0
        ref = self.cache.ref
        r, counts, mid = tiers.run(ids, m, limit, ref)
        if not self.load_always:
            # load when that is faster than recomputing from the first loaded block (m)
            bs = self.bs
            n = (r - m) * bs
            c0 = m * bs
            redo = float(self.cost(n, n * c0 + n * (n + 1) // 2, 0, 0)) - self.step0
            if not tiers.load_estimate_ms(t, counts) < redo:
                return m, counts, [], 0
        revive = 0
        mids: list[Any] = mid
        for h in mids:
            if not ref[h]:
                revive += 1
        return r, counts, mid, revive

    def tier_match(self, ids: list[int], limit: int) -> list[int]:
        """Blocks of the reusable run of ``ids[:limit]`` by tier: ``[hbm, tier 0, ...]``
        (what admission would find with ``load_policy="always"``; routing use)."""
        ref = self.cache.ref
        objs: list[Any] = ids  # (as objects: looked up without re-boxing)
        m = 0
        while m < limit and objs[m] in ref:
            m += 1
        tiers = self.tiers
        assert tiers is not None
        if m == limit:
            return [m] + tiers.zeros
        if tiers.where(objs[m]) < 0:  # (the usual miss: the run ends in HBM)
            return [m] + tiers.zeros
        _, counts, mid = tiers.run(ids, m, limit, ref)
        return [m + len(mid)] + counts

    def _admit_loading(
        self, seq: Seq, t: float, m: int, r: int, counts: list[int], mid: list[int]
    ) -> None:
        """Admit ``seq`` reusing ``r`` blocks: ``m`` leading and ``mid`` in HBM (pinned
        now), the rest loaded from the lower tiers (private blocks until delivered)."""
        bs = self.bs
        cache = self.cache
        tiers = self.tiers
        assert tiers is not None
        ids = seq.ids
        hashed = ids[:m]
        if mid:
            hashed = hashed + mid
        if hashed:
            cache.acquire(hashed)
        seq.hashed = hashed
        ref = cache.ref
        objs: list[Any] = ids[m:r]  # (as objects: looked up without re-boxing)
        lower: list[Any] = [h for h in objs if h not in ref]
        by_tier: list[list[Any]] = [[] for _ in range(tiers.n)]
        for h in lower:
            by_tier[tiers.where(h)].append(h)
        for k, hs in enumerate(by_tier):
            if hs:
                tiers.take(k, hs)
        seq.lower = lower
        seq.mixed = bool(mid)
        seq.loads = tiers.start_loads(t, counts, seq)
        seq.loads_left = len(seq.loads)
        seq.load_start = seq.load_end = t
        seq.computed = r * bs
        seq.state = LOADING
        self.running[seq] = None
        self.n_loading += 1
        if seq.first:
            seq.first = False
            rid = seq.rid
            out = self.out
            out.scheduled[rid] = t
            out.cached_blocks[rid] = r
            out.cached_tokens[rid] = r * bs
            for k, c in enumerate(counts):
                if c:
                    out.tier_hits[k][rid] = c

    def _loaded(self, seq: Seq) -> None:
        """Every load of ``seq`` was delivered: cache the blocks, start its prefill."""
        seq.loads = []
        self.n_loading -= 1
        k = self.cache.register_run(seq.lower, seq.hashed)
        self.n_private -= k
        if seq.mixed:  # hold the blocks in prompt order (tail-first release)
            held = set(seq.hashed)
            seq.hashed = [h for h in seq.ids[: seq.computed // self.bs] if h in held]
        seq.lower = []
        self.out.load_ms[seq.rid] += seq.load_end - seq.load_start
        seq.state = PREFILL
        self.prefilling.append(seq)

    def _plan(self, t: float, cap: int) -> None:
        """Price a pure-decode stretch starting at ``t`` (at most ``cap`` steps).

        Nothing but decoding happens in a stretch: no prefill, admission or
        preemption. It ends at the first finish when requests wait (a finish
        frees a slot and memory for them), else when the last sequence
        finishes (sequences finishing on the way leave the decode group at
        their step); before the first step whose new blocks would not fit
        (before the first eviction when requests wait: an eviction can change
        what they may reuse); or after ``cap`` steps. Arrivals routed here
        cut it short (:meth:`arrive`). Step times are priced lazily, only as
        far as the routing horizon and the times asked for need
        (:meth:`_price`), as sequential sums equal to the plain loop's
        ``t += dt``.
        """
        B, S, D = self.B, self.S, self.D
        heap = self.heap
        while True:  # drop stale finish entries
            _, _, ep, seq = heap[0]
            if seq.state == DECODE and seq.epoch == ep:
                break
            heapq.heappop(heap)
        K = heap[0][0] - D  # steps up to and including the first finish
        fins: list[tuple[int, Seq]] = []
        if K < cap and not self.waiting:
            # continue past the next few finishes (found by walking the heap)
            # fewer when arrivals cut this replica's stretches short anyway
            valid = _smallest_valid(heap, _MAX_FINISHES if self.p_used > 64 else 2)
            K = valid[-1][0] - D
            if K > cap:
                K = cap
            # (step at whose end the sequence finishes, sequence), before the last step
            fins = [(e[0] - D - 1, e[3]) for e in valid if e[0] - D - 1 < K - 1]
        if K > cap:
            K = cap
        if K == 1:
            self.p_K = 0
            self.step_end = self._checked_run([], t, B, S, 1)
            return
        # new blocks of steps 1..K-1: decode step d allocates phase[d % bs], minus the
        # sequences that finished before it
        bs = self.bs
        lo = (D + 1) % bs
        if lo + K - 1 <= bs:
            counts = self._phases(lo, lo + K - 1)
        elif K - 1 <= bs:  # wraps once: O(K), also for a sparse histogram
            counts = self._phases(lo, bs) + self._phases(0, lo + K - 1 - bs)
        else:
            counts = ((self._phases(lo, bs) + self._phases(0, lo)) * -(-(K - 1) // bs))[: K - 1]
        for f, seq in fins:
            first = f + 1 + ((seq.d_join - seq.c_join - D - f - 1) % bs)
            for x in range(first - 1, K - 1, bs):
                counts[x] -= 1
        cum = counts  # (summed in place: counts is a copy)
        acc = 0
        for x in range(len(cum)):
            acc += cum[x]
            cum[x] = acc
        free = self.capacity - self.n_private - len(self.cache.ref)
        limit = free if self.waiting else free + self.cache.evictable
        if cum[-1] > limit:  # (blocks freed by finishes ignored: a shorter stretch)
            K = _bisect_right(cum, limit) + 1
            if K == 1:
                self.p_K = 0
                self.step_end = self._checked_run([], t, B, S, 1)
                return
            fins = [x for x in fins if x[0] < K - 1]
        if fins:
            # sequences finishing at step f leave the decode group from step f + 1
            self.p_fins = [(f, seq.c_join + D - seq.d_join + 1) for f, seq in fins]
            self.p_fsteps = sorted({f for f, _ in fins})
        else:
            self.p_fins = []
            self.p_fsteps = []
        self.p_fi = 0
        self.p_t = t
        self.p_B0 = B
        self.p_S0 = S
        self.p_gi = self.p_g = self.p_gctx = 0
        # first chunk: what the previous stretch used (arrivals cut stretches at a
        # similar pace), at least 8 steps
        used = self.p_used
        self.p_chunk = used if used > 8 else 8
        self.p_ends = []
        self.p_cum = cum if len(cum) == K - 1 else cum[: K - 1]
        self.p_K = K
        self.p_pos = 0
        self._set_horizon()  # (prices the steps it needs: at least the first one)
        self.step_end = self.p_ends[0]

    def _phase_at(self, i: int) -> int:
        """Decode sequences whose context is at block phase ``i``."""
        sphase = self.sphase
        return self.phase[i] if sphase is None else sphase.get(i, 0)

    def _phase_add(self, i: int, delta: int) -> None:
        """Add ``delta`` decode sequences at block phase ``i``."""
        sphase = self.sphase
        if sphase is None:
            self.phase[i] += delta
        else:
            sphase[i] = sphase.get(i, 0) + delta

    def _phases(self, lo: int, hi: int) -> list[int]:
        """The phase histogram's entries ``lo..hi-1`` (a copy)."""
        sphase = self.sphase
        if sphase is None:
            return self.phase[lo:hi]
        return [sphase.get(i, 0) for i in range(lo, hi)]

    def _decode_run(self, ends: Any, e: float, b: int, s: int, k: int) -> float:
        """Append the ends of ``k`` decode steps of ``b`` sequences with ``s + b * j``
        context (step ``j``) after ``e``; return the last (any cost model)."""
        cost = self.cost
        for _ in range(k):
            dt = float(cost(0, 0, b, s))
            if not 0.0 <= dt < math.inf:
                raise _bad_step(self.cost_model, dt, 0, 0, b, s)
            e += dt
            ends.append(e)
            s += b
        return e

    def _checked_run(self, ends: list[float], e: float, b: int, s: int, k: int) -> float:
        """:attr:`decode_run` (possibly the cost model's own, or its kernel's) with its
        end checked: finite and not before ``e`` (each step of our own run is checked too)."""
        kernel = self.kernel
        if kernel is not None:
            end = kernel.run(ends, e, b, s, k)
        else:
            end = self.decode_run(ends, e, b, s, k)
        if not e <= end < math.inf:
            raise _bad_step(self.cost_model, f"{end - e!r} in total over {k} step(s)", 0, 0, b, s)
        return end

    def _decode_dt(self, b: np.ndarray, c: np.ndarray) -> np.ndarray:
        """Times of decode steps of ``b`` sequences with ``c`` context (any cost model)."""
        dt = np.array(self.cost(0, 0, b, c), dtype=np.float64)
        if dt.shape != b.shape:
            dt = np.array(np.broadcast_to(dt, b.shape))
        return dt

    def _price(self, j: int, until: float = 0.0) -> None:
        """Price the stretch's steps up to ``j`` (and a few more, growing geometrically).

        Sequential sums from the stretch start, the plain loop's ``t += dt``.
        """
        ends = self.p_ends
        L = len(ends)
        if j < L:
            return
        K = self.p_K
        target = j + 1
        if target < L + self.p_chunk:
            target = L + self.p_chunk
        self.p_chunk *= 2
        if until > 0.0 and L > 1:  # enough steps to reach ``until`` at the recent pace
            pace = (ends[-1] - self.p_t) / L
            if pace > 0.0:
                more = (until - ends[-1]) / pace
                if more > K:
                    target = K
                elif L + int(more * 1.1) + 4 > target:
                    target = L + int(more * 1.1) + 4
        if target > K:
            target = K
        e = ends[-1] if L else self.p_t
        fins = self.p_fins
        nf = len(fins)
        gi, g, gctx = self.p_gi, self.p_g, self.p_gctx
        B0, S0 = self.p_B0, self.p_S0
        if target - L > _SCALAR_STEPS and not self.long_runs:
            # one elementwise call, then sequential sums
            jj = np.arange(L, target, dtype=np.int64)
            if nf:
                fs = np.array([f for f, _ in fins], dtype=np.int64)
                ctx = np.array([x for _, x in fins], dtype=np.int64)
                gone = fs.searchsorted(jj, "left")
                gone_ctx = np.concatenate(([0], ctx.cumsum()))[gone]
                b_arr = B0 - gone
                s_arr = S0 + B0 * jj - gone_ctx - jj * gone
            else:
                b_arr = np.full(target - L, B0, dtype=np.int64)
                s_arr = S0 + B0 * jj
            dt = self.decode_dt(b_arr, s_arr)
            if not (dt.min() >= 0.0 and dt.max() < math.inf):  # NaN fails both
                i = int(np.flatnonzero(~((dt >= 0.0) & (dt < math.inf)))[0])
                raise _bad_step(self.cost_model, float(dt[i]), 0, 0, int(b_arr[i]), int(s_arr[i]))
            dt[0] += e
            dt = dt.cumsum()
            if not dt[-1] < math.inf:
                raise _bad_step(self.cost_model, "a run summing beyond float64", 0, 0, B0, S0)
            ends.extend(dt.tolist())
            return
        while L < target:
            while gi < nf and fins[gi][0] < L:
                g += 1
                gctx += fins[gi][1]
                gi += 1
            stop = fins[gi][0] + 1 if gi < nf else target
            if stop > target:
                stop = target
            b = B0 - g
            e = self._checked_run(ends, e, b, S0 - gctx + b * L, stop - L)
            L = stop
        self.p_gi, self.p_g, self.p_gctx = gi, g, gctx

    def _cum(self, j: int) -> int:
        """Blocks the stretch allocates in its steps 1..j."""
        return self.p_cum[j - 1] if j else 0

    def _set_horizon(self) -> None:
        """When the stretch next changes what a router sees (see ``needs_advance``).

        The routing state changes at the end of the first step with finishes
        (or of the stretch), ``weak``, and when a step after the first one
        that allocates starts, ``strict``. Step ends never decrease, so only
        the earlier of the two needs pricing: a later one is implied by it.
        """
        K = self.p_K
        w = K - 1
        if self.p_fi < len(self.p_fsteps):
            f = self.p_fsteps[self.p_fi]
            if f < w:
                w = f
        # the first step after p_pos that allocates is step i + 1 with cum[i] > _cum(p_pos)
        cum = self.p_cum
        pos = self.p_pos
        i = _bisect_right(cum, cum[pos - 1] if pos else 0)
        ends = self.p_ends
        if i >= w:  # t > ends[i] implies t >= ends[w]
            if w >= len(ends):
                self._price(w)
            self.h_weak = ends[w]
            self.h_strict = math.inf
            return
        if i + 1 >= len(ends):
            self._price(i + 1)
        strict = ends[i]
        self.h_strict = strict
        if ends[i + 1] > strict:  # then t >= ends[w] implies t > strict
            self.h_weak = ends[i + 1]
        else:  # zero-time steps: find ends[w] itself
            if w >= len(ends):
                self._price(w)
            self.h_weak = ends[w]

    def needs_advance(self, t: float) -> bool:
        """Whether ``advance(t)`` would change the queue, running set, KV use or cache.

        Inside a stretch only the decode progress (and so the outstanding
        tokens, see :meth:`outstanding_at`) moves between those events.
        """
        if self.p_K:
            return t >= self.h_weak or t > self.h_strict
        if self.in_step:
            return self.step_end <= t
        return self.clock < t and bool(self.running or self.waiting) and not self.stalled

    def wake(self) -> float:
        """Earliest ``t`` with ``needs_advance(t)`` True (state as it is now)."""
        if self.p_K:
            # h_weak < nextafter(h_strict) is h_weak <= h_strict (no double between)
            weak, strict = self.h_weak, self.h_strict
            return weak if weak <= strict else math.nextafter(strict, math.inf)
        if self.in_step:
            return self.step_end
        if (self.running or self.waiting) and not self.stalled:
            return math.nextafter(self.clock, math.inf)
        return math.inf

    def kv_at(self, t: float) -> int:
        """KV blocks held (private plus pinned) after ``advance(t)``, without
        advancing, or -1 when that needs the advance itself.

        Inside a stretch whose steps up to ``t`` neither end it nor end at
        ``t``, advancing applies the steps starting before ``t``: their
        allocations (read off the plan) and, on a decode instance (whose
        sequences hold private blocks only), the finishes of the steps ended
        before ``t``, each freeing the ``ceil(computed / block_size)`` blocks
        of its sequence (``computed = ctx + f`` for a plan entry ``(f, ctx)``,
        see :meth:`_plan`). The steps are priced as :meth:`_progress` prices
        them.
        """
        if not self.p_K:
            return self.n_private + self.cache.pinned if self.wake() > t else -1
        kv = self.n_private + self.cache.pinned
        if self.step_end > t:
            return kv
        K = self.p_K
        pos = self.p_pos
        if pos >= K - 1:  # (the stretch's last step ends by t)
            return -1
        ends = self.p_ends
        jn = self._step_at(t)
        if ends[jn] <= t:  # (a step ends at t, or the stretch by t: completed there)
            return -1
        if t >= self.h_weak:  # finishes before t
            if self.role != "decode":
                return -1
            bs = self.bs
            for f, ctx in self.p_fins:
                if f >= jn:
                    break
                if f >= pos:
                    kv -= (ctx + f + bs - 1) // bs
        return kv + self._cum(jn) - self._cum(pos) if jn > pos else kv

    def next_change(self) -> float:
        """Time of the next state change (a step due to start at ``clock`` changes
        the state at ``clock``; :meth:`wake` is just after it). Not after
        :meth:`wake`; ``inf`` when nothing is due."""
        if self.p_K:  # (a step starting at h_strict changes it then)
            weak, strict = self.h_weak, self.h_strict
            return weak if weak <= strict else strict
        if self.in_step:
            return self.step_end
        if (self.running or self.waiting) and not self.stalled:
            return self.clock
        return math.inf

    def outstanding_at(self, t: float) -> int:
        """Outstanding tokens at ``t`` when ``needs_advance(t)`` is False."""
        if not self.p_K:
            return self.outstanding
        done = _bisect_right_f(self.p_ends, t) - self.p_pos
        return self.outstanding - self.B * done if done > 0 else self.outstanding

    def _step_at(self, t: float) -> int:
        """The first step of the stretch ending at or after ``t`` (at most the
        last one), with the steps priced that far."""
        ends = self.p_ends
        K = self.p_K
        while ends[-1] < t and len(ends) < K:
            self._price(len(ends), t)
        jn = _bisect_left_f(ends, t)
        return jn if jn < K - 1 else K - 1

    def _progress(self, until: float) -> None:
        """Apply the stretch's steps that start before ``until``."""
        ends = self.p_ends
        jn = self._step_at(until)
        pos = self.p_pos
        if jn <= pos:
            return
        fsteps = self.p_fsteps
        while pos < jn:
            fi = self.p_fi
            f = fsteps[fi] if fi < len(fsteps) else jn
            if f >= jn:
                self._uniform(pos, jn)
                break
            if f > pos:
                self._uniform(pos, f)  # step f (with finishes) is running
            e = ends[f]
            if self.next_sample < e:
                self._emit(e)
            B = self.B
            D = self.D = self.D + 1
            self._append_dend(e)
            self.S += B
            self.outstanding -= B
            heap = self.heap
            while heap and heap[0][0] <= D:
                _, _, ep, seq = heapq.heappop(heap)
                if seq.state == DECODE and seq.epoch == ep:
                    self._finish(seq, self._leave_decode(seq), e)
            self.cur_B = self.B
            self.p_fi = fi + 1
            pos = f + 1  # start the next step
            self.clock = e
            cum = self.p_cum
            alloc = cum[f] - cum[f - 1] if f else cum[0]  # _cum(pos) - _cum(f)
            if alloc:
                self._allocate(alloc)
                kv = self.n_private + self.cache.pinned
                if kv > self.peak_kv:
                    self.peak_kv = kv
            self.steps += 1
            self.p_pos = pos
            self.step_end = ends[pos]
        self._set_horizon()

    def _uniform(self, j: int, jn: int) -> None:
        """Complete steps ``j..jn-1`` and start steps up to ``jn``: no finishes.

        With tiers, steps that evict (and so offload) are applied one
        allocating step at a time, each at its own start time, as the plain
        loop does.
        """
        if jn <= j:
            return
        if self.tiers is not None:  # (else _uniform_run)
            free = self.capacity - self.n_private - len(self.cache.ref)
            if self._cum(jn) - self._cum(j) > free:
                cum = self.p_cum
                while j < jn:
                    # the next step after j that allocates: step i with cum[i - 1] > _cum(j)
                    i = _bisect_right(cum, self._cum(j)) + 1
                    nxt = i if i < jn else jn
                    self._uniform_run(j, nxt)
                    j = nxt
                return
        self._uniform_run(j, jn)

    def _uniform_run(self, j: int, jn: int) -> None:
        ends = self.p_ends
        start = ends[jn - 1]
        if self.next_sample < start:
            self._emit_plan(j, jn, start)
        k = jn - j
        B = self.B
        self.D += k
        dend = self.dend
        dend.extend(ends[j:jn])  # (the same float objects)
        if len(dend) > _DEND_KEEP:
            self._archive_dend()
        self.S += B * k
        self.outstanding -= B * k
        self.steps += k
        self.clock = start  # (before allocating: an eviction offloads at the step start)
        cum = self.p_cum
        alloc = cum[jn - 1] - cum[j - 1] if j else cum[jn - 1]  # _cum(jn) - _cum(j), jn > j
        if alloc:
            self._allocate(alloc)
            kv = self.n_private + self.cache.pinned
            if kv > self.peak_kv:
                self.peak_kv = kv
        self.p_pos = jn
        self.step_end = ends[jn]

    def _emit_plan(self, j: int, jn: int, stop: float) -> None:
        """Timeline samples inside a stretch (state after each step's allocations)."""
        ends = self.p_ends
        cum0 = self._cum(j)
        cache = self.cache
        free0 = self.capacity - self.n_private - len(cache.ref)
        kv0 = self.n_private + cache.pinned
        ev0 = cache.evictable
        q, r = len(self.waiting), len(self.running)
        self._fit(stop)
        while self.next_sample < stop:
            s = self.next_sample
            i = _bisect_right_f(ends, s)
            extra = self._cum(i) - cum0
            evicted = extra - free0 if extra > free0 else 0
            if self.tiers is None:
                self.tl.append((s, q, r, kv0 + extra, ev0 - evicted))
            else:
                self.tl.append((s, q, r, kv0 + extra, ev0 - evicted, *self.tiers.sizes()))
            self.sample_i += 1
            if self.sample_i >= self.tl_cap:
                self._coarsen()
            self.next_sample = self.t0 + self.sample_i * self.period

    def _complete(self) -> None:
        """End the current step at ``step_end``."""
        e = self.step_end
        if self.next_sample < e:
            self._emit(e)
        self.clock = e
        self.in_step = False
        if self.p_K:
            self.p_used = self.p_K
            self.p_K = 0
        out = self.out
        B = self.cur_B
        D = self.D
        if B:
            D = self.D = D + 1
            self._append_dend(e)
            self.S += B
            self.outstanding -= B
            heap = self.heap
            while heap and heap[0][0] <= D:
                _, _, ep, seq = heapq.heappop(heap)
                if seq.state == DECODE and seq.epoch == ep:
                    self._finish(seq, self._leave_decode(seq), e)
        if self.cur_chunks:
            bs = self.bs
            cache = self.cache
            for seq, n in self.cur_chunks:
                c0 = seq.computed
                c = c0 + n
                seq.computed = c
                out.computed[seq.rid] += n
                P = seq.prompt
                if c0 < P:
                    self.outstanding -= (c if c < P else P) - c0
                ids = seq.ids
                if ids:
                    j0 = c0 // bs
                    j1 = c // bs
                    if j1 > j0 and j0 < len(ids):
                        k = cache.register_run(ids[j0:j1], seq.hashed, j0)
                        self.n_private -= k
                        if k and self.write_through:
                            self.tiers.write_through_blocks(e, seq.hashed[-k:])  # type: ignore[union-attr]
                if c == seq.tokens:
                    seq.gen += 1
                    self.outstanding -= 1
                    if seq.gen == 1:
                        out.first_token[seq.rid] = e
                    else:  # the first token after a recompute (preemption)
                        gap = e - seq.tok
                        g0 = out.max_gap[seq.rid]
                        if not gap <= g0:  # (NaN-safe)
                            out.max_gap[seq.rid] = gap
                    seq.tok = e
                    self.prefilling.remove(seq)
                    if seq.gen >= seq.output:
                        self._finish(seq, c, e)
                    elif self.role == "prefill":  # hand off: keep the KV until delivered
                        del self.running[seq]
                        seq.state = HANDOFF
                        self.held += -(-c // bs)
                        seq.tokens = c + 1
                        self.outstanding -= seq.output - seq.gen
                        self.handoffs.append((True, seq, e))
                    else:
                        self._join_decode(seq, c)
            self.cur_chunks = []
        if not self.running and not self.waiting:
            self.busy = False
            self.busy_ms += e - self.busy_start

    def gap_maxima(self) -> tuple[np.ndarray, np.ndarray]:
        """Largest inter-token gap of each decode episode: ``(request ids, gaps)``.

        An episode from ``d_join`` to ``d_leave`` produced tokens at the ends of
        decode steps ``d_join + 1 .. d_leave``; its gaps are the first one (from
        the token before, ``tok``) and the durations of the later steps.
        """
        if not len(self.ep_rid):
            return np.zeros(0, np.int64), np.zeros(0, np.float64)
        d = np.fromiter(self.dend, np.float64, len(self.dend))
        if self.dend_base:
            d = np.concatenate((np.frombuffer(self.dend_old, np.float64), d))
        a = np.array(self.ep_a, dtype=np.int64)
        b = np.array(self.ep_b, dtype=np.int64)
        gap = d[a + 1] - np.array(self.ep_tok, dtype=np.float64)
        steps = np.diff(d)  # steps[i] = d[i + 1] - d[i]: the duration of step i + 1
        inner = b - a >= 2  # steps d_join + 2 .. d_leave, i.e. steps[a + 1 : b]
        if inner.any():
            lo, hi = a[inner] + 1, b[inner]
            idx = np.empty(2 * len(lo), dtype=np.int64)
            idx[0::2], idx[1::2] = lo, hi
            steps = np.append(steps, 0.0)  # (reduceat needs hi < len)
            gap[inner] = np.maximum(gap[inner], np.maximum.reduceat(steps, idx)[0::2])
        return np.array(self.ep_rid, dtype=np.int64), gap

    def _append_dend(self, e: float) -> None:
        """Record ``e`` as the end of decode step ``D`` (just counted)."""
        dend = self.dend
        dend.append(e)
        if len(dend) > _DEND_KEEP:
            self._archive_dend()

    def _archive_dend(self) -> None:
        """Move the decode-step ends but the last one (the only one read before
        :meth:`gap_maxima`) to ``dend_old``, as C doubles."""
        dend = self.dend
        n = len(dend) - 1
        head = dend[:n]
        self.dend_old.frombytes(struct.pack(f"{n}d", *head))  # (a C loop: 2x numpy's)
        self.dend = dend[n:]
        self.dend_base += n

    def _join_decode(self, seq: Seq, c: int) -> None:
        """Put a sequence with ``c`` computed tokens into the decode group."""
        D = self.D
        seq.tokens = c + 1
        seq.state = DECODE
        seq.d_join, seq.c_join, seq.g_join = D, c, seq.gen
        self._phase_add((D - c) % self.bs, 1)
        heapq.heappush(self.heap, (D + seq.output - seq.gen, seq.rid, seq.epoch, seq))
        self.B += 1
        self.S += c + 1

    # ------------------------------------------------------- disaggregation
    def reserve(self, n: int) -> None:
        """Reserve ``n`` KV blocks for a sequence whose KV is about to arrive
        (decode instance; after ``advance(t)``; the caller checked the room).

        A pure-decode stretch under way goes on when the blocks its later steps
        allocate still fit in the free memory left (as its plan checked, see
        :meth:`_plan`: no step of it could preempt or evict), else it ends with
        the running step."""
        self._allocate(n)
        if self.p_K and (
            self._cum(self.p_K - 1) - self._cum(self.p_pos)
            > self.capacity - self.n_private - len(self.cache.ref)
        ):  # the stretch priced its allocations on the old free memory
            self.p_K = self.p_pos + 1
            self.h_weak = self.step_end
            self.h_strict = math.inf
        kv = self.n_private + self.cache.pinned
        if kv > self.peak_kv:
            self.peak_kv = kv

    def unreserve(self, n: int, t: float) -> None:
        """Free ``n`` blocks reserved for a handoff that was called off at ``t``
        (decode instance; after ``advance(t)``)."""
        if self.next_sample < t:
            self._emit(t)
        if self.p_K:  # the stretch priced its allocations on the old free memory
            self.p_K = self.p_pos + 1
            self.h_weak = self.step_end
            self.h_strict = math.inf
        self.n_private -= n
        if self.stalled:
            self.stalled = False
            self.clock = t
            self.busy = True
            self.busy_start = t

    def deliver(self, seq: Seq, t: float) -> None:
        """A handed-off sequence's KV arrived at ``t`` (decode instance; after
        ``advance(t)``): it joins the decode batch at the next step."""
        if self.next_sample < t:
            self._emit(t)
        if self.p_K:
            self.p_K = self.p_pos + 1
            self.h_weak = self.step_end
            self.h_strict = math.inf
        if not self.in_step and not self.running and not self.waiting:
            self.clock = t
        seq.state = READY
        self.n_ready += 1
        self.waiting.append(seq)
        if self.stalled:
            self.stalled = False
            self.clock = t
        self.outstanding += seq.output - seq.gen
        self.requests += 1
        self.out.decode_replica[seq.rid] = self.index

    def release_kv(self, seq: Seq, t: float) -> None:
        """Free a handed-off sequence's KV at ``t`` (prefill instance; after
        ``advance(t)``)."""
        if self.next_sample < t:
            self._emit(t)
        held = -(-seq.computed // self.bs)
        self.held -= held
        if seq.hashed:
            self.cache.release(seq.hashed)
        self.n_private -= held - len(seq.hashed)
        seq.hashed = []
        if self.stalled:
            self.stalled = False
            self.clock = t
            self.busy = True
            self.busy_start = t

    def _finish(self, seq: Seq, computed: int, t: float) -> None:
        self._release(seq, computed)
        seq.state = DONE
        seq.ids = []
        self.out.finish[seq.rid] = t
        if self.watch is not None and seq.rid in self.watch:
            self.finished.append(seq.rid)
