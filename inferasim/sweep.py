"""Grids of simulations on any executor, in one tidy frame: :func:`sweep`.

``inferasim.sweep(workload, grid, load=[...])`` runs one simulation per
(workload, configuration, load) and returns one row per run: the
configuration as columns, then the summary metrics of the run
(:meth:`SimResult.summary`: TTFT/TPOT/E2E percentiles, hit ratios,
throughput, goodput) plus ``<tier>_token_hit_ratio`` for each lower KV tier
(from :attr:`SimResult.tiers`), ``gpus`` (replicas times tensor parallelism)
and ``input_tok_s``.

The module itself is callable: ``inferasim.sweep(...)`` and
``inferasim.sweep.sweep(...)`` are the same function, so ``import
inferasim.sweep`` never hides the function behind the module.

**Grid keys.** The names of :meth:`Simulator.get_params
<inferasim.sim.Simulator.get_params>`, nested settings as ``outer__inner``
(``"engine__max_num_seqs"``, ``"routing__overlap_weight"``,
``"replicas__prefill"``); every run sets them on its own fresh copy of a
``Simulator()``. :meth:`Simulator.run <inferasim.sim.Simulator.run>` options
(``closed_loop``, ``think_time``, ``timeline_ms``) are grid keys too, or go
to every run as ``run={...}``.

**Executors.** ``executor=None`` runs in this process; ``"processes"`` runs
on a pool of worker processes, one per available core, each receiving the
workloads once when it starts and then one run at a time. When a worker
dies (the out-of-memory killer's SIGKILL, a crash in a native library),
only the run it held is affected: the other workers go on, a new worker
replaces it, and that run is retried once alone after all the others; if
its worker dies again the row's ``error`` says how (``WorkerDied: ... was
killed by signal SIGKILL ...``). Any other :class:`concurrent.futures.Executor` gets one task
per run with its workload (a thread pool shares it; a user process pool
pickles it with every task); when it breaks (a worker of a
``ProcessPoolExecutor`` dies and every pending run fails with
``BrokenProcessPool``), the finished rows are kept and the runs it lost run
again on the ``"processes"`` pool above, with a ``RuntimeWarning`` naming
``executor``. A ``dask.distributed.Client`` is used
natively: every workload is scattered once to every worker
(``client.scatter(..., broadcast=True)``), tasks carry only a reference to
it and their small configuration, and results stream back as they finish
(``distributed.as_completed``); the dashboard link is shown with the
progress bar.

**Determinism.** A run's seed is its configuration's ``seed`` when the grid
gives one, else derived from a sha256 of the configuration (without the
load and workload, so every load and workload of a configuration shares its
random stream); rows are returned in grid order whatever order they finish
in, so the same grid gives the same frame on every executor and worker
count.

**Errors.** A run that raises gives a row with its ``error`` message
(``"ValueError: replicas must be ..."``) and missing metrics; the sweep goes
on. The ``error`` column is always there (missing when the run worked).

**Store.** ``store="results.parquet"`` names a Parquet *dataset folder*:
every finished run is written at once as its own file ``part-<key>.parquet``
(to a temporary name, synced to disk, then renamed, so a sweep killed at
any instant leaves whole parts or none), and a rerun loads the runs already
there instead of running them again. On resume every part is checked (it
must read, hold its own key and match the sha256 of its values kept in its
metadata); a truncated or corrupted part is moved to ``quarantine/`` in the
folder with a :class:`StoreWarning` naming it, and its run runs again (only
it). ``key`` (a column of the frame) is the sha256 of the configuration,
the load, the metrics asked for, the workload's name and
:func:`fingerprint`; a function in the configuration (a router, an
admission policy, a ``metrics`` callable) counts by its module, name *and
code* (bytecode, constants, defaults, the values of its closure and of the
globals it reads), so two functions of the same name never share a key,
and one whose code or captured values cannot be described is refused.
Failed runs are not stored: a rerun retries them. Rows of other grids in
the same folder are kept on disk and left out of the frame.
:func:`read_store` reads a whole folder back.

Examples
--------
>>> import inferasim as ism
>>> wl = ism.Workload.from_synthetic(100, rate=10.0, input_len=512, output_len=16,
...                                  num_prefixes=4, prefix_len=256, seed=0)
>>> df = ism.sweep(wl, {"replicas": [1, 2], "routing": ["round_robin", "cache_aware"]},
...                load=[1.0, 0.5], progress=False)
>>> df[["replicas", "routing", "load"]].head(3).to_dict("records")
[{'replicas': 1, 'routing': 'round_robin', 'load': 1.0}, {'replicas': 1, 'routing': 'round_robin', 'load': 2.0}, {'replicas': 1, 'routing': 'cache_aware', 'load': 1.0}]
>>> len(df), int(df["finished"].min())
(8, 100)
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import itertools
import json
import math
import os
import sys
import types
import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import BrokenExecutor, Executor
from concurrent.futures import as_completed as _cf_as_completed
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from inferasim._code_identity import class_identity, function_identity, is_library
from inferasim._pool import run_in_processes
from inferasim._run_options import RUN_OPTIONS, run_options
from inferasim._sweep_store import StoreWarning, read_rows, require_pyarrow, store_dir, write_row
from inferasim._validate import slo_ms
from inferasim.workload import Workload

__all__ = ["sweep", "fingerprint", "read_store", "seed_of", "StoreWarning"]

_KEY_VERSION = 1
_LOAD_FORMS = ("scale_time", "load", "rate")


# ----------------------------------------------------------------- hashing
def fingerprint(workload: Workload) -> str:
    """A sha256 over everything of a workload that a simulation reads.

    Hashed, in order: ``block_size``, whether it has hash ids, the number of
    requests, then the raw bytes of ``arrival_ms`` (float64), ``input_len``
    and ``output_len`` (int64), the block ``offsets`` and ``hash_ids``
    (int64, little-endian). Other columns (``line``, ``prefix_id``) and the
    ``source`` label are not part of it: two workloads with the same
    fingerprint simulate identically.

    Parameters
    ----------
    workload : Workload

    Returns
    -------
    str
        64 hexadecimal digits.

    Examples
    --------
    >>> import inferasim as ism
    >>> a = ism.Workload.from_requests([0, 10], [600, 600], [4, 4], [[1, 2], [1, 3]])
    >>> fingerprint(a) == fingerprint(a.scale_time(1.0))
    True
    >>> fingerprint(a) == fingerprint(a.scale_time(0.5))
    False
    """
    if not isinstance(workload, Workload):
        raise TypeError(f"fingerprint() needs a Workload, got {type(workload).__name__}")
    h = hashlib.sha256()
    h.update(f"inferasim-workload-v1:{workload.block_size}:{int(workload.has_hash_ids)}:".encode())
    h.update(f"{len(workload)}:".encode())
    for arr, dtype in (
        (workload.arrival_ms, "<f8"),
        (workload.input_len, "<i8"),
        (workload.output_len, "<i8"),
        (workload.offsets, "<i8"),
        (workload.hash_ids, "<i8"),
    ):
        h.update(np.ascontiguousarray(arr, dtype=dtype).tobytes())
    return h.hexdigest()


def _token(value: Any, where: str, code: bool = False) -> Any:
    """A JSON-able, process-independent description of a parameter value.

    With ``code`` (store keys), functions and user classes are described by
    their code too (:mod:`inferasim._code_identity`); without (seeds), by
    module and name.
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.generic):
        return _token(value.item(), where, code)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return {"float": repr(value)}
    if isinstance(value, (list, tuple)):
        return [_token(v, f"{where}[{i}]", code) for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        return {
            "dict": sorted((str(k), _token(v, f"{where}[{k!r}]", code)) for k, v in value.items())
        }
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        cls = type(value)
        out = {
            "dataclass": f"{cls.__module__}.{cls.__qualname__}",
            "fields": [
                (f.name, _token(getattr(value, f.name), f"{where}.{f.name}", code))
                for f in dataclasses.fields(value)
            ],
        }
        if code and not is_library(cls.__module__):
            out["class"] = class_identity(cls, where, _code_token)
        return out
    if code:
        if isinstance(value, types.FunctionType):
            return function_identity(value, where, _code_token)
        if isinstance(value, type):
            return class_identity(value, where, _code_token)
        if isinstance(value, types.MethodType):
            return {
                "method": _token(value.__func__, where, code),
                "self": _token(value.__self__, f"{where} (bound to)", code),
            }
        if isinstance(value, functools.partial):
            return {
                "partial": _token(value.func, where, code),
                "args": _token(value.args, f"{where} (arguments)", code),
                "keywords": _token(value.keywords, f"{where} (keywords)", code),
            }
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, type)):
        return {"callable": f"{value.__module__}.{value.__qualname__}"}
    text = _repr(value)
    if text is None:
        raise ValueError(
            f"grid value {where} = {value!r} has no stable description (its repr shows a "
            "memory address and its constructor's arguments are not all attributes): give "
            "it a repr naming its parameters, or make it a dataclass"
        )
    cls = type(value)
    out = {"repr": f"{cls.__module__}.{cls.__qualname__}:{text}"}
    if code and not is_library(cls.__module__):
        out["class"] = class_identity(cls, where, _code_token)
    return out


