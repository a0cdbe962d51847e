"""The fleet simulator: replicas, prefix KV caches, routing, step-time cost.

``Simulator(...).run(workload)`` returns a :class:`SimResult` whose frames
(``requests``, ``replicas``, ``timeline``) and ``summary()`` describe the run.

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
    RandomRouter,
    ReplicaView,
    Request,
    RoundRobinRouter,
)
from inferasim.sim.simulator import Simulator

__all__ = [
    "Simulator",
    "SimResult",
    "LinearCostModel",
    "RooflineCostModel",
    "ROUTING_POLICIES",
    "Request",
    "ReplicaView",
    "RoundRobinRouter",
    "RandomRouter",
    "LeastLoadedRouter",
    "CacheAwareRouter",
    "KvCostRouter",
]


def __getattr__(name: str) -> Any:
    if name == "RooflineCostModel":
        from inferasim.sim.roofline import RooflineCostModel

        return RooflineCostModel
    raise AttributeError(f"module 'inferasim.sim' has no attribute {name!r}")
