"""inferasim: what does prefix KV-cache reuse do to LLM serving?

Three parts, one data flow:

* :class:`Workload` (``inferasim.workload``): traffic as one pandas-backed
  table, from synthetic generators, CSV/JSON length files or Mooncake traces;
* ``inferasim.reuse``: the prefix-reuse structure of a workload (hit rate
  against cache capacity, popularity, reuse distance, sessions);
* :class:`Simulator` (``inferasim.sim``): a discrete-event simulator of a
  fleet of serving replicas with a prefix KV cache each, returning
  per-request frames.

Examples
--------
>>> import inferasim as ism
>>> wl = ism.Workload.from_synthetic(200, rate=10.0, input_len=2048, output_len=64,
...                                  num_prefixes=8, prefix_len=1024, seed=0)
>>> len(wl)
200
>>> round(ism.reuse.infinite_hit_ratio(wl).block_hit_ratio, 3) > 0
True
"""

from __future__ import annotations

from importlib import import_module

from inferasim.errors import TraceNotFoundError, WorkloadError

__version__ = "0.1.0"

# Everything that needs numpy or pandas loads on first use, so `import inferasim`
# stays quick and the `inferasim` command handles Ctrl-C from its first instruction.
_LAZY = {
    "Workload": "inferasim.workload",
    "Simulator": "inferasim.sim",
    "SimResult": "inferasim.sim",
    "LinearCostModel": "inferasim.sim",
    "RooflineCostModel": "inferasim.sim",
    "Tier": "inferasim.sim",
    "Tiers": "inferasim.sim",
    "EngineConfig": "inferasim.sim",
    "Disaggregated": "inferasim.sim",
    "SloAdmission": "inferasim.sim",
    "compare": "inferasim.sim",
    "read_aiperf": "inferasim.sim",
    "read_vllm_bench": "inferasim.sim",
}

__all__ = [
    "Workload",
    "WorkloadError",
    "TraceNotFoundError",
    *(name for name in _LAZY if name != "Workload"),
]


_SUBMODULES = {
    "workload": "inferasim.workload",
    "reuse": "inferasim.reuse",
    "plots": "inferasim.plots",
    "studies": "inferasim.studies",
    "sim": "inferasim.sim",
    "traces": "inferasim.workload.traces",
    "widgets": "inferasim.widgets",
    "figures": "inferasim.figures",
    "style": "inferasim.style",
    "sweep": "inferasim.sweep",  # a callable module: ism.sweep(workload, grid, ...)
    "plan": "inferasim.plan",
    "tiers": "inferasim.sim.tier_presets",  # tier stacks of deployed systems
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    if name in _SUBMODULES:
        return import_module(_SUBMODULES[name])
    raise AttributeError(f"module 'inferasim' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names: what ``__all__`` lists, the subpackages, ``__version__``."""
    return sorted({*__all__, *_SUBMODULES, "__version__"})