def _key_token(value: Any, where: str, store: Path | None) -> Any:
    """The store-key description of a value: with its code; refused for a store
    when the code cannot be described (without a store, by name instead)."""
    try:
        return _token(value, where, code=True)
    except ValueError as exc:
        if store is not None:
            raise ValueError(
                f"store= cannot identify what runs, so a rerun could return another "
                f"configuration's metrics: {exc}"
            ) from None
        return {"unidentified": _token(value, where)}


def _code_token(value: Any, where: str) -> Any:
    return _token(value, where, code=True)


def _repr(value: Any) -> str | None:
    """``repr(value)``; for a repr showing a memory address, ``Class(a=..., b=...)``
    from its constructor's arguments read back as attributes (scikit-learn's
    convention, e.g. a router object), or None when it has none or one of them is
    not an attribute (then nothing says which object it is).

    Examples
    --------
    >>> from inferasim.sim import KvCostRouter
    >>> _repr(KvCostRouter(overlap_weight=2.0))
    'KvCostRouter(overlap_weight=2.0, temperature=0.0)'
    >>> _repr(lambda: 0) is None
    True
    """
    text = repr(value)
    if " at 0x" not in text:
        return text
    import inspect

    cls = type(value)
    if cls.__module__ == "builtins" or cls.__init__ is object.__init__:
        return None  # (a bound method, a function, an object without parameters)
    try:
        params = inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        return None
    names = [n for n in params if n != "self"]
    varying = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    if not names or any(params[n].kind in varying or not hasattr(value, n) for n in names):
        return None
    args = ", ".join(f"{n}={getattr(value, n)!r}" for n in names)
    if " at 0x" in args:
        return None
    return f"{cls.__qualname__}({args})"


