"""What a replica records for the result frames: :class:`Recorder` (internal, compiled).

* **Timeline.** The replica's state sampled on a regular grid ``t0 + k *
  period`` shared by the fleet; when a replica reaches ``cap`` samples the
  period of every replica doubles and every other sample is dropped, so the
  grid stays regular and the same on all replicas.
* **Inter-token gaps.** The end time of every decode step (``D = 1, 2, ...``)
  and the decode *episodes* ``(request, d_join, d_leave, tok)``: a sequence
  in the decode group from step ``d_join`` to ``d_leave`` produced a token at
  the end of each step ``d_join + 1 .. d_leave``, so its gaps are the
  durations of those steps (and the first one, from ``tok``, the token
  before). :meth:`Recorder.gap_maxima` turns them into the largest gap of
  each episode, vectorised, at the end of the run.
* **Counters**: requests, preemptions, steps, busy time, peak running.
"""

from __future__ import annotations

import math
import struct
from array import array
from typing import Any

import numpy as np

__all__: list[str] = []

#: Decode-step ends kept as Python floats before older ones move to an array of
#: C doubles (8 bytes a step; only the last end is read before ``gap_maxima``).
DEND_KEEP = 1 << 14


class Recorder:
    """A replica's timeline samples, decode-step ends, decode episodes and counters."""

    def __init__(self, period: float, t0: float) -> None:
        # timeline: sample k is at t0 + k * period
        self.period = period
        self.t0 = t0
        self.sample_i = 0
        self.next_sample = t0
        self.rows: list[tuple[Any, ...]] = []
        self.peers: list[Recorder] = [self]  # recorders sharing the grid
        self.cap = 1 << 62  # samples per replica before the grid coarsens
        # end time of decode step d (index d - dend_base; the ends before dend_base
        # moved to dend_old as C doubles)
        self.dend: list[float] = [0.0]
        self.dend_old = array("d")
        self.dend_base = 0
        # decode episodes
        self.ep_rid = array("q")
        self.ep_a = array("q")
        self.ep_b = array("q")
        self.ep_tok = array("d")
        # counters
        self.requests = 0
        self.preemptions = 0
        self.steps = 0
        self.busy = False
        self.busy_start = 0.0
        self.busy_ms = 0.0
        self.peak_running = 0

    # ------------------------------------------------------------ timeline
    def emit(self, t: float, row: tuple[Any, ...]) -> None:
        """Record the samples strictly before ``t`` with the state ``row``."""
        if self.sample_i + (t - self.next_sample) / self.period >= self.cap:
            self.fit(t)
        while self.next_sample < t:
            self.add(row)

    def add(self, row: tuple[Any, ...]) -> None:
        """Record the sample due next (at ``next_sample``) with the state ``row``."""
        self.rows.append((self.next_sample, *row))
        self.sample_i += 1
        if self.sample_i >= self.cap:
            self.coarsen(2)
        self.next_sample = self.t0 + self.sample_i * self.period

    def fit(self, t: float) -> None:
        """Coarsen the grid up front when sampling up to ``t`` would pass the cap."""
        need = self.sample_i + (t - self.next_sample) / self.period
        if need >= self.cap and need < math.inf:
            factor = 2
            while need / factor >= self.cap:
                factor *= 2
            self.coarsen(factor)

    def coarsen(self, factor: int) -> None:
        """Multiply every peer's sampling period by ``factor`` (a power of two),
        keeping every ``factor``-th sample.

        Row ``k`` of a timeline is sample ``k`` of the grid ``t0 + k * period``,
        so keeping the rows ``k % factor == 0`` leaves the grid of ``factor``
        times the period: regular, the same on all replicas, at most ``cap``
        rows a replica.
        """
        for rec in self.peers:
            rec.rows[:] = rec.rows[::factor]
            rec.sample_i = len(rec.rows)
            rec.period *= factor
            rec.next_sample = rec.t0 + rec.sample_i * rec.period

    # ------------------------------------------------------- decode steps
    def end_of(self, d: int) -> float:
        """The end time of decode step ``d`` (one of the last ``DEND_KEEP``)."""
        return self.dend[d - self.dend_base]

    def step_ended(self, e: float) -> None:
        """Record ``e`` as the end of the decode step just counted."""
        dend = self.dend
        dend.append(e)
        if len(dend) > DEND_KEEP:
            self._archive()

    def steps_ended(self, ends: list[float]) -> None:
        """Record the ends of several decode steps, in order."""
        dend = self.dend
        dend.extend(ends)
        if len(dend) > DEND_KEEP:
            self._archive()

    def _archive(self) -> None:
        """Move the decode-step ends but the last one to ``dend_old``, as C doubles."""
        dend = self.dend
        n = len(dend) - 1
        head = dend[:n]
        # (a C loop: 2x numpy's; array("d", head) parses each float with
        # PyArg_Parse: on the conversation trace with tiers a run took 5,557M
        # instructions with it instead of 5,317M)
        self.dend_old.frombytes(struct.pack(f"{n}d", *head))
        self.dend = dend[n:]
        self.dend_base += n

    def episode(self, rid: int, d_join: int, d_leave: int, tok: float) -> None:
        """Record a decode episode of request ``rid`` (``tok``: its token before)."""
        self.ep_rid.append(rid)
        self.ep_a.append(d_join)
        self.ep_b.append(d_leave)
        self.ep_tok.append(tok)

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

    # ------------------------------------------------------------ counters
    def start_busy(self, t: float) -> None:
        """The replica has requests from ``t`` on (if it had none)."""
        if not self.busy:
            self.busy = True
            self.busy_start = t

    def stop_busy(self, t: float) -> None:
        """The replica has nothing to do from ``t`` on."""
        self.busy = False
        self.busy_ms += t - self.busy_start
