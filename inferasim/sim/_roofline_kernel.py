"""The roofline cost model's scalar step-time formula (internal, compiled).

:class:`inferasim.sim.roofline.RooflineCostModel` keeps its constants here
(one :class:`RooflineKernel` per model, its ``kernel()``): its scalar
``step_time_ms`` calls :meth:`RooflineKernel.formula`, and the scheduler
prices its steps and runs of pure-decode steps through the kernel natively
(:mod:`inferasim.sim.kernels`). The operations and their order are those of
the model's array formula, so every step time is bit-identical to
``step_time_ms`` on arrays (tested in tests/test_roofline.py). This scalar
copy of the array formula is a measured specialisation: see
``RooflineCostModel.kernel``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from inferasim.sim.kernels import StepKernel

# Internal: the public API is inferasim.sim.RooflineCostModel.
__all__: list[str] = []


class RooflineKernel(StepKernel):
    """A :class:`~inferasim.sim.roofline.RooflineCostModel`'s constants and
    scalar formulas (internal).

    ``model`` is the cost model: read once here for its constants, and
    called back only for the (rare) KV-fit warning.
    """

    def __init__(self, model: Any) -> None:
        self.model = model
        self.fpt: float = float(model._flops_per_token)
        self.fpp: float = float(model._flops_per_pair)
        self.fps: float = float(model._flops_per_s)
        self.bps: float = float(model._bytes_per_s)
        self.kv: float = float(model._kv_gpu)
        self.dense: float = float(model._dense_bytes_gpu)
        self.expert: float = float(model._expert_bytes_gpu)
        self.miss: float = float(model._miss)
        self.moe: bool = bool(model.model_spec.is_moe)
        self.comm_fixed: float = float(model._comm_fixed_s)
        self.comm_tok: float = float(model._comm_per_token_s)
        self.oh: float = float(model.overhead_ms)
        self.fit = model._kv  # (warns once when a step's KV cannot fit)
        self.lim: float = float(self.fit.limit)

    def weights(self, n: float) -> float:
        """Weight bytes a step of ``n`` tokens reads (the MoE experts it touches)."""
        if self.moe:
            return self.dense + self.expert * (1.0 - float(np.power(self.miss, n)))
        return self.dense

    def formula(self, p: float, a: float, d: float, c: float) -> float:
        """``step_time_ms(p, a, d, c)`` for scalars (no argument checks, no warning)."""
        n = p + d
        compute = (self.fpt * n + self.fpp * (a + c)) / self.fps
        memory = (self.weights(n) + self.kv * (c + p)) / self.bps
        comm = self.comm_fixed + self.comm_tok * n
        return self.oh + 1e3 * ((memory if memory > compute else compute) + comm)

    def step(self, p: int, a: int, d: int, c: int) -> float:
        """``step_time_ms(p, a, d, c)`` for ints ``>= 0`` (the scheduler's steps),
        with the model's KV-fit check."""
        fp, fa, fd, fc = float(p), float(a), float(d), float(c)
        self.check_fit(fp, fa, fd, fc)
        return self.formula(fp, fa, fd, fc)

    def check_fit(self, p: float, a: float, d: float, c: float) -> None:
        """The model's KV-fit warning, asked only when the step may not fit
        (``p + c`` or its attention beyond the limit)."""
        lim = self.lim
        if (p + c > lim or a > (lim - p) * p) and not self.fit.warned:
            self.fit.check(p, a, d, c)

    def run(self, ends: list[float], e: float, b: int, s: int, k: int) -> float:
        """Append the ends of ``k`` pure-decode steps of ``b`` sequences to ``ends``:
        step ``j`` has ``s + b * j`` tokens of context and ends at ``e + dt_0 +
        ... + dt_j`` (summed left to right). Returns the last end (``e`` when
        ``k == 0``).

        Each ``dt`` is ``step(0, 0, b, s + b * j)`` with the zero prefill terms
        dropped (``x + 0.0 == x`` for ``x >= 0``): the same bits.
        """
        fpp, fps, kv, bps, oh = self.fpp, self.fps, self.kv, self.bps, self.oh
        n = float(b)
        weights = self.weights(n)
        comm = self.comm_fixed + self.comm_tok * n
        fn = self.fpt * n
        c0 = float(s)
        c1 = float(s + b * (k - 1))
        if b > 0 and c1 / n > self.lim:
            self.fit.warn(c1 / n)
        c = s
        if (fn + fpp * c0) / fps < (weights + kv * c0) / bps * (1.0 - 1e-9) and (
            fn + fpp * c1
        ) / fps < (weights + kv * c1) / bps * (1.0 - 1e-9):
            # memory-bound at both ends of the run by a margin (1e-9 of the memory
            # time, which grows at most k-fold over the run) that rounding (~1e-16)
            # cannot close, so at every step in between: both terms are linear in c
            i = 0
            while i < k:  # (a typed counter: no boxed loop variable)
                e += oh + 1e3 * ((weights + kv * float(c)) / bps + comm)
                ends.append(e)
                c += b
                i += 1
            return e
        i = 0
        while i < k:
            x = float(c)
            compute = (fn + fpp * x) / fps
            memory = (weights + kv * x) / bps
            e += oh + 1e3 * ((compute if compute >= memory else memory) + comm)
            ends.append(e)
            c += b
            i += 1
        return e