def _digest(obj: Any) -> str:
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()


def seed_of(config: Mapping[str, Any]) -> int:
    """The seed :func:`sweep` gives a configuration that names none.

    The first four bytes (big-endian) of the sha256 of the configuration's
    canonical JSON form (keys sorted; floats by ``repr``; dataclasses by
    class and fields; functions by module and name; other objects by a
    ``repr`` free of memory addresses), so the same configuration gets the
    same seed in every process, whatever its place in the grid. A ``seed``
    entry of the configuration itself wins.

    Parameters
    ----------
    config : mapping
        Simulator parameters, e.g. ``{"replicas": 4, "routing": "random"}``.

    Returns
    -------
    int
        In ``[0, 2**32)``.

    Examples
    --------
    >>> seed_of({"replicas": 4, "routing": "random"}) == seed_of({"routing": "random", "replicas": 4})
    True
    >>> seed_of({"replicas": 4, "seed": 7})
    7
    """
    if "seed" in config and config["seed"] is not None:
        return int(config["seed"])
    tok = _token({k: v for k, v in config.items() if k != "seed"}, "config")
    return int.from_bytes(hashlib.sha256(_digest(tok).encode()).digest()[:4], "big")


# ----------------------------------------------------------------- grid
def _simulator_parameters() -> list[str]:
    """The top-level parameters of :class:`~inferasim.sim.Simulator` (``get_params``)."""
    from inferasim.sim import Simulator

    return list(Simulator().get_params(deep=False))


def _split_run_options(config: Mapping[str, Any]) -> tuple[dict, dict]:
    """A configuration as (Simulator parameters, :meth:`Simulator.run` options)."""
    sim = {k: v for k, v in config.items() if k not in RUN_OPTIONS}
    return sim, {k: v for k, v in config.items() if k in RUN_OPTIONS}


def _simulator(params: Mapping[str, Any]) -> Any:
    """A Simulator with ``params`` (``get_params`` keys) set, sharing no object with them.

    The deep copy keeps the user's objects (routers, cost models) as they
    were whatever a run does to its own.
    """
    from inferasim.sim import Simulator

    return copy.deepcopy(Simulator().set_params(**params))


