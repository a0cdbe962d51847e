"""Roofline step-time model built from a model preset and a GPU preset.

The default cost model of the simulator, :class:`RooflineCostModel`: step
time from FLOPs and bytes, ``overhead + max(compute, memory) + comm``.

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
other GPUs. :meth:`RooflineCostModel.calibrate` fits them
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
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pandas as pd

from inferasim.sim._roofline_kernel import RooflineKernel
from inferasim.sim.calibrate import Calibration, fit_roofline
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


def _step_arrays(*values: ArrayLike) -> list[np.ndarray]:
    """``step_time_ms``'s arguments as float64 arrays, checked finite and >= 0."""
    out = []
    for name, value in zip(_ARG_NAMES, values, strict=True):
        arr = np.asarray(value, dtype=np.float64)
        if arr.size and not (np.isfinite(arr).all() and arr.min() >= 0):
            bad = arr[~np.isfinite(arr)] if not np.isfinite(arr).all() else arr.min()
            shown = float(np.ravel(bad)[0])
            raise ValueError(f"{name} must be finite and >= 0, got min {shown!r}")
        out.append(arr)
    return out


def _headline(m: Any) -> pd.Series:
    """:meth:`RooflineCostModel.describe` of the model ``m``."""
    try:
        blocks: float | int = m.kv_capacity_blocks(512)
    except ValueError:
        blocks = float("nan")
    prefill_ms = m.step_time_ms(4096, prefill_attention_pairs(4096, 0), 0, 0)
    return pd.Series(
        {
            "model": m.model_spec.name,
            "gpu": m.gpu_spec.name,
            "tp": int(m.tp),
            "weight_GB": round(m.weight_bytes / 1e9, 2),
            "kv_bytes_per_token": int(m.kv_bytes_per_token),
            "kv_blocks_512": blocks,
            "prefill_tok_per_s_4k": round(4096 / (prefill_ms / 1e3)),
            "decode_ms_batch1_ctx2k": round(m.step_time_ms(0, 0, 1, 2048), 3),
            "decode_ms_batch64_ctx2k": round(m.step_time_ms(0, 0, 64, 64 * 2048), 3),
        },
        name="roofline",
        dtype=object,
    )


