"""Step pricing as the scheduler calls it: :class:`StepKernel` (internal, compiled).

The scheduler prices every engine step through a kernel: one method for a
step, one for a run of pure-decode steps. A cost model may hand over its
own compiled kernel (its documented optional ``kernel()`` method, see
:mod:`inferasim.sim.cost`): the roofline and linear models do, so their
formulas run natively. Any other cost model is called through
:class:`CallbackKernel`, which prices each step with its ``step_time_ms``.
"""

from __future__ import annotations

import math
from typing import Any

__all__: list[str] = []


class StepKernel:
    """Durations of engine steps (ms) from a cost model.

    ``step(p, a, d, c)`` is ``step_time_ms(p, a, d, c)`` for ints ``>= 0``;
    ``run(ends, e, b, s, k)`` appends to ``ends`` the ends of ``k`` decode steps
    of ``b`` sequences, step ``j`` with ``s + b * j`` tokens of context, ending
    at ``e + dt_0 + ... + dt_j`` (summed left to right); it returns the last
    end (``e`` when ``k == 0``).
    """

    def step(self, p: int, a: int, d: int, c: int) -> float:
        raise NotImplementedError

    def run(self, ends: list[float], e: float, b: int, s: int, k: int) -> float:
        raise NotImplementedError


class CallbackKernel(StepKernel):
    """A kernel that asks any cost model's ``step_time_ms``, one step at a time."""

    def __init__(self, cost: Any) -> None:
        self.cost = cost
        self.fn = cost.step_time_ms

    def step(self, p: int, a: int, d: int, c: int) -> float:
        return float(self.fn(p, a, d, c))

    def run(self, ends: list[float], e: float, b: int, s: int, k: int) -> float:
        fn = self.fn
        for _ in range(k):
            dt = float(fn(0, 0, b, s))
            if not 0.0 <= dt < math.inf:
                raise bad_step(self.cost, dt, 0, 0, b, s)
            e += dt
            ends.append(e)
            s += b
        return e


class LinearKernel(StepKernel):
    """:class:`~inferasim.sim.cost.LinearCostModel`'s formula, natively.

    ``overhead + prefill_token * p + prefill_attention * a + decode_seq * d +
    decode_context * c``: the operations of its ``step_time_ms`` in the same
    order, on the same floats (an int times a float is the int converted,
    times the float), so every step time is bit-identical.
    """

    def __init__(self, model: Any) -> None:
        self.oh: float = float(model.overhead_ms)
        self.pt: float = float(model.prefill_token_ms)
        self.pa: float = float(model.prefill_attention_ms)
        self.ds: float = float(model.decode_seq_ms)
        self.dc: float = float(model.decode_context_ms)

    def step(self, p: int, a: int, d: int, c: int) -> float:
        return (
            self.oh + self.pt * float(p) + self.pa * float(a) + self.ds * float(d)
            + self.dc * float(c)
        )

    def run(self, ends: list[float], e: float, b: int, s: int, k: int) -> float:
        # step(0, 0, b, c): the prefill terms add 0.0 (x + 0.0 == x for x >= 0)
        fixed = self.oh + self.pt * 0.0 + self.pa * 0.0 + self.ds * float(b)
        dc = self.dc
        c = s
        i = 0
        while i < k:
            e += fixed + dc * float(c)
            ends.append(e)
            c += b
            i += 1
        return e


def kernel_of(cost: Any) -> StepKernel:
    """The kernel the scheduler prices ``cost``'s steps with: its own (``kernel()``),
    else a :class:`CallbackKernel`."""
    own = getattr(cost, "kernel", None)
    if callable(own):
        k = own()
        if isinstance(k, StepKernel):
            return k
    return CallbackKernel(cost)


def bad_step(cost: Any, dt: Any, pt: Any, pa: Any, b: Any, s: Any) -> ValueError:
    """The error for a step time that is not finite and >= 0 (names the cost model)."""
    return ValueError(
        f"cost model {cost!r} returned a step time of {dt!r} ms for step_time_ms("
        f"prefill_tokens={pt!r}, prefill_attention={pa!r}, decode_seqs={b!r}, "
        f"decode_context={s!r}); step times must be finite and >= 0"
    )