def _check_config(i: int, config: Mapping[str, Any]) -> None:
    """Raise ValueError when configuration ``i`` names no Simulator parameter or run option."""
    if "progress" in config:
        raise ValueError("grid sets 'progress': sweep runs simulations without their own bars")
    names = _simulator_parameters()
    bad = [k for k in config if k not in RUN_OPTIONS and k.partition("__")[0] not in names]
    if bad:
        known = [*names, *(o for o in RUN_OPTIONS if o != "progress")]
        raise ValueError(
            f"grid configuration {i} has unknown Simulator parameter(s) {bad}; "
            f"known: {known} (nested settings as outer__inner, e.g. engine__max_num_seqs)"
        )
    from inferasim.sim import Simulator

    try:
        Simulator().set_params(**_split_run_options(config)[0])
    except ValueError as exc:
        raise ValueError(f"grid configuration {i}: {exc}") from None


def _expand(grid: Mapping[str, Sequence[Any]] | Sequence[Mapping[str, Any]]) -> list[dict]:
    """The grid's configurations in grid order (last key varies fastest)."""
    if isinstance(grid, Mapping):
        keys = list(grid)
        for k in keys:
            values = grid[k]
            if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
                raise TypeError(
                    f"grid[{k!r}] must be a list of values to try, got {values!r} "
                    f"(write [{values!r}] for a single value)"
                )
        lists = [list(grid[k]) for k in keys]
        for k, vals in zip(keys, lists, strict=True):
            if not vals:
                raise ValueError(f"grid[{k!r}] is empty: give at least one value")
        configs = [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*lists)]
    elif isinstance(grid, Sequence) and not isinstance(grid, (str, bytes)):
        configs = []
        for i, g in enumerate(grid):
            if not isinstance(g, Mapping):
                raise TypeError(f"grid[{i}] must be a dict of Simulator parameters, got {g!r}")
            configs.append(dict(g))
        if not configs:
            raise ValueError("grid is an empty list: give at least one configuration")
    else:
        raise TypeError(
            f"grid must be a dict of lists or a list of dicts, got {type(grid).__name__}"
        )
    for i, c in enumerate(configs):
        _check_config(i, c)
    return configs


def _loads(load: Any, workloads: Mapping[str, Workload]) -> dict[str, list[tuple[float, float]]]:
    """Per workload: (scale_time factor, load multiplier) pairs, in the order given."""
    if load is None:
        form, values = "scale_time", [1.0]
    elif isinstance(load, Mapping):
        if len(load) != 1 or next(iter(load)) not in _LOAD_FORMS:
            raise ValueError(
                f"load as a dict takes exactly one key of {_LOAD_FORMS}, got {list(load)}"
            )
        form, values = next(iter(load.items()))
    else:
        form, values = "scale_time", load
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise TypeError(f"load must be a list of numbers, got {values!r}")
    values = list(values)
    if not values:
        raise ValueError("load is empty: give at least one value")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float, np.number)) or not (
            math.isfinite(v) and v > 0
        ):
            raise ValueError(f"load values ({form}) must be positive finite numbers, got {v!r}")
    out: dict[str, list[tuple[float, float]]] = {}
    for name, wl in workloads.items():
        pairs = []
        for v in values:
            v = float(v)
            if form == "scale_time":
                scale = v
            elif form == "load":
                scale = 1.0 / v
            else:
                rate = _offered_rps(wl)
                if not math.isfinite(rate) or rate <= 0:
                    raise ValueError(
                        f"load={{'rate': ...}} needs an offered rate, but workload {name!r} "
                        "spans no time"
                    )
                scale = rate / v
            pairs.append((scale, 1.0 / scale))
        out[name] = pairs
    return out


def _offered_rps(wl: Workload) -> float:
    arr = wl.arrival_ms
    if len(arr) < 2 or not arr[-1] > arr[0]:
        return float("nan")
    return len(arr) * 1000.0 / float(arr[-1] - arr[0])


