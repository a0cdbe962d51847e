"""Configuration objects of the simulator: :class:`EngineConfig`, :class:`Disaggregated`.

A :class:`~inferasim.sim.Simulator` is configured by a handful of objects,
scikit-learn style: constructors only store their parameters, validation
happens where the work starts (``Simulator.run``), and every object answers
``get_params()`` so that a sweep can vary a nested setting by a
``"engine__max_num_seqs"``-style key (:meth:`Simulator.set_params`).

* :class:`EngineConfig`: what one serving replica's scheduler does (batch
  limits, chunked prefill).
* :class:`Disaggregated`: a fleet of prefill instances and decode
  instances with a KV handoff between them (``Simulator(replicas=...)``
  takes an int for an aggregated fleet, or one of these).
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import Any

from inferasim._validate import bandwidth_gbps, duration_us

__all__ = ["EngineConfig", "Disaggregated", "get_params", "set_params"]


def get_params(obj: Any, deep: bool = True) -> dict[str, Any]:
    """The parameters of a configuration object, nested ones as ``outer__inner`` keys.

    Dataclasses give their fields; other objects the arguments of their
    ``__init__`` read back as attributes of the same name (scikit-learn's
    convention); objects with their own ``get_params`` are asked.

    Parameters
    ----------
    obj : object
        A configuration object.
    deep : bool, default True
        Also list the parameters of parameters that are configuration objects.

    Returns
    -------
    dict

    Examples
    --------
    >>> get_params(EngineConfig(max_num_seqs=64))["max_num_seqs"]
    64
    >>> sorted(get_params(Disaggregated(prefill=2, decode=2)))[:3]
    ['decode', 'decode_cache', 'decode_tiers']
    """
    own = getattr(obj, "get_params", None)
    if callable(own) and not isinstance(obj, type):
        return dict(own(deep=deep))
    out = {name: getattr(obj, name) for name in _param_names(obj)}
    if deep:
        for name, value in list(out.items()):
            if _is_config(value):
                for key, inner in get_params(value, deep=True).items():
                    out[f"{name}__{key}"] = inner
    return out


def set_params(obj: Any, **params: Any) -> Any:
    """A copy of a configuration object with some parameters changed.

    ``outer__inner`` keys change a parameter of a nested object (the nested
    object is copied too). Frozen dataclasses are rebuilt with
    :func:`dataclasses.replace`; other objects are copied and their
    attributes set.

    Parameters
    ----------
    obj : object
        A configuration object.
    **params
        New values by name.

    Returns
    -------
    object
        The changed copy (``obj`` itself is left as it was).

    Raises
    ------
    ValueError
        For a name ``obj`` has no parameter of.

    Examples
    --------
    >>> e = set_params(EngineConfig(), max_num_seqs=8)
    >>> e.max_num_seqs, EngineConfig().max_num_seqs
    (8, 256)
    >>> set_params(EngineConfig(), max_seqs=8)
    Traceback (most recent call last):
    ...
    ValueError: EngineConfig has no parameter 'max_seqs'; it has max_num_seqs, max_batched_tokens, chunked_prefill, page_tokens, ...cache_generated
    """
    names = _param_names(obj)
    direct: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for key, value in params.items():
        head, _, rest = key.partition("__")
        if head not in names:
            raise ValueError(
                f"{type(obj).__name__} has no parameter {head!r}; it has {', '.join(names)}"
            )
        if rest:
            nested.setdefault(head, {})[rest] = value
        else:
            direct[head] = value
    for head, inner in nested.items():
        base = direct.get(head, getattr(obj, head))
        if not _is_config(base):
            raise ValueError(
                f"{type(obj).__name__}.{head} is {base!r}, which has no parameters to set "
                f"({', '.join(head + '__' + k for k in inner)})"
            )
        direct[head] = set_params(base, **inner)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.replace(obj, **direct)
    import copy

    new = copy.copy(obj)
    for name, value in direct.items():
        setattr(new, name, value)
    return new


def _param_names(obj: Any) -> list[str]:
    """The parameter names of a configuration object (see :func:`get_params`)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [f.name for f in dataclasses.fields(obj) if f.init]
    import inspect

    try:
        sig = inspect.signature(type(obj).__init__)
    except (TypeError, ValueError):
        return []
    return [
        name
        for name, p in sig.parameters.items()
        if name != "self"
        and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        and hasattr(obj, name)
    ]


def _is_config(value: Any) -> bool:
    """Whether ``value`` is a configuration object with parameters of its own."""
    if value is None or isinstance(value, str | numbers.Number | bool | list | tuple | dict):
        return False
    if isinstance(value, type) or callable(value) and not _param_names(value):
        return False
    return bool(_param_names(value))


