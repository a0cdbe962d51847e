"""A replica's batch scheduler: vLLM-v1-style continuous batching (internal, compiled).

:class:`BatchScheduler` owns the waiting queue, the running set and the
current step. Each engine step, in this order:

1. every decoding sequence gets one token (the decode group,
   :mod:`inferasim.sim.decode`);
2. sequences still prefilling get chunks of their remaining tokens, in
   admission order, within ``max_batched_tokens`` (chunked prefill);
3. if the new KV blocks all of that needs exceed the memory available
   (free blocks plus evictable cached ones), the most recently admitted
   running sequence is preempted (its blocks released, its progress
   recomputed later from the front of the waiting queue) until it fits; a
   step with a preemption admits nobody;
4. waiting requests are admitted first come first served while there is
   token budget, a free sequence slot and KV memory for their first chunk.
   Admission looks the prompt up in the prefix cache: the leading run of
   resident full blocks is reused (at most ``(tokens - 1) // block_size``
   blocks, so at least one token is computed, as vLLM does), continued in
   the lower tiers (:meth:`inferasim.sim.kv.KVManager.lower_run`).

A sequence holds ``ceil(computed_tokens / block_size)`` blocks, allocated
when a chunk or decode token is scheduled. A full prompt block with a hash
id enters the prefix cache when the step that computes its last token
ends. A prefill that reaches the end of its tokens samples a token (the
first one gives the TTFT); every later step of the sequence is a decode
step.

The roles of a disaggregated fleet are subclasses: :class:`PrefillScheduler`
hands each sequence off after its first token (:attr:`BatchScheduler.handoffs`
holds the events the fleet's handoffs read), :class:`DecodeScheduler`
admits delivered sequences straight into the decode batch.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from inferasim.sim.cache import own_key
from inferasim.sim.decode import DecodeGroup
from inferasim.sim.kv import KVManager
from inferasim.sim.recorder import Recorder
from inferasim.sim.sequence import (
    DECODE,
    DONE,
    HANDOFF,
    LOADING,
    PREFILL,
    READY,
    WAITING,
    RequestLog,
    Seq,
)

__all__: list[str] = []

#: A prefill chunk of a step: (sequence, tokens).
Chunk = tuple[Seq, int]


class BatchScheduler:
    """Waiting and running queues, token budget, chunking, preemption (see the module)."""

    def __init__(
        self,
        index: int,
        kv: KVManager,
        group: DecodeGroup,
        recorder: Recorder,
        out: RequestLog,
        max_num_seqs: int,
        max_batched_tokens: int,
        chunked_prefill: bool,
    ) -> None:
        self.index = index
        self.kv = kv
        self.group = group
        self.rec = recorder
        self.out = out
        self.bs = kv.bs
        self.pt = kv.pt  # tokens a KV page
        self.max_seqs = max_num_seqs
        self.max_tokens = max_batched_tokens
        self.chunked = chunked_prefill
        # vLLM v1 rules (EngineConfig): whole prompt must fit; blocks cached when
        # scheduled, running sequences allocating before the waiting ones look up
        self.full_prompt = False
        self.on_schedule = False
        self.waiting: deque[Seq] = deque()
        self.running: dict[Seq, None] = {}  # admission order
        self.prefilling: list[Seq] = []
        self.n_loading = 0  # admitted, waiting for KV loads
        # observable load
        self.outstanding = 0  # prompt tokens still to compute plus output tokens to generate
        self.queued_blocks = 0  # prompt blocks of the waiting requests
        # the current step
        self.clock = 0.0  # when the next step may start (or the running one started)
        self.in_step = False
        self.step_end = 0.0
        self.chunks: list[Chunk] = []  # prefill chunks of the running step
        self.step_batch = 0  # decoding sequences of the running step
        # (prefill done? (None: preempted), seq, time): what a prefill instance's
        # handoffs read; empty on other roles
        self.handoffs: list[tuple[bool | None, Seq, float]] = []
        # closed loop: the requests whose finish the fleet waits for, and those
        # finished since it last looked
        self.watch: set[int] | None = None
        self.finished: list[int] = []

    def timeline_row(self) -> tuple[Any, ...]:
        """The state a timeline sample records: queue, running, KV running and
        evictable blocks, and blocks held in each tier."""
        kv = self.kv
        row: tuple[Any, ...] = (len(self.waiting), len(self.running), kv.running,
                                kv.cache.evictable)
        if kv.tiers is not None:
            row = (*row, *kv.tiers.sizes())
        return row

    @property
    def has_work(self) -> bool:
        """Requests waiting or running."""
        return bool(self.running or self.waiting)

    # ------------------------------------------------------------ arrivals
    def enqueue(self, seq: Seq) -> None:
        """Put a request routed here at the back of the waiting queue."""
        self.waiting.append(seq)
        self.queued_blocks += seq.pblocks
        self.outstanding += seq.prompt + seq.output
        self.rec.requests += 1
        self.out.replica[seq.rid] = self.index

    # ------------------------------------------------------- composing a step
    def compose(self) -> tuple[list[Chunk], int, int, int, bool]:
        """Steps 1-3 of a step at ``clock``: the decode group and the prefill chunks
        of the running sequences, preempting until their new blocks fit.

        Returns ``(chunks, budget, need, available, preempted)``: the chunks,
        the token budget left, the new blocks they and the decode group
        need, the blocks available, and whether a preemption happened."""
        pt = self.pt
        group = self.group
        kv = self.kv
        preempted = False
        while True:
            budget = self.max_tokens - group.batch
            need = group.new_blocks()
            chunks: list[Chunk] = []
            for seq in self.prefilling:
                if budget <= 0:
                    break
                c = seq.computed
                rem = seq.tokens - c
                n = rem if rem < budget else budget
                need += (c + n + pt - 1) // pt - (c + pt - 1) // pt
                chunks.append((seq, n))
                budget -= n
            avail = kv.available
            if need <= avail:
                return chunks, budget, need, avail, preempted
            self.preempt_last()
            preempted = True

    def preempt_last(self) -> None:
        """Preempt the most recently admitted running sequence (recompute later)."""
        seq = next(reversed(self.running))
        if seq.state == DECODE:
            computed = self.group.leave(seq)
        elif seq.state == LOADING:  # its loads are dropped (the blocks are lost)
            computed = seq.computed
            self.kv.cancel_loading(seq, self.clock)
            self.n_loading -= 1
        else:
            computed = seq.computed
            self.prefilling.remove(seq)
        self.kv.free_blocks(seq, computed)
        del self.running[seq]
        seq.state = WAITING
        seq.epoch += 1
        seq.computed = 0
        seq.tokens = seq.prompt + seq.gen
        self.outstanding += min(computed, seq.prompt)
        self.queued_blocks += seq.pblocks
        self.rec.preemptions += 1
        self.out.preemptions[seq.rid] += 1
        self.waiting.appendleft(seq)
        self.preempted(seq)

    # -------------------------------------------------------------- admission
    def admit(self, t: float, chunks: list[Chunk], budget: int, avail: int) -> int:
        """Step 4: admit waiting requests FCFS while budget, slots and memory allow.

        Appends their first chunks to ``chunks``; returns the new pages they
        need (allocated here already, and none returned, with
        ``cache_on_schedule``: each admission allocates and caches before the
        next request looks the cache up, as in vLLM's waiting loop)."""
        bs = self.bs
        pt = self.pt
        kv = self.kv
        cache = kv.cache
        ppb = kv.ppb
        paged = ppb > 1 or kv.cache_generated
        full_prompt = self.full_prompt
        on_schedule = self.on_schedule
        waiting, running = self.waiting, self.running
        out = self.out
        decoding = self.group.batch > 0
        tiers = kv.tiers
        need, budget = self.admit_ready(t, budget)
        if on_schedule and need:
            kv.allocate(need, t)
            need = 0
            avail = kv.available
        while waiting and budget > 0 and len(running) < self.max_seqs:
            seq = waiting[0]
            if not self.may_admit(seq):
                break
            ids = seq.ids
            limit = (seq.tokens - 1) // bs
            if limit > len(ids):
                limit = len(ids)
            if not paged:
                m = cache.match_len(ids, limit) if limit > 0 else 0
                pages = m
                held = ids
            else:  # (pages: a partial last entry; the own entry after a preemption)
                own = own_key(seq.rid) if kv.cache_generated and seq.epoch else -1
                pages, m = cache.match(ids, (seq.tokens - 1) // pt, own)
                held = ids if m <= len(ids) else [*ids, own]
            revive = cache.evictable_among(held, m) if m else 0
            cut = 0  # (pages of an evictable last entry the hit does not use)
            if pages < m * ppb and not cache.ref[held[m - 1]]:
                cut = cache.entry_pages(held[m - 1]) - (pages - (m - 1) * ppb)
                revive -= cut  # (they leave the cache: see trim)
            if tiers is not None and m < limit and pages == m * ppb:
                r, counts, mid, more = kv.lower_run(ids, m, limit, t)
                if r > m:
                    L = (r - m - len(mid)) * ppb  # pages to load
                    if L + revive + more * ppb > avail:
                        break
                    waiting.popleft()
                    self._admit_loading(seq, t, m, r, counts, mid)
                    avail -= L + revive + more * ppb
                    if on_schedule:
                        kv.allocate(L, t)
                        avail = kv.available
                    else:
                        need += L
                    self.queued_blocks -= seq.pblocks
                    self.outstanding -= r * bs
                    continue
            c = pages * pt
            rem = seq.tokens - c
            if rem <= budget or self.chunked:
                n = rem if rem <= budget else budget
            elif not decoding and not chunks:
                n = rem  # a whole prompt larger than the budget runs alone
            else:
                break
            new = (c + n + pt - 1) // pt - pages
            fit = (seq.tokens + pt - 1) // pt - pages if full_prompt else new
            if fit + revive > avail:
                break
            waiting.popleft()
            if m:
                seq.hashed = held[:m]
                cache.acquire(seq.hashed)
                if cut:
                    cache.trim(held[m - 1], pages - (m - 1) * ppb)
            seq.cpages = pages
            seq.hit = m
            seq.computed = c
            seq.state = PREFILL
            running[seq] = None
            self.prefilling.append(seq)
            chunks.append((seq, n))
            budget -= n
            self.queued_blocks -= seq.pblocks
            self.outstanding -= c if c < seq.prompt else seq.prompt
            if on_schedule:
                kv.allocate(new, t)
                seq.fresh = kv.register_blocks(seq, c, c + n)
                avail = kv.available
            else:
                avail -= new + revive
                need += new
            if seq.first:
                seq.first = False
                rid = seq.rid
                out.scheduled[rid] = t
                whole = pages // ppb  # (whole hash blocks hit)
                out.cached_blocks[rid] = whole if whole <= len(ids) else len(ids)
                out.cached_tokens[rid] = c if c <= seq.prompt else seq.prompt
            self.admitted(seq, t)
        if len(running) > self.rec.peak_running:
            self.rec.peak_running = len(running)
        return need

    def cache_scheduled(self, chunks: list[Chunk]) -> None:
        """``cache_on_schedule``: the running sequences' chunks of the step being
        composed cache the blocks they complete now."""
        kv = self.kv
        for seq, n in chunks:
            c = seq.computed
            seq.fresh = kv.register_blocks(seq, c, c + n)

    def _admit_loading(
        self, seq: Seq, t: float, m: int, r: int, counts: list[int], mid: list[int]
    ) -> None:
        """Admit ``seq`` reusing ``r`` blocks, some loaded from the lower tiers: it
        holds its memory and a slot, and waits (LOADING) for the deliveries."""
        self.kv.start_loading(seq, t, m, r, counts, mid)
        seq.computed = r * self.bs
        seq.state = LOADING
        self.running[seq] = None
        self.n_loading += 1
        if seq.first:
            seq.first = False
            rid = seq.rid
            out = self.out
            out.scheduled[rid] = t
            out.cached_blocks[rid] = r
            out.cached_tokens[rid] = r * self.bs
            for k, c in enumerate(counts):
                if c:
                    out.tier_hits[k][rid] = c

    def collect_loads(self, t: float) -> None:
        """Sequences whose loads were all delivered by ``t`` start their prefill."""
        tiers = self.kv.tiers
        assert tiers is not None
        for seq in tiers.collect(t):
            self.n_loading -= 1
            self.loaded(seq)

    def loaded(self, seq: Seq) -> None:
        """Every load of ``seq`` was delivered: its prefill goes on."""
        self.kv.finish_loading(seq)
        self.out.load_ms[seq.rid] += seq.load_end - seq.load_start
        seq.state = PREFILL
        self.prefilling.append(seq)

    # ------------------------------------------------------------- completion
    def complete_chunks(self, e: float) -> None:
        """The prefill chunks of the step ending at ``e`` are computed."""
        out = self.out
        kv = self.kv
        for seq, n in self.chunks:
            c0 = seq.computed
            c = c0 + n
            seq.computed = c
            out.computed[seq.rid] += n
            P = seq.prompt
            if c0 < P:
                self.outstanding -= (c if c < P else P) - c0
            if self.on_schedule:
                kv.write_scheduled(seq, e)
            else:
                kv.cache_computed(seq, c0, c, e)
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
                    self.finish(seq, c, e)
                else:
                    self.first_token(seq, c, e)
        self.chunks = []

    def finish(self, seq: Seq, computed: int, t: float) -> None:
        """``seq`` produced its last token at ``t``: free its KV, record its finish."""
        self.kv.free_blocks(seq, computed)
        del self.running[seq]
        seq.state = DONE
        seq.ids = []
        self.out.finish[seq.rid] = t
        if self.watch is not None and seq.rid in self.watch:
            self.finished.append(seq.rid)

    # ------------------------------------------------------------ role hooks
    def first_token(self, seq: Seq, c: int, e: float) -> None:
        """A prefill with ``c`` computed tokens sampled a token at ``e`` and goes on."""
        self.group.join(seq, c)

    def preempted(self, seq: Seq) -> None:
        """``seq`` was just preempted (back at the front of the queue)."""

    def admitted(self, seq: Seq, t: float) -> None:
        """``seq`` was admitted with a prefill chunk at ``t``."""

    def may_admit(self, seq: Seq) -> bool:
        """Whether the head of the queue may be admitted now (else admission stops)."""
        return True

    def admit_ready(self, t: float, budget: int) -> tuple[int, int]:
        """Admit what joins the decode batch before the queue; ``(need, budget)``."""
        return 0, budget

    def evictions_matter(self) -> bool:
        """Whether evicting cached pages could let a waiting request in while the
        running set stays as it is (a pure-decode stretch, whose allocations only
        shrink the memory available): then a stretch stops before its first
        eviction and a step that evicted is followed by one composed afresh.

        False with nothing waiting; with every sequence slot taken; and, with
        full-prompt admission and no lower tiers, when the head of the queue does
        not fit even if every evictable page of its cached run were gone. (Its
        admission needs ``prompt pages - reused pages`` free plus the evictable
        pages of the entries it pins; an evicted page that the hit reuses adds
        one to the first term and takes one from the second, an evicted page it
        pins without reusing only takes one from the second: the sum never falls
        below the prompt's pages minus the pages of its run's entries pinned by
        other sequences, which is the bound checked.) Evicting through such a
        stretch gives the frames of the step-by-step loop; on the first 2,000
        conversation requests at 204,800 tokens, one replica,
        ``EngineConfig.vllm()`` and ``LinearCostModel()``, a run starts 5,595
        steps instead of 32,185.
        """
        waiting = self.waiting
        if not waiting:
            return False
        if len(self.running) >= self.max_seqs:
            return False
        kv = self.kv
        if not self.full_prompt or kv.tiers is not None:
            return True
        seq = waiting[0]
        pt = self.pt
        cache = kv.cache
        own = own_key(seq.rid) if kv.cache_generated and seq.epoch else -1
        pages, m = cache.match(seq.ids, (seq.tokens - 1) // pt, own)
        held = seq.ids if m <= len(seq.ids) else [*seq.ids, own]
        ref = cache.ref
        ppb = kv.ppb
        pinned = 0  # pages of the run pinned by running sequences
        for j in range(m):
            h = held[j]
            if ref[h]:  # (the hit uses all of an entry but perhaps the last)
                pinned += ppb if j < m - 1 else pages - j * ppb
        return (seq.tokens + pt - 1) // pt - pinned <= kv.available

    def stall(self, preempted: bool) -> bool:
        """A step has nothing to run (no loads pending): True when the scheduler
        should compose again (memory was freed), False when it waits for
        memory held elsewhere; an aggregated replica never gets here."""
        raise RuntimeError("internal error: a step with nothing to run")


class PrefillScheduler(BatchScheduler):
    """A prefill instance: each sequence is handed off after its first token.

    The sequence leaves the running set holding its KV (HANDOFF) until the
    handoff frees it (:meth:`release`). A prompt it preempted is admitted
    again only when all its blocks fit beside the handed-off KV it holds
    (else, with zero-time steps, preempt-recompute cycles at one instant
    never end). The handoff events ``(prefill done?, seq, time)`` it
    produces: ``False`` when a prefill starts (a layerwise handoff streams
    from then on), ``True`` at the first token, ``None`` when a sequence
    with a handoff under way is preempted (its KV is gone).
    """

    def first_token(self, seq: Seq, c: int, e: float) -> None:
        del self.running[seq]
        seq.state = HANDOFF
        self.kv.held += -(-c // self.pt)
        seq.tokens = c + 1
        self.outstanding -= seq.output - seq.gen
        self.handoffs.append((True, seq, e))

    def preempted(self, seq: Seq) -> None:
        if seq.output > 1:  # its KV is gone: so is its handoff
            self.handoffs.append((None, seq, self.clock))

    def admitted(self, seq: Seq, t: float) -> None:
        if seq.output > 1:  # (again after a preemption)
            self.handoffs.append((False, seq, t))

    def may_admit(self, seq: Seq) -> bool:
        return not (seq.epoch and -(-seq.prompt // self.pt) > self.kv.capacity - self.kv.held)

    def stall(self, preempted: bool) -> bool:
        return preempted

    def evictions_matter(self) -> bool:
        return bool(self.waiting)  # (the held KV and its releases: not bounded here)

    def release(self, seq: Seq) -> None:
        """Free a handed-off sequence's KV (its decode instance has it now)."""
        self.kv.held -= -(-seq.computed // self.pt)
        self.kv.free_blocks(seq, seq.computed)


class DecodeScheduler(BatchScheduler):
    """A decode instance: sequences arrive with their KV delivered (READY) and
    join the decode batch before anything else in the queue."""

    def __init__(
        self,
        index: int,
        kv: KVManager,
        group: DecodeGroup,
        recorder: Recorder,
        out: RequestLog,
        max_num_seqs: int,
        max_batched_tokens: int,
        chunked_prefill: bool,
    ) -> None:
        super().__init__(
            index, kv, group, recorder, out, max_num_seqs, max_batched_tokens, chunked_prefill
        )
        self.n_ready = 0  # delivered sequences in the waiting queue

    def inbound(self, seq: Seq, m: int, r: int, counts: list[int], t: float) -> None:
        """A handoff placed here at ``t`` whose blocks ``m..r`` this instance's tiers
        hold: they are loaded from there (``counts`` per tier) while the rest
        moves over the handoff link; ``m`` leading blocks are pinned in HBM."""
        self.kv.start_inbound(seq, t, m, r, counts)
        seq.dload = 1
        seq.dheld = m
        self.n_loading += 1

    def deliver(self, seq: Seq, held: int = -1) -> None:
        """A handed-off sequence's KV arrived: it waits to join the decode batch
        (``held`` >= 0 with a prefix cache: the leading blocks pinned at placement,
        the prompt's other full blocks are cached now), or, while blocks it
        loads from this instance's tiers are in flight, for them first."""
        if seq.dload == 1:
            seq.dload = 2
            seq.state = LOADING  # (in the queue, neither READY nor admissible)
        else:
            self._ready(seq, held)
        self.waiting.append(seq)
        self.outstanding += seq.output - seq.gen
        self.rec.requests += 1
        self.out.decode_replica[seq.rid] = self.index

    def _ready(self, seq: Seq, held: int) -> None:
        """``seq``'s KV is all here: cache its prompt blocks (with a prefix cache),
        it may join the decode batch."""
        if seq.dload:
            held = seq.dheld
            seq.dload = 0
        if held >= 0:
            self.kv.adopt(seq, held)
        seq.state = READY
        self.n_ready += 1

    def loaded(self, seq: Seq) -> None:
        if not seq.dload:  # (a recompute's own loads)
            super().loaded(seq)
        elif seq.dload == 1:  # before its handoff's delivery
            seq.dload = 3
        else:
            self._ready(seq, seq.dheld)

    def admit_ready(self, t: float, budget: int) -> tuple[int, int]:
        # their memory is reserved, so they never wait behind a request that needs more
        need = 0
        if not self.n_ready:
            return need, budget
        pt = self.pt
        waiting, running = self.waiting, self.running
        for seq in [x for x in waiting if x.state == READY]:
            if budget <= 0 or len(running) >= self.max_seqs:
                break
            waiting.remove(seq)
            self.n_ready -= 1
            c = seq.computed
            # the block of this step's token was reserved with the transfer: it
            # is allocated with the step's other new blocks
            extra = (c + pt) // pt - (c + pt - 1) // pt
            self.kv.private -= extra
            need += extra
            budget -= 1
            running[seq] = None
            self.group.join(seq, c)
            self.out.decode_start[seq.rid] = t
        return need, budget

    def may_admit(self, seq: Seq) -> bool:
        return seq.state != READY and not seq.dload

    def evictions_matter(self) -> bool:
        return bool(self.waiting)  # (delivered sequences join ahead: not bounded here)

    def stall(self, preempted: bool) -> bool:
        return preempted