def _label(value: Any) -> Any:
    """How a parameter value appears in the frame (and the Parquet store)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, type)):
        return value.__qualname__
    text = _repr(value)
    return repr(value) if text is None else text


# ----------------------------------------------------------------- one run
class _Task(NamedTuple):
    """What one run needs besides its workload (small: this travels per task)."""

    index: int
    workload: str
    params: dict
    scale_time: float
    metrics: Any
    slo: tuple


def _py(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def _measure(res: Any, sim: Any, spec: Any, slo: tuple) -> dict[str, Any]:
    if callable(spec):
        values = dict(spec(res))
        return {str(k): _py(v) for k, v in values.items()}
    s = res.summary(slo_ttft_ms=slo[0], slo_tpot_ms=slo[1])
    out = {str(k): _py(v) for k, v in s.items()}
    for tier, hit in res.tiers["token_hit_ratio"].drop("hbm").items():  # by lower tier
        out[f"{tier}_token_hit_ratio"] = float(hit)
    tp = getattr(sim.cost_model, "tp", 1) if sim.cost_model is not None else 1
    out["gpus"] = int(len(res.replicas)) * int(tp)
    req = res.requests
    fin = req["status"].to_numpy() == "finished"
    dur = out.get("duration_ms", float("nan")) / 1000.0
    tokens = float(req["input_len"].to_numpy()[fin].sum())
    out["input_tok_s"] = tokens / dur if dur and dur > 0 else float("nan")
    if spec is None:
        return out
    missing = [m for m in spec if m not in out]
    if missing:
        raise KeyError(f"metrics {missing} are not in the summary; it has {sorted(out)}")
    return {m: out[m] for m in spec}


def _run_task(workload: Workload, task: _Task) -> tuple[int, dict[str, Any], str | None]:
    """Run one configuration; never raises (a failure becomes the error message)."""
    try:
        params, options = _split_run_options(task.params)
        sim = _simulator(params)
        wl = workload if task.scale_time == 1.0 else workload.scale_time(task.scale_time)
        res = sim.run(wl, progress=False, **options)
        return task.index, _measure(res, sim, task.metrics, task.slo), None
    except Exception as exc:  # the sweep goes on; the row says what went wrong
        return task.index, {}, f"{type(exc).__name__}: {exc}"


_WORKER_WORKLOADS: dict[str, Workload] = {}


def _init_worker(workloads: dict[str, Workload]) -> None:
    _WORKER_WORKLOADS.clear()
    _WORKER_WORKLOADS.update(workloads)


def _run_in_worker(task: _Task) -> tuple[int, dict[str, Any], str | None]:
    return _run_task(_WORKER_WORKLOADS[task.workload], task)


# ----------------------------------------------------------------- executors
def _is_dask_client(executor: Any) -> bool:
    distributed = sys.modules.get("distributed")
    return distributed is not None and isinstance(executor, distributed.Client)


def _cpus() -> int:
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _dashboard(client: Any) -> str | None:
    try:
        if "dashboard" not in client.scheduler_info().get("services", {}):
            return None
        return client.dashboard_link
    except Exception:
        return None


def _execute(
    tasks: list[_Task], workloads: dict[str, Workload], executor: Any, bar: Any
) -> Iterator[tuple[int, dict[str, Any], str | None]]:
    """Results of the tasks, in completion order."""
    if not tasks:
        return
    if executor is None:
        for t in tasks:
            yield _run_task(workloads[t.workload], t)
        return
    if _is_dask_client(executor):
        yield from _execute_dask(tasks, workloads, executor, bar)
        return
    if isinstance(executor, str):
        if executor != "processes":
            raise ValueError(
                f"executor must be None, 'processes', a concurrent.futures.Executor or a "
                f"dask.distributed.Client, got {executor!r}"
            )
        yield from _own_pool(tasks, workloads)
        return
    if isinstance(executor, Executor):
        broken: list[_Task] = []
        yield from _execute_user(tasks, workloads, executor, broken)
        if broken:
            # The user's pool broke (a worker died: every pending future fails
            # with BrokenProcessPool, the culprit unnamed). Finished rows are
            # kept; the runs it lost go to our own pool, which retries each and
            # names the run whose worker dies.
            warnings.warn(
                f"executor: the {type(executor).__name__} broke ({broken[0][1]}) with "
                f"{len(broken)} of {len(tasks)} runs unfinished; those run again on sweep's own "
                "process pool (executor='processes'), which retries a run whose worker dies "
                "alone and names it in its row's error",
                RuntimeWarning,
                stacklevel=4,
            )
            yield from _own_pool([t for t, _ in broken], workloads)
        return
    raise TypeError(
        f"executor must be None, 'processes', a concurrent.futures.Executor or a "
        f"dask.distributed.Client, got {type(executor).__name__}"
    )


def _own_pool(
    tasks: list[_Task], workloads: dict[str, Workload]
) -> Iterator[tuple[int, dict[str, Any], str | None]]:
    """The tasks on sweep's own process pool (:mod:`inferasim._pool`)."""
    return run_in_processes(
        tasks,
        workers=min(_cpus(), len(tasks)),
        init=_init_worker,
        initargs=(workloads,),
        run=_run_in_worker,
        index=lambda t: t.index,
    )