def _positive_int(value: Any, name: str) -> int:
    """``value`` as an int >= 1 below 2**62, else a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if value >= 2**62:
        raise ValueError(f"{name} must be < 2**62, got {value!r}")
    return int(value)


VLLM_PAGE_TOKENS = 16
"""vLLM's default KV block size (``CacheConfig.block_size``), in tokens."""


@dataclasses.dataclass(frozen=True)
class EngineConfig:
    """What one serving replica's scheduler does (vLLM's ``SchedulerConfig``).

    Parameters
    ----------
    max_num_seqs : int, default 256
        Running sequences per replica at most.
    max_batched_tokens : int, default 8192
        Tokens per engine step at most (decode tokens plus prefill chunks).
    chunked_prefill : bool, default True
        Split prompts into chunks across steps; False prefills whole prompts
        (a prompt longer than ``max_batched_tokens`` then runs in a step of
        its own).
    page_tokens : int, "block" or None, default None
        Tokens of one KV page, the unit memory is allocated, evicted and
        preempted in (vLLM's ``CacheConfig.block_size``, 16 by default;
        SGLang's page size 1; TensorRT-LLM 32 or 64). It must divide the
        workload's hash block size; prefix matching stays at hash-block
        granularity (a hit is a leading run of whole hash blocks, plus the
        resident leading pages of the next one). None (the default): vLLM's
        16 tokens where 16 divides the workload's hash block size (the
        FAST'25 traces' 512, the Bailian traces' 16), else one page per hash
        block (a toy workload of 1- to 8-token blocks); ``"block"``: one page
        per hash block, always. ``Simulator(...).get_params()`` and
        ``SimResult.params`` show the page size a run used.
    full_prompt_admission : bool, default True
        Admit a waiting request only when the pages of its whole prompt fit
        (vLLM's ``SchedulerConfig.scheduler_reserve_full_isl``: the waiting
        loop of ``Scheduler.schedule`` calls
        ``KVCacheManager.allocate_slots(..., full_sequence_must_fit=True)``);
        False checks only its first chunk.
    cache_on_schedule : bool, default True
        A block becomes hittable in the step that schedules its last token
        (vLLM's ``allocate_slots`` -> ``cache_blocks``), so a request
        admitted later in the same step hits it; and the running sequences
        allocate (and evict) before the waiting ones look the cache up, in
        vLLM's step order. False: blocks enter the cache when their step
        ends, and admission looks up before the step's evictions.
    cache_generated : bool, default True
        Keep a released sequence's full pages past its hashed prompt blocks
        (prompt tail, generated tokens) as evictable cache, freed tail first
        (vLLM's ``KVCacheManager.free``); a preempted request hits them on
        resume. A prefill preempted inside a hash block keeps that block's
        computed leading pages as a partial entry (vLLM caches every full
        page when its chunk is scheduled: ``KVCacheManager.allocate_slots``
        -> ``cache_blocks``). False frees them at once.

    The defaults are vLLM v1's rules (0.33, ``vllm/v1/core/sched/scheduler.py``
    and ``vllm/v1/core/kv_cache_manager.py``); :meth:`whole_blocks` selects the
    coarser rules inferasim used before (one page per hash block, first-chunk
    admission, blocks cached when their step ends, generated tokens freed).

    Examples
    --------
    >>> EngineConfig(max_num_seqs=64, max_batched_tokens=2048)  # doctest: +ELLIPSIS
    EngineConfig(max_num_seqs=64, max_batched_tokens=2048, chunked_prefill=True, page_tokens=None, ...)
    >>> EngineConfig.vllm().page_tokens
    16
    """

    max_num_seqs: int = 256
    max_batched_tokens: int = 8192
    chunked_prefill: bool = True
    page_tokens: int | str | None = None
    full_prompt_admission: bool = True
    cache_on_schedule: bool = True
    cache_generated: bool = True

    @classmethod
    def vllm(cls, **changes: Any) -> EngineConfig:
        """vLLM v1's scheduler (0.33): 16-token pages, full-prompt admission, blocks
        cached when scheduled, generated blocks kept as cache.

        Parameters
        ----------
        **changes
            Fields to set otherwise (e.g. ``max_num_seqs=128``).

        Returns
        -------
        EngineConfig

        Examples
        --------
        >>> cfg = EngineConfig.vllm(max_num_seqs=128)
        >>> cfg.max_num_seqs, cfg.page_tokens, cfg.full_prompt_admission
        (128, 16, True)
        """
        fields: dict[str, Any] = dict(page_tokens=VLLM_PAGE_TOKENS, full_prompt_admission=True, cache_on_schedule=True,
                      cache_generated=True)
        fields.update(changes)
        return cls(**fields)

    @classmethod
    def whole_blocks(cls, **changes: Any) -> EngineConfig:
        """The coarse rules: one KV page per hash block, admission checks the
        first chunk only, blocks cached when their step ends, generated tokens
        freed at once (Vidur's and inferasim's rules before vLLM's became the
        default; a teaching baseline that pre-empts more under tight memory).

        Parameters
        ----------
        **changes
            Fields to set otherwise (e.g. ``max_num_seqs=128``).

        Returns
        -------
        EngineConfig

        Examples
        --------
        >>> cfg = EngineConfig.whole_blocks()
        >>> cfg.page_for(512), cfg.full_prompt_admission, cfg.cache_generated
        (512, False, False)
        """
        fields: dict[str, Any] = dict(page_tokens="block", full_prompt_admission=False,
                                      cache_on_schedule=False, cache_generated=False)
        fields.update(changes)
        return cls(**fields)

    def page_for(self, block_size: int) -> int:
        """Tokens of a page for a workload of ``block_size``-token hash blocks.

        Examples
        --------
        >>> EngineConfig().page_for(512), EngineConfig().page_for(4)
        (16, 4)
        >>> EngineConfig.whole_blocks().page_for(512)
        512
        >>> EngineConfig(page_tokens=48).page_for(512)
        Traceback (most recent call last):
        ...
        ValueError: engine.page_tokens (48) must divide the workload's block_size (512)
        """
        if self.page_tokens == "block":
            return block_size
        if self.page_tokens is None:
            return VLLM_PAGE_TOKENS if block_size % VLLM_PAGE_TOKENS == 0 else block_size
        page = int(self.page_tokens)
        if block_size % page:
            raise ValueError(
                f"engine.page_tokens ({page}) must divide the workload's block_size ({block_size})"
            )
        return page

    def checked(self) -> EngineConfig:
        """The configuration after checking every value (raises ValueError).

        Examples
        --------
        >>> EngineConfig(max_num_seqs=512, max_batched_tokens=256).checked()
        Traceback (most recent call last):
        ...
        ValueError: engine.max_batched_tokens (256) must be >= engine.max_num_seqs (512): every running sequence needs a token each step
        """
        seqs = _positive_int(self.max_num_seqs, "engine.max_num_seqs")
        tokens = _positive_int(self.max_batched_tokens, "engine.max_batched_tokens")
        if tokens < seqs:
            raise ValueError(
                f"engine.max_batched_tokens ({tokens}) must be >= engine.max_num_seqs "
                f"({seqs}): every running sequence needs a token each step"
            )
        for name in ("chunked_prefill", "full_prompt_admission", "cache_on_schedule",
                     "cache_generated"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"engine.{name} must be a bool, got {getattr(self, name)!r}")
        page = self.page_tokens
        if page is not None and page != "block":
            if isinstance(page, str):
                raise ValueError(f"engine.page_tokens must be a positive int, 'block' or None, got {page!r}")
            page = _positive_int(page, "engine.page_tokens")
        return dataclasses.replace(
            self, max_num_seqs=seqs, max_batched_tokens=tokens, page_tokens=page
        )


