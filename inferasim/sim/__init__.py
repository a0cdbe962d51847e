"""The fleet simulator: replicas, prefix KV caches, routing, step-time cost.

``Simulator(...).run(workload)`` returns a :class:`SimResult` whose frames
(``requests``, ``replicas``, ``timeline``) and ``summary()`` describe the run.

What is modelled
----------------
* Identical replicas, each a vLLM-v1-style continuous-batching scheduler
  (:mod:`inferasim.sim.scheduler`; settings in :class:`EngineConfig`): FCFS
  queue, chunked prefill within ``max_batched_tokens``, at most
  ``max_num_seqs`` running, KV blocks
  allocated per scheduled chunk or decode token, preemption (by recompute)
  of the most recently admitted sequence when memory runs out.
* A prefix cache per replica (:mod:`inferasim.sim.cache`) sharing the KV
  memory with running sequences: content-addressed by hash id, reference
  counted, full prompt blocks only, a block reusable from the step that
  schedules it (``cache_on_schedule``), LRU/FIFO/LFU eviction of unpinned blocks only when a block is
  needed. At least one prompt token is always computed (a prompt that is
  entirely cached recomputes its last block, as vLLM does).
* Engine rules (:class:`EngineConfig`), each a switch; the defaults are
  vLLM v1's (0.33), ``EngineConfig.whole_blocks()`` turns all four to the
  coarse rules, and ``benchmarks/vllm_validate.py`` compares a run with
  vLLM's own ``Scheduler`` request by request:

  * ``page_tokens``: default 16, vLLM's ``CacheConfig.block_size`` (where 16
    divides the workload's hash block size, else one page per block);
    ``"block"``: one page per hash block; SGLang's page size is 1.
  * ``full_prompt_admission``: default True, as vLLM (the waiting loop of
    ``Scheduler.schedule`` calls ``allocate_slots(..., full_sequence_must_fit)``);
    False: the first chunk must fit.
  * ``cache_on_schedule``: default True, as vLLM (``allocate_slots`` ->
    ``cache_blocks``, the running requests allocating before the waiting
    ones look up); False: a block is cached when its step ends (as SGLang
    inserts a finished prefill chunk into its radix tree).
  * ``cache_generated``: default True, as vLLM (``KVCacheManager.free`` keeps
    every hashed full block as cache, a preempted prefill's leading pages of
    the hash block it was computing included); False: freed at once.

  With pages, memory, eviction and preemption count pages; prefix matching
  stays at the workload's hash blocks (a leading run of whole blocks, plus
  the resident leading pages of the next one: an entry evicted page by page
  loses its tail pages first, as vLLM's free queue does).
* Routing at arrival on the replicas' exact state (:mod:`inferasim.sim.router`),
  including Mooncake's KV-centric ``"conductor"`` (smallest estimated TTFT).
* Admission at arrival (:mod:`inferasim.sim.admission`): admit all, or
  reject early what would miss its TTFT/TPOT objective
  (``admission=SloAdmission(ttft_ms=..., tpot_ms=...)``).
* Prefill/decode disaggregation (``Simulator(replicas=Disaggregated(prefill=P,
  decode=D))``, :class:`inferasim.sim.fleet.DisaggregatedFleet`):
  prefill instances (with their own caches and tiers) sample the first
  token and hand the prompt's KV to a decode instance over a link; the
  decode instance reserves the memory before the transfer, and while no
  decode instance has room the KV stays pinned on the prefill instance;
  with ``decode_cache=True`` decode instances keep a prefix cache (and, with
  tiers, the fleet's tiers behind it: ``decode_tiers``) and a handoff moves
  only what its decode instance lacks.
  :func:`compare_topologies` runs the same GPUs aggregated and split.
* Step times from a cost model (:mod:`inferasim.sim.cost`,
  :mod:`inferasim.sim.roofline`).

KV tiers behind HBM (``Simulator(tiers=[Tier(...), ...])``)
-----------------------------------------------------------
* **Tiers.** Below each replica's HBM cache, in the order given: tiers of
  its own (host DRAM, SSD) and tiers shared by the fleet (``shared=True``: one
  store every replica reads and writes, like Mooncake Store; its capacity is
  the total). Every replica has its own :class:`~inferasim.sim.transfer.Link`
  to every tier (``read_gbps``/``write_gbps``, ``latency_us``); the pool's
  own internal bandwidth is not modelled. A tier holding less than one
  block is inert: the run equals one without it.
* **Offload.** A full hashed block evicted from HBM is written to the first
  tier; a tier evicts its least recently used block to the next tier, the
  last one drops it. With ``write="through"`` on the first tier
  (``Tier(..., write="through")``) a block is also written to it when the
  prefill step computing it ends.
* **Exclusive or not.** A replica's own tiers are *exclusive*: a block is
  moved, not copied (down on eviction, up on a load, leaving the tier when
  the load starts; a load cancelled by preemption loses its blocks). A
  shared tier *keeps* its copy when a replica loads it (every replica may
  want it) and writing a block it holds only refreshes it (no bytes), as a
  writer checks existence before putting. Exclusivity holds at insertion
  only: a block another request recomputes may exist in HBM and below.
* **LRU order.** In each tier the most recent block is the one last written,
  refreshed or (shared tier) read; the blocks of one eviction enter in
  eviction order (HBM's LRU first), so HBM's order carries down. A single
  replica with spaced requests, a small HBM and a DRAM tier is an exclusive
  LRU hierarchy (tests replay it from stack distances).
* **Lookup.** At admission a request's reusable run is its leading run of
  blocks found in HBM or in a lower tier (the first tier holding each; at
  most ``(tokens - 1) // block_size`` blocks, as without tiers). HBM blocks
  are pinned in place; the others are loaded when the load (estimated on
  the links as they are, processor sharing included) ends sooner than
  recomputing them from the first loaded block would take (the cost model's
  marginal prefill time), or always with ``Tiers([...], load_policy="always")``; else the
  run stops at the first lower-tier block (all or nothing per request).
* **Hot blocks.** With ``Tiers([...], replicate_hot_blocks=k)`` a block loaded from a
  shared tier more than ``k`` times (fleet-wide) is also copied into the
  reading replica's first own tier (DRAM) when the load starts (bytes on
  that tier's link, like an offload write; no step waits), and replicas
  look blocks up in their own tiers first: the next request there loads the
  copy over the local link instead of the pool's. Needs an own tier and a
  shared one; off (None) by default.
* **Transfers take time.** Bytes are tokens x ``kv_bytes_per_token`` of the
  cost model (the roofline knows it from the preset;
  ``LinearCostModel(kv_bytes_per_token=...)``). Transfers on one link share
  its time equally (processor sharing; a read and a write share it too, each
  needing ``bytes / its own bandwidth`` of link time) and arrive
  ``latency_us`` after their last byte. A loading request holds its HBM
  blocks and a sequence slot and waits: its prefill joins the first step
  starting at or after its last delivery, while the replica serves the
  others (or idles until the delivery). Offload writes use the link but no
  step waits for them (the HBM block is free at once; the lower tier holds
  the block from the eviction on).
* **One engine in time order.** Pool reads happen at step starts outside
  decode stretches (no stretch runs while loads are in flight); writes at
  step ends (write-through) and at evictions, which inside a stretch are
  applied one allocating step at a time at that step's start, where the
  replica wakes anyway. With a shared tier the replicas advance in global
  time order (step ends before step starts at the same instant, then by
  replica index), so a read at ``t`` sees every write before ``t`` and the
  decode jump stays equal to the step-by-step loop.
* **Routing.** Views expose ``hit_blocks_by_tier`` and
  ``transfer_backlog_ms``; ``cache_aware`` and ``kv_cost`` count a block
  found in a lower tier as part of a hit, weighted by the share of a miss's
  prefill it saves (a pool block is such a hit on every replica).
* **Results.** ``hbm_hit_tokens``, ``<tier>_hit_tokens`` (first admission;
  they add up to ``cached_tokens``) and ``load_ms`` per request; bytes read
  and written and peak occupancy per replica and tier; tier occupancy in
  the timeline; ``hbm_token_hit_ratio`` and ``tier_token_hit_ratio`` in the
  summary, one row per tier (hit ratio, bytes) in :attr:`SimResult.tiers`.
  ``busy_fraction`` counts time with requests on the replica, waiting for
  loads included.

What is not
-----------
By default the KV page is the workload's hash block (512 tokens for
Mooncake traces), not vLLM's 16 tokens, so a sequence's partial last block
holds a whole block of memory (``EngineConfig(page_tokens=16)`` or
``EngineConfig.vllm()`` count 16-token pages). There is no speculative decoding, no swap-based preemption
(tiers hold only cached prefix blocks, never a preempted sequence's private
KV), no layer-wise overlap of tier loads with compute (only the
disaggregated handoff streams layer-wise), no router latency, and routers
see replica state
instantly (a real KV router learns it from delayed events).
``cached_blocks``/``cached_tokens`` count the reuse found at a request's
first admission.

Statuses
--------
``"finished"``, or ``"rejected"`` with a ``reason`` when a request can
never fit in a replica's KV memory (``ceil((input_len + output_len - 1) /
block_size) > kv_tokens // block_size``), has an empty prompt, or was turned away by the
admission policy. Rejected requests are not served (``replica`` -1) and
consume no KV memory and no GPU time. There is no time horizon: every
accepted request finishes.

How the engine is built
-----------------------
One event loop (:mod:`inferasim.sim.loop`) drives every topology; each
object below has one job (the compiled ones are listed in
:mod:`inferasim.sim.native`)::

    simulator.Simulator      the public configuration; run() checks it and calls engine.simulate
    config                   EngineConfig (scheduler and vLLM rules), Disaggregated, get/set_params
    engine.simulate          builds the run below, runs the loop, returns RunOutput
    limits                   the run's time limits, checked at its start and end
    loop.run_loop            next instant -> the fleet's events at it -> the arrivals at it
    arrivals                 Columns (the workload as lists), OpenArrivals, SessionArrivals (closed loop)
    closed_loop              sessions: which request waits for which, think times
    fleet.AggregatedFleet    what is an event, routing, admission, enqueueing (no handoff)
    fleet.DisaggregatedFleet prefill + decode instances; handoff.Handoffs moves the KV between them
    replica.Replica          one engine; advance(t), arrive(seq, t), wake(), outstanding_at/kv_at(t)
      scheduler              BatchScheduler: queues, budget, chunking, preemption (roles: subclasses)
      kv.KVManager           HBM pages, prefix cache (cache.BlockCache), lower tiers, loads
      decode.DecodeGroup     the decoding sequences as aggregates (batch, context, phases, finishes)
      stretch.DecodeStretch  pure-decode steps planned, priced and applied in one jump
      recorder.Recorder      timeline, decode-step ends and episodes (gaps), counters
    sequence                 Seq (a request on its replica), RequestLog (the per-request columns)
    cache                    BlockCache and the built-in eviction orders; eviction.EvictionPolicy
    tierconfig               Tier, Tiers (public); tier_presets: stacks of deployed systems
    tiers                    TierStore (a tier's blocks), ReplicaTiers (a replica's window), SharedLookup
    transfer.Link            a link shared by its transfers (processor sharing)
    views.View               what routers and admission read, exact at the routing instant
    router                   Router, ReplicaView, Request (protocols) and the public router classes
    routing                  the built-in routing policies, each written once (compiled)
    admission                Admission (protocol), SloAdmission
    cost / roofline          CostModel, LinearCostModel; RooflineCostModel (presets: models, GPUs)
    kernels                  StepKernel: step pricing as the scheduler calls it (_roofline_kernel)
    result / frames / summary  the result frames and the headline metrics
    topology, measured, calibrate, command  compare_topologies; measured runs in; fits; the CLI
    native                   which modules run compiled (NATIVE_MODULES)

How to add a router
-------------------
Write a callable ``router(request, replicas) -> int`` (the
:class:`~inferasim.sim.router.Router` protocol) reading the
:class:`~inferasim.sim.router.ReplicaView` attributes, with an optional
``reset(num_replicas, seed)``, and pass it as ``Simulator(routing=...)``;
nothing else changes. To ship it as a built-in: write its policy once in
``inferasim/sim/routing.py`` (compiled, reading ``views.View``), its
documented subclass and name in ``inferasim/sim/router.py``
(``ROUTING_POLICIES``), and a test in ``tests/test_sim_router.py``.

How to add a tier kind
----------------------
A tier is a :class:`~inferasim.sim.tierconfig.Tier` (capacity, link
bandwidths, latency, ``shared``, ``write``); its store and link live in
``inferasim/sim/tiers.py`` (``TierStore``, ``ReplicaTiers``: lookup order,
writes, loads) and :mod:`inferasim.sim.transfer`; the KV manager
(``inferasim/sim/kv.py``) is the only caller. A new kind of tier (a new
write or eviction rule) changes ``tierconfig.py`` (its parameter and
checks), ``tiers.py`` (the rule, in ``ReplicaTiers``) and, when the
timing-free limit changes, ``replay_tiers`` in ``inferasim/reuse/policies.py``.

How to add a cost model
-----------------------
Any object with ``step_time_ms(prefill_tokens, prefill_attention,
decode_seqs, decode_context)`` (elementwise over arrays) and
``kv_capacity_blocks(block_size)`` works (:class:`~inferasim.sim.cost.CostModel`);
``kv_bytes_per_token`` is needed for tiers and handoffs. It is called once
per step. For speed, give it a ``kernel()`` returning a compiled
:class:`~inferasim.sim.kernels.StepKernel` (``inferasim/sim/kernels.py``,
like ``LinearKernel``; the roofline's is ``_roofline_kernel.py``) with the
same floats.

Examples
--------
>>> import inferasim as ism
>>> wl = ism.Workload.from_requests([0, 1], [600, 600], [4, 4], [[1, 2], [1, 3]])
>>> res = ism.Simulator(replicas=2, routing="round_robin", kv_tokens=32 * 512,
...                     cost_model=ism.LinearCostModel()).run(wl, progress=False)
>>> res.requests["replica"].tolist()
[0, 1]
"""