def _execute_user(
    tasks: list[_Task], workloads: dict[str, Workload], executor: Executor, broken: list
) -> Iterator[tuple[int, dict[str, Any], str | None]]:
    """Results of the tasks on a user's executor; the tasks a broken pool lost
    are appended to ``broken`` as ``(task, error text)`` instead of yielded."""
    futures: dict[Any, _Task] = {}
    try:
        for i, t in enumerate(tasks):
            try:
                futures[executor.submit(_run_task, workloads[t.workload], t)] = t
            except BrokenExecutor as exc:  # broken before every task was sent
                broken.extend((u, f"{type(exc).__name__}: {exc}") for u in tasks[i:])
                break
        for f in _cf_as_completed(futures):
            try:
                yield f.result()
            except BrokenExecutor as exc:
                broken.append((futures[f], f"{type(exc).__name__}: {exc}"))
            except Exception as exc:  # the task could not be sent, or its result back
                yield futures[f].index, {}, f"{type(exc).__name__}: {exc}"
    finally:
        for f in futures:
            f.cancel()
    broken.sort(key=lambda b: b[0].index)


def _execute_dask(
    tasks: list[_Task], workloads: dict[str, Workload], client: Any, bar: Any
) -> Iterator[tuple[int, dict[str, Any], str | None]]:
    from distributed import as_completed

    link = _dashboard(client)
    if link and bar is not None and not bar.disable:
        bar.write(f"Dask dashboard: {link}")
    # Every workload goes to every worker once; tasks carry a reference to it.
    scattered = {
        name: client.scatter(wl, broadcast=True, hash=False) for name, wl in workloads.items()
    }
    run = uuid.uuid4().hex[:8]
    futures = {}
    for t in tasks:
        fut = client.submit(
            _run_task, scattered[t.workload], t, key=f"inferasim-sweep-{run}-{t.index}", pure=False
        )
        futures[fut.key] = (fut, t)
    try:
        for fut in as_completed([f for f, _ in futures.values()]):
            task = futures[fut.key][1]
            try:
                yield fut.result()
            except Exception as exc:  # a worker died on it (KilledWorker) or it was lost
                yield task.index, {}, f"{type(exc).__name__}: {exc}"
            fut.release()
    finally:
        client.cancel([f for f, _ in futures.values()])
        client.cancel(list(scattered.values()))


# ----------------------------------------------------------------- store
def read_store(store: str | os.PathLike[str]) -> pd.DataFrame:
    """Every run kept in a sweep store folder, one row each, in no set order.

    Parameters
    ----------
    store : path
        The folder given as ``sweep(..., store=...)``.

    Returns
    -------
    pandas.DataFrame
        The rows as :func:`sweep` returned them (``key`` identifies a run).

    Examples
    --------
    >>> import tempfile, inferasim as ism
    >>> wl = ism.Workload.from_requests([0, 100], [64, 64], [2, 2], block_size=16)
    >>> folder = tempfile.mkdtemp() + "/runs.parquet"
    >>> df = ism.sweep(wl, {"replicas": [1, 2], "cost_model": [ism.LinearCostModel()],
    ...                      "kv_tokens": [64 * 16]}, progress=False, store=folder)
    >>> sorted(read_store(folder)["replicas"].tolist())
    [1, 2]
    """
    require_pyarrow()
    rows, _ = read_rows(store_dir(store), quarantine=False)
    return pd.DataFrame(list(rows.values()))


