"""Step-time cost models: how long one engine step takes.

A cost model is any object with two methods:

``step_time_ms(prefill_tokens, prefill_attention, decode_seqs, decode_context)``
    The duration (ms) of one engine step that computes ``prefill_tokens``
    new prompt tokens (cached tokens excluded), whose attention covers
    ``prefill_attention`` query-key pairs (for a chunk of ``c`` tokens after
    ``p`` tokens of context: ``c * p + c * (c + 1) / 2``, the quadratic
    term), plus one decode token for each of ``decode_seqs`` sequences whose
    contexts add up to ``decode_context`` tokens. Arguments may be numpy
    arrays (broadcast together): the simulator prices a whole stretch of
    decode steps in one call, so the method must be elementwise.

``kv_capacity_blocks(block_size)``
    KV-cache blocks one replica holds, or ``None`` when the model does not
    know its memory (then the simulator needs ``kv_tokens=``).

Optionally, ``kernel()`` returns a compiled
:class:`~inferasim.sim.kernels.StepKernel` computing the same step times
natively (the built-in models do; a subclass that overrides
``step_time_ms`` gets None, so its own method is called). Without one the
simulator calls ``step_time_ms`` once per step.

:class:`LinearCostModel` is the calibration model: user coefficients, e.g.
fitted to measured step times. The roofline model built from model and GPU
presets lives in :mod:`inferasim.sim.roofline`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from inferasim._validate import duration_ms
from inferasim.sim.kernels import LinearKernel

__all__ = ["CostModel", "LinearCostModel", "prefill_attention_pairs"]

if TYPE_CHECKING:
    from inferasim.sim.calibrate import Calibration

ArrayLike = float | np.ndarray

_LINEAR_TERMS = (
    "overhead_ms",
    "prefill_token_ms",
    "prefill_attention_ms",
    "decode_seq_ms",
    "decode_context_ms",
)


@runtime_checkable
class CostModel(Protocol):
    """The interface the simulator needs from a cost model."""

    def step_time_ms(
        self,
        prefill_tokens: ArrayLike,
        prefill_attention: ArrayLike,
        decode_seqs: ArrayLike,
        decode_context: ArrayLike,
    ) -> ArrayLike:
        """Duration of one step in ms (elementwise over array arguments)."""
        ...

    def kv_capacity_blocks(self, block_size: int) -> int | None:
        """KV blocks per replica, or None if unknown."""
        ...


def prefill_attention_pairs(chunk_tokens: ArrayLike, context_before: ArrayLike) -> ArrayLike:
    """Query-key pairs of causal attention for a prefill chunk.

    A chunk of ``c`` new tokens after ``p`` tokens already in the KV cache
    attends to ``c * p + c * (c + 1) / 2`` pairs.

    Examples
    --------
    >>> prefill_attention_pairs(4, 0)
    10.0
    >>> prefill_attention_pairs(2, 3)
    9.0
    """
    c = np.asarray(chunk_tokens, dtype=np.float64)
    p = np.asarray(context_before, dtype=np.float64)
    out = c * p + c * (c + 1.0) / 2.0
    return float(out) if out.ndim == 0 else out


@dataclass(frozen=True)
class LinearCostModel:
    """Step time as a linear function of the batch: the calibration model.

    ``t = overhead_ms + prefill_token_ms * prefill_tokens
    + prefill_attention_ms * prefill_attention + decode_seq_ms * decode_seqs
    + decode_context_ms * decode_context``

    Parameters
    ----------
    overhead_ms : float, default 5.0
        Fixed cost of every step (scheduling, kernel launches, sampling).
    prefill_token_ms : float, default 0.05
        Per new prompt token (the linear, weight-bound part of prefill).
    prefill_attention_ms : float, default 0.0
        Per query-key pair of prefill attention (the quadratic part).
    decode_seq_ms : float, default 0.1
        Per decoding sequence in the batch.
    decode_context_ms : float, default 0.0
        Per context token read by decode attention.
    kv_tokens : int, optional
        KV memory per replica in tokens, if this model should state it
        (``Simulator(kv_tokens=...)`` overrides it; whole pages count).
    kv_bytes_per_token : float, optional
        KV-cache bytes of one token (all layers), what a KV transfer to or
        from a lower tier moves (``Simulator(tiers=...)`` needs it). For
        Llama-3.1-8B in BF16: ``2 * 32 layers * 8 kv heads * 128 * 2 bytes =
        131072``.

    Examples
    --------
    >>> m = LinearCostModel(overhead_ms=1.0, prefill_token_ms=0.01, decode_seq_ms=0.5)
    >>> m.step_time_ms(100, 0, 2, 0)
    3.0
    >>> m.step_time_ms(0, 0, np.array([1, 2]), 0)
    array([1.5, 2. ])
    """

    overhead_ms: float = 5.0
    prefill_token_ms: float = 0.05
    prefill_attention_ms: float = 0.0
    decode_seq_ms: float = 0.1
    decode_context_ms: float = 0.0
    kv_tokens: int | None = None
    kv_bytes_per_token: float | None = None

    def __post_init__(self) -> None:
        for name in (
            "overhead_ms",
            "prefill_token_ms",
            "prefill_attention_ms",
            "decode_seq_ms",
            "decode_context_ms",
        ):
            # (a duration each: at most 2**43 ms, as every duration a parameter gives)
            object.__setattr__(self, name, duration_ms(getattr(self, name), name))
        tokens = self.kv_tokens
        if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int | np.integer)
                                   or not 1 <= tokens < 2**62):
            raise ValueError(f"kv_tokens must be an integer in [1, 2**62), got {tokens!r}")
        kvb = self.kv_bytes_per_token
        if kvb is not None and not (
            isinstance(kvb, int | float) and not isinstance(kvb, bool) and np.isfinite(kvb) and kvb > 0
        ):
            raise ValueError(f"kv_bytes_per_token must be a number > 0, got {kvb!r}")
        if self.overhead_ms == 0 and self.decode_seq_ms == 0 and self.prefill_token_ms == 0:
            raise ValueError("a cost model whose steps can take no time would never advance")

    def step_time_ms(
        self,
        prefill_tokens: ArrayLike,
        prefill_attention: ArrayLike,
        decode_seqs: ArrayLike,
        decode_context: ArrayLike,
    ) -> ArrayLike:
        """Duration of one step in ms; see the class docstring.

        Examples
        --------
        >>> LinearCostModel(overhead_ms=2.0, decode_context_ms=0.001).step_time_ms(0, 0, 1, 1000)
        3.1
        """
        return (
            self.overhead_ms
            + self.prefill_token_ms * prefill_tokens
            + self.prefill_attention_ms * prefill_attention
            + self.decode_seq_ms * decode_seqs
            + self.decode_context_ms * decode_context
        )

    @classmethod
    def fit(
        cls,
        measurements: Any,
        *,
        parameters: Sequence[str] = _LINEAR_TERMS,
        kv_tokens: int | None = None,
    ) -> Calibration:
        """Fit the coefficients to measured step times by non-negative least squares.

        Minimises the sum of squared *relative* errors (each row divided by
        its measured time) with every coefficient ``>= 0``
        (:func:`scipy.optimize.nnls`); coefficients not named stay 0.

        Parameters
        ----------
        measurements : DataFrame or iterable of dicts
            Rows ``kind, tokens, batch, context, ms``; see
            :mod:`inferasim.sim.calibrate`.
        parameters : sequence of str, default all five
            Which coefficients to fit.
        kv_tokens : int, optional
            Passed to the fitted model.

        Returns
        -------
        Calibration
            ``.model`` the fitted model, ``.report`` per point (``before_*``
            columns against the class defaults), ``.params``.

        Raises
        ------
        ValueError
            On bad measurements, an unknown parameter name, or a fit whose
            steps would take no time.

        Examples
        --------
        >>> rows = [{"kind": "prefill", "tokens": 1000, "ms": 12.0},
        ...         {"kind": "decode", "batch": 1, "ms": 2.5},
        ...         {"kind": "decode", "batch": 9, "ms": 6.5}]
        >>> fit = LinearCostModel.fit(rows, parameters=["overhead_ms", "prefill_token_ms",
        ...                                             "decode_seq_ms"])
        >>> {k: round(v, 6) for k, v in fit.params.items()}  # 2 + 0.5 b; 2 + 0.01 t
        {'overhead_ms': 2.0, 'prefill_token_ms': 0.01, 'decode_seq_ms': 0.5}
        """
        from scipy.optimize import nnls

        from inferasim.sim.calibrate import (
            Calibration,
            check_names,
            measurements_frame,
            report_frame,
            step_arguments,
        )

        names = check_names(parameters, _LINEAR_TERMS, "LinearCostModel.fit")
        df = measurements_frame(measurements)
        p, a, d, c = step_arguments(df)
        measured = df["ms"].to_numpy(dtype=np.float64)
        features = {
            "overhead_ms": np.ones_like(measured),
            "prefill_token_ms": p,
            "prefill_attention_ms": a,
            "decode_seq_ms": d,
            "decode_context_ms": c,
        }
        x = np.column_stack([features[n] for n in names]) / measured[:, None]
        scale = np.abs(x).max(axis=0)
        scale[scale == 0] = 1.0
        coef, _ = nnls(x / scale, np.ones_like(measured))
        params = {n: float(v) for n, v in zip(names, coef / scale, strict=True)}
        full = {n: params.get(n, 0.0) for n in _LINEAR_TERMS}
        model = cls(**full, kv_tokens=kv_tokens)
        predicted = np.asarray(model.step_time_ms(p, a, d, c), dtype=np.float64)
        before = np.asarray(cls().step_time_ms(p, a, d, c), dtype=np.float64)
        return Calibration(model, report_frame(df, predicted, before), params)

    def kernel(self) -> LinearKernel | None:
        """The compiled kernel the simulator prices this model's steps with (the
        same floats as :meth:`step_time_ms`); None when a subclass overrides
        :meth:`step_time_ms`.

        Examples
        --------
        >>> m = LinearCostModel(decode_context_ms=0.001)
        >>> m.kernel().step(100, 5050, 2, 300) == m.step_time_ms(100, 5050, 2, 300)
        True
        """
        if type(self).step_time_ms is LinearCostModel.step_time_ms:
            return LinearKernel(self)
        return None

    def kv_capacity_blocks(self, block_size: int) -> int | None:
        """Whole ``block_size``-token blocks of the ``kv_tokens`` given at
        construction (None if not given).

        Examples
        --------
        >>> LinearCostModel(kv_tokens=1000).kv_capacity_blocks(16)  # 1000 // 16
        62
        """
        return None if self.kv_tokens is None else int(self.kv_tokens) // block_size
