"""Roofline step-time model built from a model preset and a GPU preset.

The default cost model of the simulator. See :class:`RooflineCostModel` for
every formula and assumption.
"""

from __future__ import annotations

import math
import warnings
from itertools import accumulate
from typing import Any

import numpy as np
import pandas as pd

from inferasim.sim._roofline_kernel import RooflineKernel
from inferasim.sim.calibrate import (
    Calibration,
    check_names,
    measurements_frame,
    report_frame,
    step_arguments,
)
from inferasim.sim.cost import ArrayLike, prefill_attention_pairs
from inferasim.sim.presets import (
    GPUSpec,
    ModelSpec,
    default_calibration,
    get_calibration,
    get_gpu,
    get_model,
)

__all__ = ["RooflineCostModel"]

_ARG_NAMES = ("prefill_tokens", "prefill_attention", "decode_seqs", "decode_context")
_INF = float("inf")
_NUMBER = (int, float)  # (a tuple: ``int | float`` would build a union at every call)
# decode runs longer than this read step times from a per-batch-size table
_TABLE_MIN_STEPS = 3
# Runs of at most this many steps into an array("d") are summed by accumulate on
# Python floats (sequential too: the same sums as cumsum), not in numpy.
_ACCUMULATE_MAX_STEPS = 40
# ... and runs of at most this many steps into a list (no copy in as doubles to save)
_ACCUMULATE_MAX_LIST_STEPS = 96
# at most this many table entries (8 bytes each) per model; past it runs are priced step by step
_TABLE_MAX_ENTRIES = 1 << 22


