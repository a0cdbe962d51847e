"""Paper-style experiments as public functions returning tidy frames.

A study is a grid of small runs (a :class:`inferasim.Simulator` run or a
reuse replay per configuration) and a reduction; every function returns a
pandas DataFrame in long format, one row per observation, with units in the
column names. The notebooks call them, :mod:`inferasim.plots` draws their
frames, and :mod:`inferasim.figures` names the pairs.

=============================  ===============================================
trace structure                :func:`overview`, :func:`requests`,
                               :func:`reuse_distances`, :func:`block_popularity`,
                               :func:`structure_stats`
hit rate vs capacity           :func:`hit_rate_vs_capacity`, :func:`at_capacity`,
                               :func:`policy_curve`
local vs pooled, routing       :func:`local_vs_pooled`, :func:`compare_routing`,
                               :func:`routing_summary`, :func:`replica_load`,
                               :func:`run_routing`
teaching                       :func:`teaching`, :func:`teaching_run`
=============================  ===============================================

Shared settings (the FAST'25 fleet, capacity range, policies) are in
:mod:`inferasim.studies.settings`.

Examples
--------
>>> from inferasim import Workload, studies
>>> wl = Workload.from_requests([0, 1, 2, 3], [512] * 4, [1] * 4, [[1], [1], [1], [1]])
>>> studies.local_vs_pooled(wl, replicas=2, capacity_tokens=512, placements=["round_robin"])[
...     ["cache", "token_hit_ratio"]].values.tolist()
[['local', 0.5], ['pooled', 0.75]]
"""

from inferasim.studies.capacity import at_capacity, hit_rate_vs_capacity, policy_curve
from inferasim.studies.locality import (
    compare_routing,
    local_vs_pooled,
    replica_load,
    routing_summary,
    run_routing,
)
from inferasim.studies.settings import (
    CAPACITY_RANGE,
    FLEET_REPLICAS,
    NODE_CACHE_TOKENS,
    PLACEMENTS,
    POLICIES,
    QUICK_WINDOW_MS,
    REQUIRED_TRACES,
    ROUTING_POLICIES,
    SIZING_DEFAULTS,
    TRACE_NAMES,
    capacity_grid,
    ci_mode,
    curve_points,
)
from inferasim.studies.teaching import (
    TEACHING,
    TEACHING_BASE,
    TEACHING_KV_BLOCKS,
    Experiment,
    teaching,
    teaching_run,
    teaching_workload,
)
from inferasim.studies.traces import (
    block_popularity,
    cached_prefix_tokens,
    load_traces,
    overview,
    requests,
    reuse_distances,
    structure_stats,
)

__all__ = [
    "CAPACITY_RANGE",
    "FLEET_REPLICAS",
    "NODE_CACHE_TOKENS",
    "PLACEMENTS",
    "POLICIES",
    "QUICK_WINDOW_MS",
    "REQUIRED_TRACES",
    "ROUTING_POLICIES",
    "SIZING_DEFAULTS",
    "TRACE_NAMES",
    "TEACHING",
    "TEACHING_BASE",
    "TEACHING_KV_BLOCKS",
    "Experiment",
    "at_capacity",
    "block_popularity",
    "cached_prefix_tokens",
    "capacity_grid",
    "ci_mode",
    "compare_routing",
    "curve_points",
    "hit_rate_vs_capacity",
    "load_traces",
    "local_vs_pooled",
    "overview",
    "policy_curve",
    "replica_load",
    "requests",
    "reuse_distances",
    "routing_summary",
    "run_routing",
    "structure_stats",
    "teaching",
    "teaching_run",
    "teaching_workload",
]