# ----------------------------------------------------------------- sweep
def sweep(
    workload: Workload | Mapping[str, Workload],
    grid: Mapping[str, Sequence[Any]] | Sequence[Mapping[str, Any]],
    *,
    load: Sequence[float] | Mapping[str, Sequence[float]] | None = None,
    metrics: Sequence[str] | Callable[[Any], Mapping[str, Any]] | None = None,
    executor: Any = None,
    progress: bool = True,
    store: str | os.PathLike[str] | None = None,
    slo_ttft_ms: float | None = None,
    slo_tpot_ms: float | None = None,
    run: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """Simulate every (workload, configuration, load) of a grid; one row per run.

    Parameters
    ----------
    workload : Workload or dict of str to Workload
        Several workloads (a dict) add a ``workload`` column with their names.
    grid : dict of lists, or list of dicts
        :class:`~inferasim.sim.Simulator` parameters by their
        :meth:`~inferasim.sim.Simulator.get_params` names: ``replicas``,
        ``routing``, ``kv_tokens``, ``cost_model``, ``eviction``, ``tiers``,
        ..., and nested settings as ``outer__inner`` (``engine__max_num_seqs``,
        ``routing__overlap_weight``, ``replicas__prefill``,
        ``admission__ttft_ms``). Each run gets its own copy of the
        simulator (:meth:`~inferasim.sim.Simulator.set_params` on a fresh
        ``Simulator()``, deep-copied), so objects in the grid are never
        changed. A key naming a :meth:`~inferasim.sim.Simulator.run` option
        (``closed_loop``, ``think_time``, ``timeline_ms``) varies that option;
        ``progress`` is an error (the sweep has one bar). A dict of lists is
        the Cartesian product in key order (the last key varies fastest); a
        list of dicts is taken as it is.
    load : list of float, or dict, optional
        The loads to run each configuration at, as a list of ``scale_time``
        factors (``0.5`` halves every arrival time: twice the load), or as a
        dict with one key: ``{"load": [1, 2, 4]}`` (load multipliers: offered
        rate times 1, 2, 4), ``{"rate": [5.0, 10.0]}`` (target offered rates
        in requests per second, each workload scaled to it) or
        ``{"scale_time": [...]}``. Default: the workloads as they are. The
        frame gets ``load`` (multiplier), ``scale_time`` and ``offered_rps``.
    metrics : list of str or callable, optional
        Default: every entry of :meth:`SimResult.summary` plus
        ``<tier>_token_hit_ratio`` per lower KV tier, ``gpus`` and
        ``input_tok_s``. A list keeps those names only. A callable
        ``f(result) -> dict`` computes the metrics itself (for the process
        and Dask executors it must be picklable: a module-level function).
        The store knows a callable by its module, name and code (see the
        module docstring): after a change to it, its runs run again.
    executor : None, "processes", Executor or dask.distributed.Client
        Where the runs go (see the module docstring). Same frame on each.
    progress : bool, default True
        One ``tqdm.auto`` bar over the runs (and the Dask dashboard link).
    store : path, optional
        A folder (a Parquet dataset) that receives each finished run at once;
        a rerun skips the runs already in it. Needs pyarrow.
    slo_ttft_ms, slo_tpot_ms : float, optional
        Objectives passed to :meth:`SimResult.summary` for ``goodput_rps``
        and ``slo_attainment`` (to reject requests by SLO, put an
        ``admission=SloAdmission(...)`` in the grid).
    run : dict, optional
        :meth:`~inferasim.sim.Simulator.run` options for every run, e.g.
        ``{"closed_loop": True, "think_time": 500.0}``: part of every
        configuration as if the grid gave them with one value (a column
        each, in the seed and the store key). A key also in the grid, or not
        a run option, is an error.

    Returns
    -------
    pandas.DataFrame
        One row per run in grid order (workload, then configuration, then
        load): ``workload`` (with several), the configuration (numbers and
        strings as given, other objects by their ``repr``, functions by
        name), ``load``, ``scale_time``, ``offered_rps``, ``seed``, the
        metrics, ``error`` (missing unless the run failed) and ``key`` (the
        run's store key). ``frame.attrs["runs"]`` counts the simulations
        run by this call, ``frame.attrs["stored"]`` the rows read from the
        store, ``frame.attrs["quarantined"]`` the paths of the bad parts it
        found (moved to ``quarantine/``).

    Examples
    --------
    >>> import inferasim as ism
    >>> wl = ism.Workload.from_synthetic(60, rate=20.0, input_len=256, output_len=8, seed=1)
    >>> df = ism.sweep({"a": wl, "b": wl.head(30)},
    ...                [{"replicas": 1}, {"replicas": 0}],
    ...                load={"rate": [10.0]}, metrics=["finished", "gpus"],
    ...                progress=False)
    >>> df[["workload", "replicas", "finished", "gpus"]].to_dict("records")[:2]
    [{'workload': 'a', 'replicas': 1, 'finished': 60.0, 'gpus': 1.0}, {'workload': 'a', 'replicas': 0, 'finished': nan, 'gpus': nan}]
    >>> df["error"].iloc[1]
    'ValueError: replicas must be a positive integer, got 0'
    >>> round(float(df["offered_rps"].iloc[0]), 6)
    10.0

    Nested settings by ``outer__inner`` keys, run options for every run:

    >>> df = ism.sweep(wl, {"routing__overlap_weight": [1.0, 4.0], "engine__max_num_seqs": [8]},
    ...                run={"timeline_ms": 100.0}, metrics=["finished"], progress=False)
    >>> df[["routing__overlap_weight", "engine__max_num_seqs", "timeline_ms"]].to_dict("records")[1]
    {'routing__overlap_weight': 4.0, 'engine__max_num_seqs': 8, 'timeline_ms': 100.0}
    >>> df["finished"].tolist()
    [60.0, 60.0]
    """
    from tqdm.auto import tqdm

    if isinstance(workload, Workload):
        workloads, named = {"workload": workload}, False
    elif isinstance(workload, Mapping):
        workloads, named = dict(workload), True
        if not workloads:
            raise ValueError("workload is an empty dict: give at least one workload")
        for name, wl in workloads.items():
            if not isinstance(wl, Workload):
                raise TypeError(f"workload[{name!r}] must be a Workload, got {type(wl).__name__}")
    else:
        raise TypeError(
            f"workload must be a Workload or a dict of them, got {type(workload).__name__}"
        )
    if metrics is not None and not callable(metrics):
        if isinstance(metrics, (str, bytes)):
            raise TypeError(f"metrics must be a list of names, got {metrics!r}")
        metrics = tuple(str(m) for m in metrics)
    slo_ttft_ms = slo_ms(slo_ttft_ms, "slo_ttft_ms")
    slo_tpot_ms = slo_ms(slo_tpot_ms, "slo_tpot_ms")
    configs = _expand(grid)
    fixed = run_options(run, progress=False)
    for i, c in enumerate(configs):
        both = [k for k in fixed if k in c]
        if both:
            raise ValueError(f"grid configuration {i} and run= both set {both}: give each once")
        c.update(fixed)
    loads = _loads(load, workloads)
    slo = (slo_ttft_ms, slo_tpot_ms)
    path = None
    if store is not None:
        require_pyarrow()
        path = store_dir(store)

    prints = {name: fingerprint(wl) for name, wl in workloads.items()}
    seeds = [seed_of(c) for c in configs]
    key_tokens = [_key_token(c, f"configuration {i}", path) for i, c in enumerate(configs)]
    metrics_token = _key_token(metrics, "metrics", path)
    tasks: list[_Task] = []
    heads: list[dict[str, Any]] = []
    keys: list[str] = []
    for name, wl in workloads.items():
        offered = _offered_rps(wl)
        for c, ctok, seed in zip(configs, key_tokens, seeds, strict=True):
            params = {**c, "seed": seed}
            for scale, mult in loads[name]:
                key = _digest(
                    {
                        "v": _KEY_VERSION,
                        "workload": [name, prints[name]],
                        "config": ctok,
                        "seed": seed,
                        "scale_time": repr(scale),
                        "metrics": metrics_token,
                        "slo": [repr(s) for s in slo],
                    }
                )
                head = {"workload": name} if named else {}
                head.update({k: _label(v) for k, v in c.items()})
                head.update(
                    {"load": mult, "scale_time": scale, "offered_rps": offered * mult, "seed": seed}
                )
                tasks.append(_Task(len(tasks), name, params, scale, metrics, slo))
                heads.append(head)
                keys.append(key)

    stored, bad = read_rows(path, quarantine=True) if path is not None else ({}, [])
    results: dict[int, dict[str, Any]] = {}
    todo = []
    for t, key in zip(tasks, keys, strict=True):
        if key in stored:
            results[t.index] = stored[key]
        else:
            todo.append(t)
    n_stored = len(results)

    bar = tqdm(total=len(tasks), initial=n_stored, disable=not progress, desc="sweep", unit="run")
    try:
        for index, values, error in _execute(todo, workloads, executor, bar):
            row = {**heads[index], **values, "error": error, "key": keys[index]}
            if path is not None and error is None:
                write_row(path, row)
            results[index] = row
            bar.update(1)
    finally:
        bar.close()

    rows = [results[i] for i in range(len(tasks))]
    columns = list(heads[0]) if heads else []
    for row in rows:
        for k in row:
            if k not in columns and k not in ("error", "key"):
                columns.append(k)
    columns += ["error", "key"]
    frame = pd.DataFrame.from_records(rows, columns=columns)
    frame.attrs["runs"] = len(todo)
    frame.attrs["stored"] = n_stored
    frame.attrs["quarantined"] = [str(p) for p in bad]
    return frame


class _CallableModule(types.ModuleType):
    """``inferasim.sweep`` is both this module and the function :func:`sweep`."""

    def __call__(self, *args: Any, **kwargs: Any) -> pd.DataFrame:
        return sweep(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
