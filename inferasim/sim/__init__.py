"""The fleet simulator: replicas, prefix KV caches, routing, step-time cost.

``Simulator(...).run(workload)`` returns a :class:`SimResult` whose frames
(``requests``, ``replicas``, ``timeline``) and ``summary()`` describe the run.

What is modelled
----------------
* Identical replicas, each a vLLM-v1-style continuous-batching scheduler
  (:mod:`inferasim.sim.scheduler`): FCFS queue, chunked prefill within
  ``max_batched_tokens``, at most ``max_num_seqs`` running, KV blocks
  allocated per scheduled chunk or decode token, preemption (by recompute)
  of the most recently admitted sequence when memory runs out.
* A prefix cache per replica (:mod:`inferasim.sim.cache`) sharing the KV
  memory with running sequences: content-addressed by hash id, reference
  counted, full prompt blocks only, a block reusable once the step computing
  it ends, LRU/FIFO/LFU eviction of unpinned blocks only when a block is
  needed. At least one prompt token is always computed (a prompt that is
  entirely cached recomputes its last block, as vLLM does).
* Routing at arrival on the replicas' exact state (:mod:`inferasim.sim.router`).
* Step times from a cost model (:mod:`inferasim.sim.cost`,
  :mod:`inferasim.sim.roofline`).

What is not
-----------
The KV block is the workload's hash block (512 tokens for Mooncake traces),
not vLLM's 16 tokens, so a sequence's partial last block holds a whole block
of memory. There is no KV offload to CPU or disk, no prefill/decode
disaggregation, no speculative decoding, no swap-based preemption, no
network or router latency, and routers see replica state instantly (a real
KV router learns it from delayed events). ``cached_blocks``/``cached_tokens``
count the reuse found at a request's first admission.

Statuses
--------
``"finished"``, or ``"rejected"`` with a ``reason`` when a request can
never fit in a replica's KV memory (``ceil((input_len + output_len - 1) /
block_size) > kv_blocks``) or has an empty prompt. Rejected requests are
not routed (``replica`` -1). There is no time horizon: every accepted
request finishes.

Examples
--------
>>> import inferasim as ism
>>> wl = ism.Workload.from_requests([0, 1], [600, 600], [4, 4], [[1, 2], [1, 3]])
>>> res = ism.Simulator(replicas=2, routing="round_robin", kv_blocks=32,
...                     cost_model=ism.LinearCostModel(), progress=False).run(wl)
>>> res.requests["replica"].tolist()
[0, 1]
"""

from __future__ import annotations

from typing import Any

from inferasim.sim.cost import LinearCostModel
from inferasim.sim.result import SimResult
from inferasim.sim.router import (
    ROUTING_POLICIES,
    CacheAwareRouter,
    KvCostRouter,
    LeastLoadedRouter,
    LongestMatchRouter,
    RandomRouter,
    ReplicaView,
    Request,
    RoundRobinRouter,
)
from inferasim.sim.simulator import Simulator
from inferasim.sim.tiers import Tier

__all__ = [
    "Simulator",
    "SimResult",
    "Tier",
    "LinearCostModel",
    "RooflineCostModel",
    "ROUTING_POLICIES",
    "Request",
    "ReplicaView",
    "RoundRobinRouter",
    "RandomRouter",
    "LeastLoadedRouter",
    "CacheAwareRouter",
    "LongestMatchRouter",
    "KvCostRouter",
]


def __getattr__(name: str) -> Any:
    if name == "RooflineCostModel":
        from inferasim.sim.roofline import RooflineCostModel

        return RooflineCostModel
    raise AttributeError(f"module 'inferasim.sim' has no attribute {name!r}")