@dataclasses.dataclass(frozen=True)
class Disaggregated:
    """A fleet split into prefill instances and decode instances (``Simulator(replicas=...)``).

    Prefill instances run prompts (chunked, each with its own prefix cache
    and tiers) and sample the first token; the prompt's KV is then handed
    off to a decode instance, which generates the rest. The decode instance
    reserves the memory before the transfer; while no decode instance has
    room the KV stays pinned on the prefill instance. Routing and admission
    place requests on prefill instances.

    Parameters
    ----------
    prefill, decode : int
        Prefill and decode instances.
    handoff_gbps : float, default 50.0
        Bandwidth of each prefill instance's handoff link (GB/s), shared by
        its transfers in flight (one 400 Gb/s NIC); at least 1e-9 GB/s (1
        byte a second), and a run checks that handing every request's KV
        over one link ends within 2**43 ms.
    handoff_latency_us : float, default 5.0
        Latency of a handoff transfer (us), at most 2**43 ms.
    layerwise : bool, default False
        Stream the KV while the prefill runs (as Mooncake does layer by
        layer): the transfer starts with the prefill and the sequence moves
        at the later of the prefill's and the transfer's end.
    handoff_tier : str, optional
        Name of a KV tier whose link carries the handoffs too (Mooncake moves
        the handoffs and its store's traffic over the same RDMA NICs): each
        prefill instance's handoffs then share its write link to that tier
        (the read link too, unless the tier is ``duplex``) with the tier's
        transfers, moving at ``handoff_gbps``, with the tier's
        ``latency_us`` (``handoff_latency_us`` does not apply). None
        (default): a handoff link of its own.
    decode_cache : bool, default False
        Each decode instance keeps the prompts' full hash blocks as a prefix
        cache (its own, with the fleet's eviction policy: registered when a
        sequence's KV arrives, pinned while it runs, evictable after). A
        handoff goes to a decode instance with the fewest active blocks as
        before, ties to the one holding the longest leading run of the
        prompt's blocks, which pins that run and reserves only the missing
        pages; the handoff moves only
        the rest (``(input_len - decode_hit_tokens) * kv_bytes_per_token``
        bytes). The request frame gets a ``decode_hit_tokens`` column.
    decode_tiers : bool, default True
        With ``decode_cache`` and KV tiers (``Simulator(tiers=...)``), each
        decode instance gets the fleet's tiers too, with their write
        policies: per-replica tiers of its own (its HBM evictions go there),
        the same store for a shared tier (reached over its own link, outside
        the tier's ``pool_gbps`` budget). A through tier takes only the blocks
        a decode instance computes (a recompute after a preemption) and, with
        ``publish="all"``, those it loads from its other tiers, never the KV
        it receives (its prefill instance published that). A prefix held in
        its tiers right after its HBM run counts as held (also in the ties
        above): a handoff loads those blocks from there over the tier's
        link when that is worth it (``load_policy="always"``, or the loads
        and the handoff of the rest would both end sooner than a handoff of
        the whole remainder), moves only the rest (``decode_hit_tokens``
        counts both) and the sequence joins the decode batch once both
        arrived (not with ``layerwise``: a layerwise handoff counts the HBM
        run alone). The ``<tier>_hit_tokens`` columns stay the prefill
        instance's hits; the decode instances' reads are in their rows of
        ``res.replicas`` (``<tier>_bytes_read``) and in ``res.tiers``. False: a decode instance's prefix lives in
        its HBM only (tiers apply to the prefill instances). Without
        ``decode_cache`` decode instances never get tiers.

    Examples
    --------
    >>> fleet = Disaggregated(prefill=8, decode=8, handoff_gbps=25.0)
    >>> fleet.replicas
    16
    >>> Disaggregated(2, 2, decode_cache=True).decode_cache
    True
    """

    prefill: int
    decode: int
    handoff_gbps: float = 50.0
    handoff_latency_us: float = 5.0
    layerwise: bool = False
    handoff_tier: str | None = None
    decode_cache: bool = False
    decode_tiers: bool = True

    @property
    def replicas(self) -> int:
        """Instances in all (``prefill + decode``).

        Examples
        --------
        >>> Disaggregated(2, 3).replicas
        5
        """
        return int(self.prefill) + int(self.decode)

    def checked(self) -> Disaggregated:
        """The fleet after checking every value (raises ValueError).

        Examples
        --------
        >>> Disaggregated(prefill=0, decode=2).checked()
        Traceback (most recent call last):
        ...
        ValueError: replicas.prefill must be a positive integer, got 0
        """
        prefill = _positive_int(self.prefill, "replicas.prefill")
        decode = _positive_int(self.decode, "replicas.decode")
        gbps = bandwidth_gbps(self.handoff_gbps, "replicas.handoff_gbps")
        latency = duration_us(self.handoff_latency_us, "replicas.handoff_latency_us")
        if not isinstance(self.layerwise, bool):
            raise ValueError(f"replicas.layerwise must be a bool, got {self.layerwise!r}")
        tier = self.handoff_tier
        if tier is not None and not (isinstance(tier, str) and tier.isidentifier()):
            raise ValueError(
                f"replicas.handoff_tier must be None or a tier's name, got {tier!r}"
            )
        if not isinstance(self.decode_cache, bool):
            raise ValueError(
                "replicas.decode_cache (Disaggregated(decode_cache=...)) must be a bool, "
                f"got {self.decode_cache!r}"
            )
        if not isinstance(self.decode_tiers, bool):
            raise ValueError(
                "replicas.decode_tiers (Disaggregated(decode_tiers=...)) must be a bool, "
                f"got {self.decode_tiers!r}"
            )
        return Disaggregated(
            prefill, decode, gbps, latency, self.layerwise, tier, self.decode_cache,
            self.decode_tiers,
        )