class RooflineCostModel:
    """Step time from FLOPs and bytes: ``overhead + max(compute, memory) + comm``.

    One engine step runs ``P = prefill_tokens`` new prompt tokens (cached
    tokens excluded) whose attention covers ``A = prefill_attention``
    query-key pairs, plus one token for each of ``D = decode_seqs`` decoding
    sequences whose contexts sum to ``C = decode_context`` tokens. With
    ``N = P + D`` tokens through the weights:

    **compute** (seconds)::

        (2 * active_params * N + attention_flops_per_pair * (A + C) * mfu / attention_efficiency)
        / (tp * peak_flops * mfu)

    i.e. the weight GEMMs run at ``mfu`` of peak and attention at
    ``attention_efficiency`` of peak (equal to ``mfu`` unless set).

    ``2 * active_params`` FLOPs per token (multiply and add per weight; for
    MoE the *active* parameters; the input-embedding lookup is counted like a
    matmul, which overstates Llama-3.1-8B by 6.5%). ``attention_flops_per_pair``
    is ``2 * layers * heads * (qk_dim + v_dim)``, i.e. ``4 * layers * heads *
    head_dim`` for QK^T and AV (see :attr:`ModelSpec.attention_flops_per_pair`).
    Peak is the dense BF16 datasheet number, or FP8 when ``dtype_bytes == 1``
    and the GPU has FP8. FLOPs split evenly over the ``tp`` GPUs.

    **memory** (seconds, per GPU, all GPUs in parallel)::

        (weight_bytes_read / tp + kv_bytes_per_token_per_gpu * (C + P))
        / (hbm_bandwidth * mbu)

    Weights are read once per step whatever the batch. Dense models read all
    of them; MoE models read the shared part plus the expected share of
    routed experts that at least one of the ``N`` tokens selects,
    ``1 - (1 - k / E) ** N`` for ``k`` of ``E`` experts (independent uniform
    routing), so a one-token step of DeepSeek-V3 reads ~37B parameters and a
    large batch reads all 671B. Decode attention reads each sequence's KV
    cache once (``C`` tokens); prefill writes the KV of its ``P`` new tokens
    (FlashAttention keeps prefill attention on chip, so its reads of earlier
    context are not counted). A GPU holds ``1 / min(tp, kv_heads)`` of each
    token's KV for GQA (heads are replicated beyond ``kv_heads``) and all of
    it for MLA (the latent is shared by every head, so vLLM replicates it).

    **comm** (seconds, only when ``tp > 1``)::

        2 * layers * (allreduce_latency
                      + 2 * (tp - 1) / tp * N * hidden * 2 bytes / link_bandwidth)

    Two ring all-reduces of the BF16 activations per layer (after attention
    and after the MLP), not overlapped with compute.

    **step** = ``overhead_ms + 1000 * (max(compute, memory) + comm)``.

    **KV capacity** per replica, in blocks of ``block_size`` tokens::

        floor(free_per_gpu / (kv_bytes_per_token_per_gpu * block_size))
        free_per_gpu = hbm * gpu_memory_utilization - weight_bytes / tp
                       - activation_reserve

    which for GQA with ``tp <= kv_heads`` equals ``floor((tp * hbm * util -
    weight_bytes - tp * activation_reserve) / (kv_bytes_per_token *
    block_size))``. Weights count in full (all experts) for MoE.

    **Calibration.** ``mfu``, ``mbu``, ``overhead_ms`` and
    ``attention_efficiency`` default to a named set of efficiencies
    (:data:`~inferasim.sim.presets.CALIBRATIONS`): ``"v0.2"`` (default on
    the H100 preset) is
    fitted to vLLM measurements of Llama-3.1-8B on an H100 SXM (BF16) and
    prices its prefills of 512 / 2k / 8k / 32k tokens at 11.8 / 45.0 / 197 /
    1116 ms (measured ~12 / 44 / 200 / 1113); ``"v0.1"`` keeps the earlier
    factors (mfu 0.45, mbu 0.8, overhead 0.5 ms), still the default on
    other GPUs. :meth:`calibrate` fits them
    to your own measurements. A step whose KV provably cannot fit the GPU's
    KV budget (its new tokens plus one sequence's context exceed it, which no
    prefix sharing can change) warns once per model; a batch whose summed
    contexts exceed the budget is not flagged, since shared prefixes may
    make it fit.

    **Limits.** A roofline is a lower bound on step time. It fits dense
    models well (see ``mbu``) but is optimistic where real kernels are far
    from peak: small-batch MoE decode (DeepSeek-V3 on 8 H200s prices a
    one-token step at 2.4 ms; a public vLLM run of an AWQ build on 8
    H100/H200s reports 61.5 tokens/s, 16 ms) and ROCm stacks. Calibrate
    ``mbu``/``mfu``/``overhead_ms`` to a measurement, or fit a
    :class:`~inferasim.sim.cost.LinearCostModel`.

    Parameters
    ----------
    model : str or ModelSpec, default "llama-3.1-8b"
        A key of :data:`~inferasim.sim.presets.MODELS` or a custom spec.
    gpu : str or GPUSpec, default "h100-80gb"
        A key of :data:`~inferasim.sim.presets.GPUS` or a custom spec.
    tp : int, default 1
        Tensor-parallel degree (GPUs per replica).
    dtype_bytes : int, optional
        Bytes per weight; default the checkpoint's (2, or 1 for DeepSeek-V3).
    kv_dtype_bytes : int, default 2
        Bytes per KV-cache value (2 for BF16, 1 for an FP8 cache).
    mfu : float, optional
        Fraction of peak FLOPs achieved by the weight GEMMs (default: the
        calibration's; v0.2 0.790, v0.1 0.45 from Megatron-LM's 413-430
        TFLOP/s per H100 on a Llama-3-style 8B model).
    mbu : float, optional
        Fraction of peak HBM bandwidth achieved (default: the calibration's;
        v0.2 0.948, v0.1 0.8). v0.1 reproduced vLLM's batch-1 decode of
        Llama-3.1-8B, 6.48 ms on an H100 (InferenceBench, vLLM 0.21), and ~75
        tokens/s on an A100-40GB (johnmusgrave.com vLLM sweep); v0.2 fits the
        AIConfigurator data's 6.2 ms.
    overhead_ms : float, optional
        Fixed cost per step (scheduler, sampling, kernel launches with CUDA
        graphs); default the calibration's.
    attention_efficiency : float, optional
        Fraction of peak FLOPs achieved by attention; default the
        calibration's (v0.2 0.644; v0.1 none, i.e. ``mfu``).
    calibration : str, optional
        Name of the efficiency set (:data:`~inferasim.sim.presets.CALIBRATIONS`)
        that fills the four factors above when they are not given; default
        ``"v0.2"`` on the H100 preset (where it was measured) and ``"v0.1"``
        on every other GPU.
    gpu_memory_utilization : float, default 0.9
        Share of HBM the engine may use (vLLM's flag of the same name).
    activation_reserve_gb : float, default 2.0
        Per GPU, for activations, CUDA graphs and the allocator (an
        assumption; vLLM profiles it at start-up).
    allreduce_latency_us : float, default 5.0
        Fixed latency of one all-reduce when ``tp > 1``.

    Examples
    --------
    >>> m = RooflineCostModel("llama-3.1-8b", "h100-80gb", calibration="v0.1")
    >>> m
    RooflineCostModel(model='llama-3.1-8b', gpu='h100-80gb', tp=1, mfu=0.45, mbu=0.8, overhead_ms=0.5, calibration='v0.1')
    >>> round(m.step_time_ms(0, 0, 1, 2048), 2)  # one decode token, 2k context
    6.59
    >>> m.step_time_ms(0, 0, np.array([1, 64]), np.array([2048, 64 * 2048])).round(2)
    array([ 6.59, 12.9 ])
    >>> m.kv_capacity_blocks(512)
    803
    >>> RooflineCostModel().mfu == RooflineCostModel(calibration="v0.2").mfu
    True
    """

    def __init__(
        self,
        model: str | ModelSpec = "llama-3.1-8b",
        gpu: str | GPUSpec = "h100-80gb",
        *,
        tp: int = 1,
        dtype_bytes: int | None = None,
        kv_dtype_bytes: int = 2,
        mfu: float | None = None,
        mbu: float | None = None,
        overhead_ms: float | None = None,
        gpu_memory_utilization: float = 0.9,
        activation_reserve_gb: float = 2.0,
        allreduce_latency_us: float = 5.0,
        attention_efficiency: float | None = None,
        calibration: str | None = None,
    ) -> None:
        if calibration is None:
            calibration = default_calibration(get_gpu(gpu))
        cal = get_calibration(calibration)
        self.calibration = calibration
        self.model = model
        self.gpu = gpu
        self.tp = tp
        self.dtype_bytes = dtype_bytes
        self.kv_dtype_bytes = kv_dtype_bytes
        self.mfu = cal.mfu if mfu is None else mfu
        self.mbu = cal.mbu if mbu is None else mbu
        self.overhead_ms = cal.overhead_ms if overhead_ms is None else overhead_ms
        if attention_efficiency is None:
            attention_efficiency = cal.attention_efficiency
        self.attention_efficiency = attention_efficiency
        self.gpu_memory_utilization = gpu_memory_utilization
        self.activation_reserve_gb = activation_reserve_gb
        self.allreduce_latency_us = allreduce_latency_us

        self.model_spec: ModelSpec = get_model(model)
        self.gpu_spec: GPUSpec = get_gpu(gpu)
        if isinstance(tp, bool) or not isinstance(tp, int | np.integer) or tp < 1:
            raise ValueError(f"tp must be an int >= 1, got {tp!r}")
        for name in ("dtype_bytes", "kv_dtype_bytes"):
            value = getattr(self, name)
            if value is not None and value not in (1, 2, 4):
                raise ValueError(f"{name} must be 1, 2 or 4 bytes, got {value!r}")
        for name in ("mfu", "mbu", "gpu_memory_utilization", "attention_efficiency"):
            value = getattr(self, name)
            if name == "attention_efficiency" and value is None:
                continue
            if not (isinstance(value, int | float) and 0 < value <= 1):
                raise ValueError(f"{name} must be a number in (0, 1], got {value!r}")
        for name in ("overhead_ms", "activation_reserve_gb", "allreduce_latency_us"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        self._precompute()

    # ------------------------------------------------------------------ constants
    def _precompute(self) -> None:
        ms, gs, tp = self.model_spec, self.gpu_spec, int(self.tp)
        b = self.weight_dtype_bytes
        tflops = gs.fp8_tflops if (b == 1 and gs.fp8_tflops is not None) else gs.bf16_tflops
        self._flops_per_s = tp * tflops * 1e12 * self.mfu
        self._bytes_per_s = gs.hbm_tb_s * 1e12 * self.mbu
        self._flops_per_token = 2.0 * ms.active
        # attention runs at attention_efficiency of peak: scale its FLOPs by
        # mfu / attention_efficiency (exactly 1.0 when they are equal or unset)
        att = self.mfu if self.attention_efficiency is None else self.attention_efficiency
        self._flops_per_pair = float(ms.attention_flops_per_pair) * (self.mfu / att)
        self._dense_bytes_gpu = ms.dense_params * b / tp
        self._expert_bytes_gpu = ms.expert_params * b / tp
        self._miss = 1.0 - ms.experts_per_token / ms.experts if ms.is_moe else 1.0
        kv_split = 1 if ms.is_mla else min(tp, ms.kv_heads)
        self._kv_gpu = self.kv_bytes_per_token / kv_split
        if tp > 1:
            self._comm_fixed_s = 2 * ms.layers * self.allreduce_latency_us * 1e-6
            self._comm_per_token_s = (
                2 * ms.layers * 2.0 * (tp - 1) / tp * ms.hidden * 2 / (gs.link_gb_s * 1e9)
            )
        else:
            self._comm_fixed_s = 0.0
            self._comm_per_token_s = 0.0
        # tokens of KV the GPU can hold (see _kv_floor: above this warns once)
        budget = gs.hbm_gb * 1e9 * self.gpu_memory_utilization
        free = budget - self.weight_bytes / tp - self.activation_reserve_gb * 1e9
        # (when the weights do not fit, kv_capacity_blocks raises and steps are what-ifs)
        self._kv_limit_tokens = free / self._kv_gpu if free > 0 else float("inf")
        self._warned_kv = False
        # decode step times by context, per batch size (see _dt_table): b -> (lo, hi, dts)
        self._dt_tables: dict[int, tuple[int, int, np.ndarray]] = {}
        self._dt_size = 0
        # the scalar formulas on these constants (compiled with the simulator's core)
        self._kernel = RooflineKernel(self)

    def _check_kv(self, p: Any, a: Any, d: Any, c: Any) -> None:
        """Warn once when the step's KV provably exceeds the GPU's budget.

        ``C + P`` counts a shared prefix once per sequence that reads it, so
        it may exceed what prefix caching actually holds. What no sharing
        can shrink: the new tokens ``P`` plus the longest context of any one
        sequence, which is at least the mean decode context ``C / D`` and
        the mean cached context of the prefill chunks, ``A / P - (P + 1) / 2``.
        """
        p, a, d, c = (np.asarray(x, dtype=np.float64) for x in (p, a, d, c))
        with np.errstate(divide="ignore", invalid="ignore"):
            pre = np.where(p > 0, np.maximum(a / p - (p + 1.0) / 2.0, 0.0), 0.0)
            dec = np.where(d > 0, c / d, 0.0)
        floor = p + np.maximum(pre, dec)
        if floor.size and float(floor.max()) > self._kv_limit_tokens:
            self._warn_kv(float(floor.max()))

    def _warn_kv(self, tokens: float) -> None:
        if self._warned_kv:
            return
        self._warned_kv = True
        warnings.warn(
            f"{self!r} priced a step holding at least {tokens:,.0f} tokens of KV (new tokens plus "
            f"one sequence's context, whatever the prefix sharing), more than "
            f"the {self._kv_limit_tokens:,.0f} that fit in {self.gpu_spec.name} HBM after "
            f"weights (gpu_memory_utilization={self.gpu_memory_utilization:g}); the step "
            "time is a what-if (warned once per model)",
            UserWarning,
            stacklevel=3,
        )

    @property
    def weight_dtype_bytes(self) -> int:
        """Bytes per weight used: ``dtype_bytes`` or the checkpoint's own.

        Examples
        --------
        >>> RooflineCostModel("deepseek-v3", "h200", tp=8).weight_dtype_bytes
        1
        """
        return self.model_spec.weight_dtype_bytes if self.dtype_bytes is None else self.dtype_bytes

    @property
    def weight_bytes(self) -> float:
        """Bytes of all weights of one replica (all experts for MoE).

        Examples
        --------
        >>> RooflineCostModel("llama-3.1-8b").weight_bytes  # 8,030,261,248 * 2
        16060522496.0
        """
        return float(self.model_spec.params * self.weight_dtype_bytes)

    @property
    def kv_bytes_per_token(self) -> float:
        """KV-cache bytes of one token over all layers (whole model, not per GPU).

        Examples
        --------
        >>> RooflineCostModel("llama-3.1-8b").kv_bytes_per_token  # 2*32*8*128*2
        131072.0
        """
        return float(self.model_spec.kv_elements_per_token * self.kv_dtype_bytes)

    @property
    def kv_bytes_per_token_per_gpu(self) -> float:
        """KV bytes of one token held by each GPU of the replica.

        Examples
        --------
        >>> RooflineCostModel("llama-3.1-70b", tp=4).kv_bytes_per_token_per_gpu
        81920.0
        """
        return self._kv_gpu

    # --------------------------------------------------------------- the protocol
    def step_time_ms(
        self,
        prefill_tokens: ArrayLike,
        prefill_attention: ArrayLike,
        decode_seqs: ArrayLike,
        decode_context: ArrayLike,
    ) -> ArrayLike:
        """Duration of one step in ms (elementwise, broadcasting).

        See the class docstring for the formula. Scalars in give a float out.

        Examples
        --------
        >>> m = RooflineCostModel("llama-3.1-8b", "h100-80gb")
        >>> round(m.step_time_ms(4096, prefill_attention_pairs(4096, 0), 0, 0), 1)  # v0.2
        92.3
        >>> m.step_time_ms(-1, 0, 0, 0)
        Traceback (most recent call last):
        ...
        ValueError: prefill_tokens must be finite and >= 0, got min -1.0
        """
        p, a, d, c = prefill_tokens, prefill_attention, decode_seqs, decode_context
        if (
            isinstance(p, _NUMBER)
            and isinstance(a, _NUMBER)
            and isinstance(d, _NUMBER)
            and isinstance(c, _NUMBER)
            and 0 <= p < _INF
            and 0 <= a < _INF
            and 0 <= d < _INF
            and 0 <= c < _INF
        ):
            # Scalar fast path (the simulator prices one step at a time): the
            # same IEEE operations in the same order as the array path below,
            # so both give bit-identical results (tested).
            lim = self._kv_limit_tokens
            if (p + c > lim or a > (lim - p) * p) and not self._warned_kv:
                self._check_kv(p, a, d, c)
            return self._step_scalar(float(p), float(a), float(d), float(c))
        args = []
        for name, value in zip(
            _ARG_NAMES,
            (prefill_tokens, prefill_attention, decode_seqs, decode_context),
            strict=True,
        ):
            arr = np.asarray(value, dtype=np.float64)
            if arr.size and not (np.isfinite(arr).all() and arr.min() >= 0):
                bad = arr[~np.isfinite(arr)] if not np.isfinite(arr).all() else arr.min()
                shown = float(np.ravel(bad)[0])
                raise ValueError(f"{name} must be finite and >= 0, got min {shown!r}")
            args.append(arr)
        p, a, d, c = args
        if not self._warned_kv:
            self._check_kv(p, a, d, c)
        n = p + d
        compute = (self._flops_per_token * n + self._flops_per_pair * (a + c)) / self._flops_per_s
        if self.model_spec.is_moe:
            touched = 1.0 - np.power(self._miss, n)
            weights = self._dense_bytes_gpu + self._expert_bytes_gpu * touched
        else:
            weights = self._dense_bytes_gpu
        memory = (weights + self._kv_gpu * (c + p)) / self._bytes_per_s
        comm = self._comm_fixed_s + self._comm_per_token_s * n
        out = self.overhead_ms + 1e3 * (np.maximum(compute, memory) + comm)
        return float(out) if np.ndim(out) == 0 else out

    def _step_scalar(self, p: float, a: float, d: float, c: float) -> float:
        return self._kernel.step(p, a, d, c)

    def _decode_run(self, ends: Any, e: float, b: int, s: int, k: int) -> float:
        """Append the ends of ``k`` pure-decode steps to ``ends`` (engine use).

        ``ends`` is a list of floats or an ``array("d")``.

        Step ``j`` decodes ``b`` sequences with ``s + b * j`` tokens of context
        and ends at ``e + dt_0 + ... + dt_j`` (summed left to right). Each
        ``dt`` is bit-identical to ``step_time_ms(0, 0, b, s + b * j)``: the
        same operations with the zero prefill terms dropped (``x + 0.0 == x``
        for ``x >= 0``) and no argument checks. Returns the last end.

        Runs of more than a few steps read the step times from a table of
        ``dt`` by context for this ``b`` (:meth:`_dt_table`, the same
        operations elementwise in numpy), then sum them left to right in C
        (an in-place cumulative sum, or :func:`itertools.accumulate` for short
        runs into a list: both sequential, so equal to the loop's ``e += dt``).
        """
        if b > 0 and k > _TABLE_MIN_STEPS:
            c1 = s + b * (k - 1)
            if c1 / b > self._kv_limit_tokens:
                self._warn_kv(c1 / b)
            tab = self._dt_tables.get(b)
            if tab is None or s < tab[0] or c1 >= tab[1]:
                tab = self._dt_table(b, s, c1)
            if tab is not None:
                lo, _, dts = tab
                seg = dts[s - lo : c1 - lo + 1 : b]
                to_list = type(ends) is list
                # short runs: accumulate on Python floats (numpy's fixed costs dominate);
                # longer ones: a copy summed in place (both sequential: the same sums)
                if k <= (_ACCUMULATE_MAX_LIST_STEPS if to_list else _ACCUMULATE_MAX_STEPS):
                    it = accumulate(seg.tolist(), initial=e)
                    next(it)
                    ends.extend(it)
                    return ends[-1]
                seg = seg.copy()
                seg[0] += e
                seg.cumsum(out=seg)
                if to_list:
                    ends.extend(seg.tolist())
                else:  # an array("d") (the engine's): copied in as doubles
                    ends.frombytes(seg.tobytes())
                return ends[-1]
        return self._decode_loop(ends, e, b, s, k)

    def _dt_table(self, b: int, s: int, c1: int) -> tuple[int, int, np.ndarray] | None:
        """A table of decode step times of ``b`` sequences by context covering
        ``[s, c1]`` (grown from the one cached for ``b``); None past the size cap.

        Entry ``c - lo`` is ``step_time_ms(0, 0, b, c)``, bit for bit: the
        operations of :meth:`_decode_dt` elementwise (IEEE arithmetic, the
        same in numpy as on Python floats), without its KV-fit warning (the
        caller warns for the contexts it reads, as the loop does).
        """
        old = self._dt_tables.get(b)
        lo, hi = s, c1 + 1
        if old is not None:
            lo, hi = min(lo, old[0]), max(hi, old[1])
            self._dt_size -= old[1] - old[0]
        span = hi - lo
        grow = span if span > 4096 else 4096  # amortise: each rebuild at least doubles
        lo = lo - grow // 4 if lo > grow // 4 else 0
        hi = hi + grow
        if self._dt_size + (hi - lo) > _TABLE_MAX_ENTRIES:
            if old is not None:
                self._dt_size += old[1] - old[0]
            return None
        n = float(b)
        weights, comm = self._batch_fixed(n)
        c = np.arange(lo, hi, dtype=np.float64)
        compute = (self._flops_per_token * n + self._flops_per_pair * c) / self._flops_per_s
        memory = (weights + self._kv_gpu * c) / self._bytes_per_s
        dts = self.overhead_ms + 1e3 * (np.maximum(compute, memory) + comm)
        tab = (lo, hi, dts)
        self._dt_tables[b] = tab
        self._dt_size += hi - lo
        return tab

    def _batch_fixed(self, n: float) -> tuple[float, float]:
        """Weight bytes read and communication seconds of a decode step of ``n``
        sequences: the terms of :meth:`step_time_ms` that do not depend on the
        context (the same operations, so the tables stay bit-identical)."""
        comm = self._comm_fixed_s + self._comm_per_token_s * n
        if self.model_spec.is_moe:
            weights = self._dense_bytes_gpu + self._expert_bytes_gpu * (
                1.0 - float(np.power(self._miss, n))
            )
        else:
            weights = self._dense_bytes_gpu
        return weights, comm

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_dt_tables"] = {}  # a cache: not pickled (sweeps ship models to workers)
        state["_dt_size"] = 0
        del state["_kernel"]  # (rebuilt from the constants)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._kernel = RooflineKernel(self)

    def _native_kernel(self) -> RooflineKernel | None:
        """The kernel the scheduler may call instead of :meth:`step_time_ms` and
        :meth:`_decode_run` (None when a subclass overrides either)."""
        cls = type(self)
        if (
            cls.step_time_ms is RooflineCostModel.step_time_ms
            and cls._decode_run is RooflineCostModel._decode_run
            and cls._step_scalar is RooflineCostModel._step_scalar
        ):
            return self._kernel
        return None

    def _decode_loop(self, ends: Any, e: float, b: int, s: int, k: int) -> float:
        """:meth:`_decode_run` step by step (short runs; see ``RooflineKernel.run``)."""
        if type(ends) is list:
            return self._kernel.run(ends, e, b, s, k)
        run: list[float] = []
        e = self._kernel.run(run, e, b, s, k)
        ends.extend(run)
        return e

    def _decode_dt(self, b: np.ndarray, c: np.ndarray) -> np.ndarray:
        """Times of pure-decode steps of ``b`` sequences with ``c`` context (engine use).

        Elementwise bit-identical to ``step_time_ms(0, 0, b, c)`` for int64
        arrays ``b, c >= 0``, without the argument checks.
        """
        n = b.astype(np.float64)
        c = c.astype(np.float64)
        # max(c / n) <= c.max() / n.min(): two reductions rule out the warning
        # in nearly every call; the exact check runs only when the bound fails
        if c.size and not self._warned_kv and c.max() > self._kv_limit_tokens * n.min():
            self._check_kv(0.0, 0.0, n, c)
        compute = (self._flops_per_token * n + self._flops_per_pair * c) / self._flops_per_s
        if self.model_spec.is_moe:
            touched = 1.0 - np.power(self._miss, n)
            weights = self._dense_bytes_gpu + self._expert_bytes_gpu * touched
        else:
            weights = self._dense_bytes_gpu
        memory = (weights + self._kv_gpu * c) / self._bytes_per_s
        comm = self._comm_fixed_s + self._comm_per_token_s * n
        return self.overhead_ms + 1e3 * (np.maximum(compute, memory) + comm)

    def kv_capacity_blocks(self, block_size: int) -> int:
        """KV-cache blocks of ``block_size`` tokens one replica holds.

        Raises ValueError when the weights (plus the activation reserve) do
        not fit in ``gpu_memory_utilization`` of the HBM of ``tp`` GPUs.

        Examples
        --------
        >>> RooflineCostModel("llama-3.1-8b", "h100-80gb").kv_capacity_blocks(16)
        25720
        >>> RooflineCostModel("llama-3.1-70b", "h100-80gb").kv_capacity_blocks(16)
        Traceback (most recent call last):
        ...
        ValueError: Llama-3.1-70B weights need 141.1 GB (70.55B params x 2 bytes) ...
        """
        if isinstance(block_size, bool) or not isinstance(block_size, int | np.integer):
            raise ValueError(f"block_size must be a positive int, got {block_size!r}")
        if block_size < 1:
            raise ValueError(f"block_size must be a positive int, got {block_size!r}")
        free = self._free_bytes_per_gpu()
        blocks = math.floor(free / (self._kv_gpu * int(block_size)))
        if blocks < 1:
            raise ValueError(
                f"only {free / 1e9:.2f} GB per GPU is left for the KV cache of "
                f"{self.model_spec.name}, less than one block of {block_size} tokens "
                f"({self._kv_gpu * block_size / 1e9:.3f} GB); use a larger tp or GPU"
            )
        return int(blocks)

    # ------------------------------------------------------------------- helpers
    def _free_bytes_per_gpu(self) -> float:
        gs, tp = self.gpu_spec, int(self.tp)
        budget = gs.hbm_gb * 1e9 * self.gpu_memory_utilization
        reserve = self.activation_reserve_gb * 1e9
        free = budget - self.weight_bytes / tp - reserve
        if free > 0:
            return free
        need_tp = math.ceil(self.weight_bytes / (budget - reserve)) if budget > reserve else None
        if need_tp is None:
            hint = "lower activation_reserve_gb or raise gpu_memory_utilization"
        else:
            pow2 = 1 << (need_tp - 1).bit_length()
            hint = f"use tp >= {need_tp} (e.g. tp={pow2}) or a GPU with more HBM"
        raise ValueError(
            f"{self.model_spec.name} weights need {self.weight_bytes / 1e9:.1f} GB "
            f"({self.model_spec.params / 1e9:.2f}B params x {self.weight_dtype_bytes} bytes) "
            f"= {self.weight_bytes / tp / 1e9:.1f} GB per GPU at tp={tp}, but each "
            f"{gs.name} offers {budget / 1e9:.1f} GB ({gs.hbm_gb:g} GB x "
            f"gpu_memory_utilization {self.gpu_memory_utilization:g}) minus "
            f"{self.activation_reserve_gb:g} GB activation reserve; {hint}"
        )

    def describe(self) -> pd.Series:
        """Headline numbers of this configuration as a pandas Series.

        ``kv_blocks_512`` is NaN when the weights do not fit.

        Examples
        --------
        >>> s = RooflineCostModel("llama-3.1-8b", "h100-80gb").describe()
        >>> s["weight_GB"], s["kv_bytes_per_token"], s["kv_blocks_512"]
        (16.06, 131072, 803)
        >>> list(s.index)  # doctest: +NORMALIZE_WHITESPACE
        ['model', 'gpu', 'tp', 'weight_GB', 'kv_bytes_per_token', 'kv_blocks_512',
         'prefill_tok_per_s_4k', 'decode_ms_batch1_ctx2k', 'decode_ms_batch64_ctx2k']
        """
        try:
            blocks: float | int = self.kv_capacity_blocks(512)
        except ValueError:
            blocks = float("nan")
        prefill_ms = self.step_time_ms(4096, prefill_attention_pairs(4096, 0), 0, 0)
        return pd.Series(
            {
                "model": self.model_spec.name,
                "gpu": self.gpu_spec.name,
                "tp": int(self.tp),
                "weight_GB": round(self.weight_bytes / 1e9, 2),
                "kv_bytes_per_token": int(self.kv_bytes_per_token),
                "kv_blocks_512": blocks,
                "prefill_tok_per_s_4k": round(4096 / (prefill_ms / 1e3)),
                "decode_ms_batch1_ctx2k": round(self.step_time_ms(0, 0, 1, 2048), 3),
                "decode_ms_batch64_ctx2k": round(self.step_time_ms(0, 0, 64, 64 * 2048), 3),
            },
            name="roofline",
            dtype=object,
        )

    def __repr__(self) -> str:
        model = self.model if isinstance(self.model, str) else self.model_spec.name
        gpu = self.gpu if isinstance(self.gpu, str) else self.gpu_spec.name
        extra = ""
        if self.dtype_bytes is not None:
            extra += f", dtype_bytes={self.dtype_bytes}"
        if self.kv_dtype_bytes != 2:
            extra += f", kv_dtype_bytes={self.kv_dtype_bytes}"
        if self.attention_efficiency is not None:
            extra += f", attention_efficiency={self.attention_efficiency:g}"
        return (
            f"RooflineCostModel(model={model!r}, gpu={gpu!r}, tp={self.tp}, mfu={self.mfu:g}, "
            f"mbu={self.mbu:g}, overhead_ms={self.overhead_ms:g}{extra}, "
            f"calibration={self.calibration!r})"
        )

    # ---------------------------------------------------------------- calibration
    def _with(self, **changes: Any) -> RooflineCostModel:
        kwargs: dict[str, Any] = {
            "tp": self.tp,
            "dtype_bytes": self.dtype_bytes,
            "kv_dtype_bytes": self.kv_dtype_bytes,
            "mfu": self.mfu,
            "mbu": self.mbu,
            "overhead_ms": self.overhead_ms,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "activation_reserve_gb": self.activation_reserve_gb,
            "allreduce_latency_us": self.allreduce_latency_us,
            "attention_efficiency": self.attention_efficiency,
            "calibration": self.calibration,
        }
        kwargs.update(changes)
        return RooflineCostModel(self.model, self.gpu, **kwargs)

    def calibrate(
        self,
        measurements: Any,
        *,
        parameters: tuple[str, ...] | list[str] = ("mfu", "mbu", "overhead_ms"),
        attention: bool = False,
    ) -> Calibration:
        """Fit efficiencies to measured step times by least squares.

        Minimises the sum of squared *relative* errors (so a 6 ms decode step
        weighs as much as a 1 s prefill) over the parameters named, starting
        from this model's values and keeping each in its valid range (``mfu``,
        ``mbu``, ``attention_efficiency`` in (0, 1], ``overhead_ms >= 0``),
        with :func:`scipy.optimize.least_squares`. Everything else (model,
        GPU, tp, dtypes, memory) is kept.

        Parameters
        ----------
        measurements : DataFrame or iterable of dicts
            Rows ``kind, tokens, batch, context, ms``; see
            :mod:`inferasim.sim.calibrate`.
        parameters : sequence of str, default ("mfu", "mbu", "overhead_ms")
            Which of ``mfu``, ``mbu``, ``overhead_ms``,
            ``attention_efficiency`` to fit.
        attention : bool, default False
            Also fit ``attention_efficiency`` (a separate efficiency for the
            attention FLOPs of prefill).

        Returns
        -------
        Calibration
            ``.model`` the fitted model, ``.report`` the per-point measured,
            predicted and error (and the same for this model, ``before_*``),
            ``.params`` the fitted values. Unpacks as ``model, report``.

        Examples
        --------
        >>> truth = RooflineCostModel(mfu=0.6, mbu=0.7, overhead_ms=1.0, calibration="v0.1")
        >>> points = [{"kind": "prefill", "tokens": t, "ms": truth.step_time_ms(
        ...                t, prefill_attention_pairs(t, 0), 0, 0)} for t in (1024, 8192)]
        >>> points += [{"kind": "decode", "batch": b, "context": 1000, "ms": truth.step_time_ms(
        ...                0, 0, b, b * 1000)} for b in (1, 64)]
        >>> fit = RooflineCostModel(calibration="v0.1").calibrate(points)
        >>> {k: round(v, 4) for k, v in fit.params.items()}
        {'mfu': 0.6, 'mbu': 0.7, 'overhead_ms': 1.0}
        """
        from scipy.optimize import least_squares

        names = list(parameters)
        if attention and "attention_efficiency" not in names:
            names.append("attention_efficiency")
        names = check_names(
            names, ("mfu", "mbu", "overhead_ms", "attention_efficiency"), "calibrate"
        )
        df = measurements_frame(measurements)
        p, a, d, c = step_arguments(df)
        measured = df["ms"].to_numpy(dtype=np.float64)

        start = []
        for n in names:
            value = getattr(self, n)
            start.append(self.mfu if value is None else float(value))
        lower = [0.0 if n == "overhead_ms" else 1e-3 for n in names]
        upper = [np.inf if n == "overhead_ms" else 1.0 for n in names]
        x0 = np.clip(np.array(start), lower, [u if np.isfinite(u) else 1e9 for u in upper])

        def residuals(x: np.ndarray) -> np.ndarray:
            m = self._with(**dict(zip(names, map(float, x), strict=True)))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                return (np.asarray(m.step_time_ms(p, a, d, c)) - measured) / measured

        sol = least_squares(residuals, x0, bounds=(lower, upper), x_scale="jac", method="trf")
        params = {n: float(v) for n, v in zip(names, sol.x, strict=True)}
        fitted = self._with(**params)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            predicted = np.asarray(fitted.step_time_ms(p, a, d, c), dtype=np.float64)
            before = np.asarray(self.step_time_ms(p, a, d, c), dtype=np.float64)
        return Calibration(fitted, report_frame(df, predicted, before), params)
