"""The decode group of a replica as aggregates: :class:`DecodeGroup` (internal, compiled).

Every decoding sequence gets one token each engine step, so the group is
kept as counts: ``batch`` sequences whose contexts add up to ``context``
tokens, ``steps`` decode steps run so far (a global counter), a heap of the
step at whose end each sequence finishes, and a histogram of block
*phases*: a sequence that joined at step ``d_join`` with ``c_join`` computed
tokens crosses into a new KV block at step ``d`` when ``(d - d_join +
c_join) % block_size == 0``, i.e. it counts in ``phase[(d_join - c_join) %
block_size]``, and decode step ``d`` allocates ``phase[d % block_size]``
blocks. A step costs O(1) in the number of decoding sequences, and a
stretch of pure-decode steps can be priced and applied in one jump
(:mod:`inferasim.sim.stretch`).
"""

from __future__ import annotations

import heapq

from inferasim.sim.recorder import Recorder
from inferasim.sim.sequence import DECODE, Seq

__all__: list[str] = []

#: Block sizes above this keep the phase histogram in a dict (sized by the phases
#: in use, not by the block size: 2**24 would be 128 MiB).
DENSE_PHASES = 1 << 16

#: A finish-heap entry: (finish step, request id, epoch, sequence).
Finish = tuple[int, int, int, Seq]


class DecodeGroup:
    """The decoding sequences of one replica as aggregates (see the module docstring)."""

    def __init__(self, block_size: int, recorder: Recorder) -> None:
        self.bs = block_size
        self.rec = recorder
        self.batch = 0  # sequences decoding
        self.context = 0  # their context tokens in all (computed + 1 each)
        self.steps = 0  # decode steps run so far
        # (a list when dense, else empty and the histogram in the dict sparse)
        self.phase: list[int] = [0] * block_size if block_size <= DENSE_PHASES else []
        self.sparse: dict[int, int] | None = None if block_size <= DENSE_PHASES else {}
        self.heap: list[Finish] = []

    # ------------------------------------------------------------ phases
    def phase_at(self, i: int) -> int:
        """Decode sequences whose context is at block phase ``i``."""
        sparse = self.sparse
        return self.phase[i] if sparse is None else sparse.get(i, 0)

    def _phase_add(self, i: int, delta: int) -> None:
        sparse = self.sparse
        if sparse is None:
            self.phase[i] += delta
        else:
            sparse[i] = sparse.get(i, 0) + delta

    def phases(self, lo: int, hi: int) -> list[int]:
        """The phase histogram's entries ``lo..hi-1`` (a copy)."""
        sparse = self.sparse
        if sparse is None:
            return self.phase[lo:hi]
        return [sparse.get(i, 0) for i in range(lo, hi)]

    def new_blocks(self) -> int:
        """Blocks the next decode step allocates."""
        return self.phase_at(self.steps % self.bs) if self.batch else 0

    # --------------------------------------------------------- membership
    def join(self, seq: Seq, c: int) -> None:
        """Put a sequence with ``c`` computed tokens into the group."""
        D = self.steps
        seq.tokens = c + 1
        seq.state = DECODE
        seq.d_join, seq.c_join, seq.g_join = D, c, seq.gen
        self._phase_add((D - c) % self.bs, 1)
        heapq.heappush(self.heap, (D + seq.output - seq.gen, seq.rid, seq.epoch, seq))
        self.batch += 1
        self.context += c + 1

    def leave(self, seq: Seq) -> int:
        """Take a sequence out of the group; return its computed tokens.

        Its tokens since it joined form a decode episode (recorded)."""
        D = self.steps
        k = D - seq.d_join
        computed = seq.c_join + k
        seq.gen = seq.g_join + k
        if k:
            self.rec.episode(seq.rid, seq.d_join, D, seq.tok)
            seq.tok = self.rec.end_of(D)
        self.batch -= 1
        self.context -= computed + 1
        self._phase_add((seq.d_join - seq.c_join) % self.bs, -1)
        return computed

    def stepped(self, e: float) -> None:
        """Count one decode step, ending at ``e``: every sequence has one more token
        (the ones it finished come out of :meth:`pop_finished`)."""
        self.steps += 1
        self.rec.step_ended(e)
        self.context += self.batch

    def stepped_many(self, ends: list[float]) -> None:
        """Count ``len(ends)`` decode steps that finish nobody, ending at ``ends``."""
        k = len(ends)
        self.steps += k
        self.rec.steps_ended(ends)
        self.context += self.batch * k

    def pop_finished(self) -> Seq | None:
        """A sequence whose last token the steps so far produced (still in the
        group), or None when there is none left."""
        heap = self.heap
        D = self.steps
        while heap and heap[0][0] <= D:
            _, _, ep, seq = heapq.heappop(heap)
            if seq.state == DECODE and seq.epoch == ep:
                return seq
        return None

    # -------------------------------------------------------------- heap
    def first_finish(self) -> int:
        """The step at whose end the next sequence finishes (stale entries dropped)."""
        heap = self.heap
        while True:
            _, _, ep, seq = heap[0]
            if seq.state == DECODE and seq.epoch == ep:
                return heap[0][0]
            heapq.heappop(heap)

    def next_finishes(self, k: int) -> list[Finish]:
        """Up to ``k`` smallest valid heap entries, in order, without popping."""
        heap = self.heap
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
        out: list[Finish] = []
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