class KvBudget:
    """One GPU's memory for KV after the weights, and the model's what-if warning.

    ``free`` bytes per GPU are left for the KV cache (``hbm *
    gpu_memory_utilization - weight_bytes / tp - activation_reserve``);
    ``limit`` is the tokens of KV that fit there. A step whose KV provably
    exceeds it warns once per model (:meth:`check`): ``C + P``
    counts a shared prefix once per sequence that reads it, so it may exceed
    what prefix caching actually holds; what no sharing can shrink is the
    new tokens ``P`` plus the longest context of any one sequence, which is
    at least the mean decode context ``C / D`` and the mean cached context
    of the prefill chunks, ``A / P - (P + 1) / 2``.

    Examples
    --------
    >>> import warnings
    >>> m = RooflineCostModel()
    >>> with warnings.catch_warnings(record=True) as w:
    ...     warnings.simplefilter("always")
    ...     _ = m.step_time_ms(0, 0, 1, 10**7)
    >>> m._kv.warned, "what-if" in str(w[0].message)
    (True, True)
    """

    def __init__(self, model: Any) -> None:
        gs, tp = model.gpu_spec, int(model.tp)
        self.model = model
        self.budget = gs.hbm_gb * 1e9 * model.gpu_memory_utilization
        self.reserve = model.activation_reserve_gb * 1e9
        self.free = self.budget - model.weight_bytes / tp - self.reserve
        # (when the weights do not fit, blocks() raises and steps are what-ifs)
        self.limit = self.free / model._kv_gpu if self.free > 0 else float("inf")
        self.warned = False

    def blocks(self, block_size: int) -> int:
        """KV blocks of ``block_size`` tokens the replica holds (ValueError when
        the weights leave no room for one)."""
        m = self.model
        free = self.free
        if free <= 0:
            raise ValueError(self._no_room())
        blocks = math.floor(free / (m._kv_gpu * int(block_size)))
        if blocks < 1:
            raise ValueError(
                f"only {free / 1e9:.2f} GB per GPU is left for the KV cache of "
                f"{m.model_spec.name}, less than one block of {block_size} tokens "
                f"({m._kv_gpu * block_size / 1e9:.3f} GB); use a larger tp or GPU"
            )
        return int(blocks)

    def _no_room(self) -> str:
        """Why the weights leave no KV memory, and what would."""
        m = self.model
        gs, tp = m.gpu_spec, int(m.tp)
        budget, reserve = self.budget, self.reserve
        need_tp = math.ceil(m.weight_bytes / (budget - reserve)) if budget > reserve else None
        if need_tp is None:
            hint = "lower activation_reserve_gb or raise gpu_memory_utilization"
        else:
            pow2 = 1 << (need_tp - 1).bit_length()
            hint = f"use tp >= {need_tp} (e.g. tp={pow2}) or a GPU with more HBM"
        return (
            f"{m.model_spec.name} weights need {m.weight_bytes / 1e9:.1f} GB "
            f"({m.model_spec.params / 1e9:.2f}B params x {m.weight_dtype_bytes} bytes) "
            f"= {m.weight_bytes / tp / 1e9:.1f} GB per GPU at tp={tp}, but each "
            f"{gs.name} offers {budget / 1e9:.1f} GB ({gs.hbm_gb:g} GB x "
            f"gpu_memory_utilization {m.gpu_memory_utilization:g}) minus "
            f"{m.activation_reserve_gb:g} GB activation reserve; {hint}"
        )

    def check(self, p: Any, a: Any, d: Any, c: Any) -> None:
        """Warn (once) when the steps ``(p, a, d, c)`` (scalars or arrays) cannot fit."""
        p, a, d, c = (np.asarray(x, dtype=np.float64) for x in (p, a, d, c))
        with np.errstate(divide="ignore", invalid="ignore"):
            pre = np.where(p > 0, np.maximum(a / p - (p + 1.0) / 2.0, 0.0), 0.0)
            dec = np.where(d > 0, c / d, 0.0)
        floor = p + np.maximum(pre, dec)
        if floor.size and float(floor.max()) > self.limit:
            self.warn(float(floor.max()))

    def warn(self, tokens: float) -> None:
        """Warn (once) that a step holds at least ``tokens`` of KV."""
        if self.warned:
            return
        self.warned = True
        m = self.model
        warnings.warn(
            f"{m!r} priced a step holding at least {tokens:,.0f} tokens of KV (new tokens plus "
            f"one sequence's context, whatever the prefix sharing), more than "
            f"the {self.limit:,.0f} that fit in {m.gpu_spec.name} HBM after "
            f"weights (gpu_memory_utilization={m.gpu_memory_utilization:g}); the step "
            "time is a what-if (warned once per model)",
            UserWarning,
            stacklevel=4,
        )


class RooflineCostModel:
    """Step time from FLOPs and bytes: ``overhead + max(compute, memory) + comm``.

    The formulas, the calibration presets and the model's limits are in the
    module docstring (:mod:`inferasim.sim.roofline`).

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
        self._kv = KvBudget(self)  # (the KV memory per GPU; the what-if warning)
        # the scalar formulas on these constants (compiled with the simulator's core)
        self._kernel = RooflineKernel(self)

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
            fp, fa, fd, fc = float(p), float(a), float(d), float(c)
            self._kernel.check_fit(fp, fa, fd, fc)
            return self._kernel.formula(fp, fa, fd, fc)
        p, a, d, c = _step_arrays(prefill_tokens, prefill_attention, decode_seqs, decode_context)
        if not self._kv.warned:
            self._kv.check(p, a, d, c)
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

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_kernel"]  # (rebuilt from the constants)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._kernel = RooflineKernel(self)

    def kernel(self) -> RooflineKernel | None:
        """The compiled kernel the simulator prices this model's steps with (see
        :mod:`inferasim.sim.cost`); None when a subclass overrides
        :meth:`step_time_ms` (the simulator then calls it).

        The kernel is the scalar copy of this model's array formula (the same
        operations in the same order, bit-identical results): calling
        :meth:`step_time_ms` per step instead costs the conversation benchmark
        row about 2x (measured in one process, alternating).

        Examples
        --------
        >>> m = RooflineCostModel()
        >>> m.kernel().step(512, 131328, 2, 4096) == m.step_time_ms(512, 131328, 2, 4096)
        True
        """
        if type(self).step_time_ms is RooflineCostModel.step_time_ms:
            return self._kernel
        return None

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
        return self._kv.blocks(int(block_size))

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
        return _headline(self)

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
        names = list(parameters)
        if attention and "attention_efficiency" not in names:
            names.append("attention_efficiency")
        return fit_roofline(self, measurements, names)