from __future__ import annotations

from typing import Any

from inferasim.sim.admission import Admission, SloAdmission
from inferasim.sim.config import Disaggregated, EngineConfig
from inferasim.sim.cost import CostModel, LinearCostModel
from inferasim.sim.eviction import EvictionPolicy
from inferasim.sim.measured import compare, read_aiperf, read_vllm_bench
from inferasim.sim.native import native_modules, warn_if_stale
from inferasim.sim.result import SimResult
from inferasim.sim.router import (
    ROUTING_POLICIES,
    CacheAwareRouter,
    ConductorRouter,
    KvCostRouter,
    LeastLoadedRouter,
    LongestMatchRouter,
    RandomRouter,
    ReplicaView,
    Request,
    RoundRobinRouter,
    Router,
)
from inferasim.sim.simulator import Simulator
from inferasim.sim.tierconfig import Tier, Tiers
from inferasim.sim.topology import compare_topologies

__all__ = [
    "compare",
    "read_aiperf",
    "read_vllm_bench",
    "Simulator",
    "SimResult",
    "EngineConfig",
    "Disaggregated",
    "Tier",
    "Tiers",
    "CostModel",
    "LinearCostModel",
    "RooflineCostModel",
    "ROUTING_POLICIES",
    "Request",
    "ReplicaView",
    "Router",
    "EvictionPolicy",
    "RoundRobinRouter",
    "RandomRouter",
    "LeastLoadedRouter",
    "CacheAwareRouter",
    "LongestMatchRouter",
    "KvCostRouter",
    "ConductorRouter",
    "Admission",
    "SloAdmission",
    "compare_topologies",
    "native_modules",
]

warn_if_stale()


def __getattr__(name: str) -> Any:
    if name == "RooflineCostModel":
        from inferasim.sim.roofline import RooflineCostModel

        return RooflineCostModel
    raise AttributeError(f"module 'inferasim.sim' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
