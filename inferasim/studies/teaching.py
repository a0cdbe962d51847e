"""Teaching experiments: one knob of a synthetic prefix pool at a time (notebook 04).

Each experiment in :data:`TEACHING` sweeps one knob of a seeded synthetic
workload (:data:`TEACHING_BASE`) or of the single simulated replica's KV
cache, keeping everything else fixed. :func:`teaching_run` is one
configuration; :func:`teaching` runs the grid and returns one row per value.

Examples
--------
>>> TEACHING["zipf"].knob, TEACHING["zipf"].values
('prefix_zipf', (0.0, 0.5, 1.0, 1.5, 2.0))
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import pandas as pd

from inferasim import reuse
from inferasim.studies._run import simulate
from inferasim.workload import Workload

__all__ = [
    "Experiment",
    "TEACHING",
    "TEACHING_BASE",
    "TEACHING_KV_BLOCKS",
    "teaching_workload",
    "teaching_run",
    "teaching",
]


@dataclass(frozen=True)
class Experiment:
    """A one-knob teaching experiment on a synthetic prefix pool.

    Attributes
    ----------
    name : str
    knob : str
        A :meth:`Workload.from_synthetic` keyword, or ``kv_blocks`` (the
        replica's cache).
    values : tuple of float
        The swept values.
    axis_label : str
        Axis label of the knob, with its unit.
    log_x : bool
        Draw the knob on a log axis.

    Examples
    --------
    >>> TEACHING["cache_size"].knob, TEACHING["cache_size"].values[:2]
    ('kv_blocks', (32, 64))
    """

    name: str
    knob: str
    values: tuple[float, ...]
    axis_label: str
    log_x: bool = False


#: Base synthetic workload of the teaching experiments (``from_synthetic`` kwargs).
TEACHING_BASE: dict[str, Any] = {
    "num_requests": 800,
    "rate": 4.0,
    "arrival": "gamma",
    "burstiness": 1.0,
    "input_len": 1024,
    "output_len": 64,
    "range_ratio": 0.25,
    "num_prefixes": 32,
    "prefix_len": 3072,
    "prefix_zipf": 1.0,
    "seed": 0,
}
#: KV blocks of the single teaching replica unless the experiment varies it.
TEACHING_KV_BLOCKS: int = 96

TEACHING: dict[str, Experiment] = {
    e.name: e
    for e in (
        Experiment(
            "zipf", "prefix_zipf", (0.0, 0.5, 1.0, 1.5, 2.0), "prefix popularity skew (Zipf s)"
        ),
        Experiment("prefixes", "num_prefixes", (4, 16, 64, 256), "distinct prefixes", log_x=True),
        Experiment(
            "prefix_len",
            "prefix_len",
            (512, 1024, 2048, 3072, 4096),
            "shared prefix length (tokens)",
        ),
        Experiment(
            "burstiness",
            "burstiness",
            (0.1, 0.25, 0.5, 1.0, 4.0),
            "gamma shape (lower = burstier)",
            log_x=True,
        ),
        Experiment(
            "cache_size",
            "kv_blocks",
            (32, 64, 128, 256, 512, 1024),
            "KV cache (blocks of 512 tokens)",
            log_x=True,
        ),
    )
}


def teaching_workload(num_requests: int | None = None, **changes: Any) -> Workload:
    """The base synthetic workload of the experiments, with some settings changed.

    Parameters
    ----------
    num_requests : int, optional
        Default :data:`TEACHING_BASE` (800).
    **changes
        :meth:`Workload.from_synthetic` keywords overriding the base.

    Examples
    --------
    >>> len(teaching_workload(50, prefix_zipf=0.0))
    50
    """
    params = {**TEACHING_BASE, **changes}
    num = int(num_requests if num_requests is not None else params.pop("num_requests"))
    params.pop("num_requests", None)
    rate = params.pop("rate")
    return Workload.from_synthetic(num, rate, **params)


def teaching_run(
    knob: str, value: float, *, num_requests: int | None = None, kv_blocks: int = TEACHING_KV_BLOCKS
) -> dict[str, float]:
    """One configuration: set ``knob`` to ``value``, simulate one replica, measure.

    Parameters
    ----------
    knob : str
        A :data:`TEACHING_BASE` key, or ``"kv_blocks"``.
    value : float
    num_requests : int, optional
        Requests of the workload (default 800).
    kv_blocks : int, default 96
        The replica's KV cache in blocks of the workload (the experiments are
        drawn in blocks; the simulator gets ``kv_tokens=kv_blocks *
        block_size``) unless ``knob`` is ``"kv_blocks"``.

    Returns
    -------
    dict
        ``value``, ``infinite_token_hit_ratio`` (the workload's ceiling),
        ``token_hit_ratio`` (what the simulated cache served),
        ``ttft_p50_ms``, ``ttft_p99_ms``.

    Examples
    --------
    >>> r = teaching_run("prefix_zipf", 1.0, num_requests=40)
    >>> 0 <= r["token_hit_ratio"] <= r["infinite_token_hit_ratio"] <= 1
    True
    """
    if knob == "kv_blocks":
        kv_blocks, wl = int(value), teaching_workload(num_requests)
    elif knob in TEACHING_BASE:
        wl = teaching_workload(num_requests, **{knob: type(TEACHING_BASE[knob])(value)})
    else:
        raise ValueError(f"unknown knob {knob!r}; known: {[*TEACHING_BASE, 'kv_blocks']}")
    kv_tokens = kv_blocks * wl.block_size
    req = simulate(wl, replicas=1, routing="round_robin", kv_tokens=kv_tokens).requests
    return {
        "value": value,
        "infinite_token_hit_ratio": float(reuse.infinite_hit_ratio(wl).token_hit_ratio),
        "token_hit_ratio": float(req["cached_tokens"].sum() / req["input_len"].sum()),
        "ttft_p50_ms": float(req["ttft_ms"].quantile(0.5)),
        "ttft_p99_ms": float(req["ttft_ms"].quantile(0.99)),
    }


def teaching(
    experiment: str,
    values: Sequence[float] | None = None,
    *,
    quick: bool = False,
    executor: Executor | None = None,
) -> pd.DataFrame:
    """Run one teaching experiment: sweep one knob, keep everything else fixed.

    Parameters
    ----------
    experiment : {"zipf", "prefixes", "prefix_len", "burstiness", "cache_size"}
    values : sequence of float, optional
        Knob values (default: the experiment's).
    quick : bool, default False
        Half as many requests (400) per configuration.
    executor : concurrent.futures.Executor, optional
        Run the configurations on it; in this process by default (same rows).

    Returns
    -------
    pandas.DataFrame
        One row per value: ``experiment``, ``knob``, ``value``,
        ``infinite_token_hit_ratio``, ``token_hit_ratio``, ``ttft_p50_ms``,
        ``ttft_p99_ms``.

    Examples
    --------
    >>> t = teaching("prefix_len", [512, 4096], quick=True)
    >>> t[["knob", "value"]].values.tolist()
    [['prefix_len', 512], ['prefix_len', 4096]]
    >>> bool(t["infinite_token_hit_ratio"].is_monotonic_increasing)
    True
    >>> teaching("nope")
    Traceback (most recent call last):
    ...
    KeyError: "unknown teaching experiment 'nope'; known: ['zipf', 'prefixes', 'prefix_len', 'burstiness', 'cache_size']"
    """
    if experiment not in TEACHING:
        raise KeyError(f"unknown teaching experiment {experiment!r}; known: {list(TEACHING)}")
    exp = TEACHING[experiment]
    num = TEACHING_BASE["num_requests"] // 2 if quick else None
    grid = list(exp.values if values is None else values)
    if executor is None:
        rows = [teaching_run(exp.knob, v, num_requests=num) for v in grid]
    else:
        futures = [executor.submit(teaching_run, exp.knob, v, num_requests=num) for v in grid]
        rows = [f.result() for f in futures]
    out = pd.DataFrame(rows)
    out.insert(0, "knob", exp.knob)
    out.insert(0, "experiment", experiment)
    return out
