"""Small helpers of the studies: name a workload mapping, run one simulation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inferasim.workload import Workload


def named(workloads: Workload | Mapping[str, Workload]) -> dict[str, Workload]:
    """``{name: workload}`` from one workload (named by its source) or a mapping.

    Examples
    --------
    >>> wl = Workload.from_requests([0], [10], [1])
    >>> list(named({"a": wl})), list(named(wl))
    (['a'], ['workload'])
    """
    if isinstance(workloads, Workload):
        return {workloads.source or "workload": workloads}
    out = dict(workloads)
    for name, wl in out.items():
        if not isinstance(wl, Workload):
            raise TypeError(f"workload {name!r} is a {type(wl).__name__}, not a Workload")
    return out


def simulate(workload: Workload, **config: Any) -> Any:
    """Run ``Simulator(**config)`` (seed 0 by default) on ``workload``, without a progress bar.

    Examples
    --------
    >>> wl = Workload.from_synthetic(20, rate=5.0, input_len=512, output_len=8, seed=0)
    >>> len(simulate(wl, replicas=2, routing="round_robin").requests)
    20
    """
    from inferasim.sim import Simulator

    config.setdefault("seed", 0)
    return Simulator(**config).run(workload, progress=False)
