"""Model and GPU presets for the roofline cost model.

Every number carries its source in a comment. Model shapes come from the
model's Hugging Face ``config.json`` (field names in brackets); parameter
counts are recomputed from those fields (embeddings, attention, MLP or
experts, norms, biases) and checked against the published count, which the
tests repeat. GPU numbers are the vendor datasheet values: *dense* (no 2:4
sparsity) BF16/FP8 tensor throughput, HBM capacity in decimal GB as marketed
(``nvidia-smi`` reports slightly more, e.g. 81,559 MiB for an H100, so the
capacity derived from these numbers is a little conservative) and peak HBM
bandwidth.

Names are lower case: ``MODELS["llama-3.1-8b"]``, ``GPUS["h100-80gb"]``.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

__all__ = [
    "CALIBRATIONS",
    "DEFAULT_CALIBRATION",
    "DEFAULT_CALIBRATIONS",
    "GPUS",
    "MODELS",
    "Efficiency",
    "default_calibration",
    "GPUSpec",
    "ModelSpec",
    "get_calibration",
    "get_gpu",
    "get_model",
]


@dataclass(frozen=True)
class ModelSpec:
    """Shape of a decoder-only transformer, enough for FLOPs and bytes.

    Parameters
    ----------
    name : str
        Display name.
    layers, hidden, heads, kv_heads, head_dim, intermediate, vocab : int
        ``num_hidden_layers``, ``hidden_size``, ``num_attention_heads``,
        ``num_key_value_heads``, query/key head dimension, ``intermediate_size``
        (dense MLP), ``vocab_size``.
    params : int
        Total parameters (what the weights occupy).
    active_params : int, optional
        Parameters used per token (MoE: shared part plus the routed experts
        chosen); defaults to ``params``.
    v_head_dim : int, optional
        Value head dimension when it differs from ``head_dim`` (MLA).
    kv_lora_rank, qk_rope_head_dim : int, optional
        Multi-head latent attention (DeepSeek): the KV cache holds one
        compressed latent of ``kv_lora_rank`` plus a shared RoPE key of
        ``qk_rope_head_dim`` per token and layer.
    experts, experts_per_token : int
        Routed experts per MoE layer and how many each token uses (0 = dense).
    expert_params : int
        Parameters of all routed experts together (the part of ``params`` a
        small batch does not read in full).
    weight_dtype_bytes : int
        Bytes per weight of the released checkpoint (2 for BF16, 1 for FP8).

    Examples
    --------
    >>> m = MODELS["llama-3.1-8b"]
    >>> m.kv_elements_per_token  # 2 (K and V) * 32 layers * 8 kv heads * 128
    65536
    >>> m.is_mla, m.is_moe
    (False, False)
    """

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    params: int
    active_params: int | None = None
    v_head_dim: int | None = None
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    experts: int = 0
    experts_per_token: int = 0
    expert_params: int = 0
    weight_dtype_bytes: int = 2

    def __post_init__(self) -> None:
        for field in ("layers", "hidden", "heads", "kv_heads", "head_dim", "params"):
            value = getattr(self, field)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"ModelSpec.{field} must be a positive int, got {value!r}")
        if self.is_moe and not 0 < self.experts_per_token <= self.experts:
            raise ValueError(
                f"ModelSpec.experts_per_token must be in 1..experts={self.experts}, "
                f"got {self.experts_per_token}"
            )
        if not 0 <= self.expert_params < self.params:
            raise ValueError("ModelSpec.expert_params must be in [0, params)")

    @property
    def is_mla(self) -> bool:
        """True for multi-head latent attention (compressed KV cache).

        Examples
        --------
        >>> MODELS["deepseek-v2-lite"].is_mla
        True
        """
        return self.kv_lora_rank is not None

    @property
    def is_moe(self) -> bool:
        """True for a mixture-of-experts model.

        Examples
        --------
        >>> MODELS["deepseek-v3"].is_moe
        True
        """
        return self.experts > 0

    @property
    def active(self) -> int:
        """Parameters used per token (``active_params`` or ``params``).

        Examples
        --------
        >>> MODELS["llama-3.1-8b"].active == MODELS["llama-3.1-8b"].params
        True
        """
        return self.params if self.active_params is None else self.active_params

    @property
    def kv_elements_per_token(self) -> int:
        """KV-cache values stored per token over all layers.

        GQA/MHA: ``2 * layers * kv_heads * head_dim`` (K and V).
        MLA: ``layers * (kv_lora_rank + qk_rope_head_dim)`` (one latent).

        Examples
        --------
        >>> MODELS["deepseek-v3"].kv_elements_per_token  # 61 * (512 + 64)
        35136
        """
        if self.is_mla:
            assert self.kv_lora_rank is not None and self.qk_rope_head_dim is not None
            return self.layers * (self.kv_lora_rank + self.qk_rope_head_dim)
        return 2 * self.layers * self.kv_heads * self.head_dim

    @property
    def attention_flops_per_pair(self) -> int:
        """FLOPs of one query-key pair over all layers (QK^T plus AV).

        ``2 * layers * heads * (head_dim + v_head_dim)``; for ordinary heads
        (``v_head_dim == head_dim``) that is ``4 * layers * heads * head_dim``.
        MLA counts its prefill form (per-head keys of ``qk_nope + qk_rope`` and
        values of ``v_head_dim``).

        Examples
        --------
        >>> MODELS["llama-3.1-8b"].attention_flops_per_pair  # 4 * 32 * 32 * 128
        524288
        """
        v_dim = self.head_dim if self.v_head_dim is None else self.v_head_dim
        return 2 * self.layers * self.heads * (self.head_dim + v_dim)

    @property
    def dense_params(self) -> int:
        """Parameters outside the routed experts (read by every step).

        Examples
        --------
        >>> MODELS["llama-3.1-8b"].dense_params == MODELS["llama-3.1-8b"].params
        True
        """
        return self.params - self.expert_params


@dataclass(frozen=True)
class GPUSpec:
    """One accelerator: dense tensor throughput, HBM size and bandwidth.

    Parameters
    ----------
    name : str
        Display name.
    bf16_tflops : float
        Dense BF16 tensor-core peak (TFLOP/s, no sparsity).
    hbm_gb : float
        HBM capacity, decimal GB (1e9 bytes).
    hbm_tb_s : float
        Peak HBM bandwidth (TB/s).
    fp8_tflops : float, optional
        Dense FP8 peak, used when weights are one byte; None if unsupported.
    link_gb_s : float
        GPU-to-GPU bandwidth per direction (GB/s) for the tensor-parallel
        all-reduce term.

    Examples
    --------
    >>> g = GPUS["h100-80gb"]
    >>> round(g.bf16_tflops / g.hbm_tb_s)  # ridge point, FLOPs per byte
    295
    """

    name: str
    bf16_tflops: float
    hbm_gb: float
    hbm_tb_s: float
    fp8_tflops: float | None
    link_gb_s: float

    def __post_init__(self) -> None:
        for field in ("bf16_tflops", "hbm_gb", "hbm_tb_s", "link_gb_s"):
            value = getattr(self, field)
            if not value > 0:
                raise ValueError(f"GPUSpec.{field} must be > 0, got {value!r}")


# --------------------------------------------------------------------------- models
# Parameter counts: embed (vocab*hidden, twice when untied) + per layer
# [q, k, v, o projections (+ biases for Qwen) + 3 * hidden * intermediate MLP
# + 2 RMSNorms] + final norm. The tests recompute them from the fields.
MODELS: dict[str, ModelSpec] = {
    # meta-llama/Llama-3.1-8B config.json: num_hidden_layers 32, hidden_size 4096,
    # num_attention_heads 32, num_key_value_heads 8, head_dim 4096/32 = 128,
    # intermediate_size 14336, vocab_size 128256, tie_word_embeddings false.
    # 8,030,261,248 params = the Hugging Face count (thamada/modelQuery table:
    # 8030261248, 16060522496 bytes in BF16).
    "llama-3.1-8b": ModelSpec(
        name="Llama-3.1-8B",
        layers=32,
        hidden=4096,
        heads=32,
        kv_heads=8,
        head_dim=128,
        intermediate=14336,
        vocab=128256,
        params=8_030_261_248,
    ),
    # meta-llama/Llama-3.1-70B config.json: layers 80, hidden 8192, heads 64,
    # kv heads 8, head_dim 128, intermediate 28672, vocab 128256, untied.
    # 70,553,706,496 params from these fields (model card: 70.6B).
    "llama-3.1-70b": ModelSpec(
        name="Llama-3.1-70B",
        layers=80,
        hidden=8192,
        heads=64,
        kv_heads=8,
        head_dim=128,
        intermediate=28672,
        vocab=128256,
        params=70_553_706_496,
    ),
    # Qwen/Qwen2.5-32B config.json: layers 64, hidden 5120, heads 40, kv heads 8
    # (model card "40 for Q and 8 for KV"), head_dim 128, intermediate 27648,
    # vocab 152064, untied, QKV bias. 32,763,876,352 params from these fields
    # (Hugging Face lists 32.8B; the card rounds to 32.5B).
    "qwen2.5-32b": ModelSpec(
        name="Qwen2.5-32B",
        layers=64,
        hidden=5120,
        heads=40,
        kv_heads=8,
        head_dim=128,
        intermediate=27648,
        vocab=152064,
        params=32_763_876_352,
    ),
    # Qwen/Qwen2.5-7B config.json: layers 28, hidden 3584, heads 28, kv heads 4,
    # head_dim 128, intermediate 18944, vocab 152064, untied, QKV bias.
    # 7,615,616,512 params (model card: 7.61B, 6.53B non-embedding).
    "qwen2.5-7b": ModelSpec(
        name="Qwen2.5-7B",
        layers=28,
        hidden=3584,
        heads=28,
        kv_heads=4,
        head_dim=128,
        intermediate=18944,
        vocab=152064,
        params=7_615_616_512,
    ),
    # deepseek-ai/DeepSeek-V2-Lite config.json: layers 27, hidden 2048, heads 16,
    # q_lora_rank null, kv_lora_rank 512, qk_nope_head_dim 128,
    # qk_rope_head_dim 64, v_head_dim 128, intermediate 10944 (layer 0 dense,
    # first_k_dense_replace 1), moe_intermediate_size 1408, n_routed_experts 64,
    # n_shared_experts 2, num_experts_per_tok 6, vocab 102400, untied.
    # 15,706,484,224 params from these fields (card: 15.7B / "16B");
    # routed experts 26 layers * 64 * 3 * 2048 * 1408 = 14,394,851,328;
    # active = total - routed + 26 * 6 * 3 * 2048 * 1408 = 2,661,150,208
    # (card: 2.4B, which leaves out the 0.21B input embedding lookup).
    "deepseek-v2-lite": ModelSpec(
        name="DeepSeek-V2-Lite",
        layers=27,
        hidden=2048,
        heads=16,
        kv_heads=16,
        head_dim=192,
        v_head_dim=128,
        intermediate=10944,
        vocab=102400,
        params=15_706_484_224,
        active_params=2_661_150_208,
        kv_lora_rank=512,
        qk_rope_head_dim=64,
        experts=64,
        experts_per_token=6,
        expert_params=14_394_851_328,
    ),
    # deepseek-ai/DeepSeek-V3 config.json: layers 61, hidden 7168, heads 128,
    # q_lora_rank 1536, kv_lora_rank 512, qk_nope_head_dim 128,
    # qk_rope_head_dim 64, v_head_dim 128, intermediate 18432 (first 3 layers
    # dense), moe_intermediate_size 2048, n_routed_experts 256,
    # n_shared_experts 1, num_experts_per_tok 8, vocab 129280; weights ship in
    # FP8 (quantization_config). 671,026,419,200 params without the MTP module
    # (README_WEIGHTS: 671B total, 36.6B activated + 0.9B embedding); routed
    # experts 58 * 256 * 3 * 7168 * 2048 = 653,908,770,816; active =
    # total - routed + 58 * 8 * 3 * 7168 * 2048 = 37,552,297,472.
    "deepseek-v3": ModelSpec(
        name="DeepSeek-V3",
        layers=61,
        hidden=7168,
        heads=128,
        kv_heads=128,
        head_dim=192,
        v_head_dim=128,
        intermediate=18432,
        vocab=129280,
        params=671_026_419_200,
        active_params=37_552_297_472,
        kv_lora_rank=512,
        qk_rope_head_dim=64,
        experts=256,
        experts_per_token=8,
        expert_params=653_908_770_816,
        weight_dtype_bytes=1,
    ),
}

# ----------------------------------------------------------------------------- GPUs
GPUS: dict[str, GPUSpec] = {
    # NVIDIA A100 80GB SXM4 datasheet: BF16 tensor 312 TFLOPS dense (624 with
    # sparsity), 80 GB HBM2e, 2,039 GB/s; no FP8; NVLink 3 600 GB/s total
    # (300 GB/s each way).
    "a100-80gb": GPUSpec(
        name="A100-80GB-SXM",
        bf16_tflops=312.0,
        hbm_gb=80.0,
        hbm_tb_s=2.039,
        fp8_tflops=None,
        link_gb_s=300.0,
    ),
    # NVIDIA H100 SXM5 datasheet: BF16 989.4 TFLOPS dense (1,979 sparse), FP8
    # 1,978.9 dense, 80 GB HBM3, 3.35 TB/s; NVLink 4 900 GB/s total.
    "h100-80gb": GPUSpec(
        name="H100-80GB-SXM",
        bf16_tflops=989.4,
        hbm_gb=80.0,
        hbm_tb_s=3.35,
        fp8_tflops=1978.9,
        link_gb_s=450.0,
    ),
    # NVIDIA H200 SXM datasheet: same GH100 compute as H100 (BF16 989.4 dense,
    # FP8 1,978.9 dense), 141 GB HBM3e, 4.8 TB/s; NVLink 4 900 GB/s total.
    "h200": GPUSpec(
        name="H200-SXM",
        bf16_tflops=989.4,
        hbm_gb=141.0,
        hbm_tb_s=4.8,
        fp8_tflops=1978.9,
        link_gb_s=450.0,
    ),
    # AMD Instinct MI300X datasheet: BF16 1,307.4 TFLOPS dense (2,614.9 sparse),
    # FP8 2,614.9 dense, 192 GB HBM3, 5.3 TB/s; Infinity Fabric 7 links x
    # 128 GB/s = 896 GB/s total.
    "mi300x": GPUSpec(
        name="MI300X",
        bf16_tflops=1307.4,
        hbm_gb=192.0,
        hbm_tb_s=5.3,
        fp8_tflops=2614.9,
        link_gb_s=448.0,
    ),
}


def _lookup(kind: str, table: dict, key: object, cls: type) -> object:
    if isinstance(key, cls):
        return key
    if not isinstance(key, str):
        raise TypeError(f"{kind} must be a preset name or a {cls.__name__}, got {key!r}")
    name = key.strip().lower()
    if name in table:
        return table[name]
    close = difflib.get_close_matches(name, list(table), n=3, cutoff=0.5)
    hint = f" Did you mean {close}?" if close else ""
    raise ValueError(f"unknown {kind} preset {key!r}; available: {sorted(table)}.{hint}")


def get_model(model: str | ModelSpec) -> ModelSpec:
    """Resolve a preset name (case-insensitive) or pass a ModelSpec through.

    Examples
    --------
    >>> get_model("Llama-3.1-8B").layers
    32
    >>> get_model("llama-8b")
    Traceback (most recent call last):
    ...
    ValueError: unknown model preset 'llama-8b'; available: [...]. Did you mean [...]?
    """
    return _lookup("model", MODELS, model, ModelSpec)  # type: ignore[return-value]


def get_gpu(gpu: str | GPUSpec) -> GPUSpec:
    """Resolve a preset name (case-insensitive) or pass a GPUSpec through.

    Examples
    --------
    >>> get_gpu("H100-80GB").hbm_tb_s
    3.35
    """
    return _lookup("gpu", GPUS, gpu, GPUSpec)  # type: ignore[return-value]


@dataclass(frozen=True)
class Efficiency:
    """Named efficiency factors of the roofline model (a calibration).

    Parameters
    ----------
    name : str
        The name ``RooflineCostModel(..., calibration=name)`` accepts.
    mfu, mbu : float
        Fractions of peak FLOPs and HBM bandwidth achieved.
    overhead_ms : float
        Fixed cost per step.
    attention_efficiency : float, optional
        Fraction of peak FLOPs achieved by attention (QK^T and AV); None
        means the same as ``mfu``.
    source : str
        Where the numbers come from.

    Examples
    --------
    >>> CALIBRATIONS["v0.1"].mfu
    0.45
    """

    name: str
    mfu: float
    mbu: float
    overhead_ms: float
    attention_efficiency: float | None = None
    source: str = ""


CALIBRATIONS: dict[str, Efficiency] = {
    e.name: e
    for e in (
        # The efficiencies of inferasim 0.1: mfu from Megatron-LM's 413-430
        # TFLOP/s per H100 on a Llama-3-style 8B model (swiss-ai Megatron-LM
        # PR #29); mbu and overhead from vLLM's measured batch-1 decode of
        # Llama-3.1-8B, 6.48 ms per token on an H100 (InferenceBench, vLLM
        # 0.21). Prices prefill 40-60% slower than vLLM measures.
        Efficiency("v0.1", 0.45, 0.8, 0.5, None, "Megatron-LM MFU; InferenceBench batch-1 decode"),
        # Least-squares fit (RooflineCostModel.calibrate, relative residuals) of
        # Llama-3.1-8B on one H100 SXM with vLLM to the seven points of
        # inferasim.sim.calibrate.LLAMA31_8B_H100_VLLM (prefill 512/2k/8k/32k,
        # batch-1 decode, TPOT at 32 and 128 sequences; AIConfigurator per-op
        # data, BF16). tests/test_calibrate.py refits and checks these values.
        Efficiency(
            "v0.2",
            0.7899,
            0.9481,
            1.2063,
            0.6441,
            "fit to AIConfigurator vLLM per-op data, Llama-3.1-8B on H100 SXM (BF16)",
        ),
    )
}

#: The calibration ``RooflineCostModel`` uses unless told otherwise, by GPU
#: preset: v0.2 was fitted on an H100 SXM only (its mbu of 0.948 would price an
#: A100-40GB batch-1 decode of Llama-3.1-8B at 82 tokens/s against ~75
#: measured), so every other GPU keeps v0.1 until measured.
DEFAULT_CALIBRATIONS: dict[str, str] = {"h100-80gb": "v0.2"}
DEFAULT_CALIBRATION = "v0.1"


def default_calibration(gpu: GPUSpec) -> str:
    """The calibration a GPU preset gets by default.

    Examples
    --------
    >>> default_calibration(GPUS["h100-80gb"]), default_calibration(GPUS["a100-80gb"])
    ('v0.2', 'v0.1')
    """
    for key, name in DEFAULT_CALIBRATIONS.items():
        if GPUS.get(key) is gpu or GPUS.get(key) == gpu:
            return name
    return DEFAULT_CALIBRATION


def get_calibration(name: str) -> Efficiency:
    """A calibration by name.

    Examples
    --------
    >>> get_calibration("v0.2").name
    'v0.2'
    >>> get_calibration("v9")
    Traceback (most recent call last):
    ...
    ValueError: unknown calibration 'v9'; known: ['v0.1', 'v0.2']
    """
    if name not in CALIBRATIONS:
        raise ValueError(f"unknown calibration {name!r}; known: {sorted(CALIBRATIONS)}")
    return CALIBRATIONS[name]
