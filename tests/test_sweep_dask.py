"""inferasim.sweep on a real Dask LocalCluster: two worker processes, one thread each.

The cluster (and its dashboard) binds to 127.0.0.1 only, on free ports, and is started once
for the module and closed at its end. Under CI=true a missing ``distributed``
fails instead of skipping (it is in the ``test`` extra).
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pandas as pd
import pytest

import inferasim as ism
from inferasim import sweep as sweep_module

if os.environ.get("CI", "").lower() == "true":
    import distributed  # noqa: F401  (must be installed under CI)
else:
    pytest.importorskip("distributed")
pytest.importorskip("pyarrow")

from distributed import Client, LocalCluster
from test_sweep import COST, GRID, LOAD, frames_equal, small_workload


@pytest.fixture(scope="module")
def client():
    cluster = LocalCluster(
        n_workers=2,
        processes=True,
        threads_per_worker=1,
        host="127.0.0.1",
        dashboard_address="127.0.0.1:0",  # None would still open port 8787 on every interface
    )
    c = Client(cluster)
    try:
        yield c
    finally:
        c.close()
        cluster.close()


@pytest.fixture(scope="module")
def wl() -> ism.Workload:
    return small_workload()


@pytest.fixture(scope="module")
def serial(wl) -> pd.DataFrame:
    return ism.sweep(wl, GRID, load=LOAD, progress=False)


def test_dask_frame_equals_in_process(client, wl, serial):
    df = ism.sweep(wl, GRID, load=LOAD, executor=client, progress=False)
    frames_equal(df, serial)
    assert df.attrs == {"runs": 12, "stored": 0, "quarantined": []}


def test_dask_failing_configuration_gives_an_error_row(client, wl):
    grid = [
        {"replicas": 2, "cost_model": COST},
        {"replicas": 2, "cost_model": COST, "engine__max_batched_tokens": 1},  # < max_num_seqs
        {"replicas": 1, "cost_model": COST},
    ]
    df = ism.sweep(wl, grid, executor=client, progress=False)
    assert df["error"].isna().tolist() == [True, False, True]
    assert "engine.max_batched_tokens (1) must be >= engine.max_num_seqs" in df["error"].iloc[1]
    frames_equal(df, ism.sweep(wl, grid, progress=False))


def test_dask_resumes_a_partial_store(client, wl, serial, tmp_path: Path):
    store = tmp_path / "runs.parquet"
    ism.sweep(wl, GRID, load=LOAD, progress=False, store=store)
    parts = sorted(store.glob("part-*.parquet"))
    for p in parts[1::4]:  # lose 3 of 12
        p.unlink()
    df = ism.sweep(wl, GRID, load=LOAD, executor=client, progress=False, store=store)
    assert df.attrs == {"runs": 3, "stored": 9, "quarantined": []}
    frames_equal(df, serial)
    assert len(list(store.glob("part-*.parquet"))) == 12


def test_workload_is_scattered_once_not_sent_with_tasks(client, wl):
    # Drive the executor by hand so the futures are still alive when we look:
    # every sweep task depends on the one scattered workload, which both
    # workers hold, and a task's own arguments are a small fraction of it.
    tasks = [
        sweep_module._Task(i, "w", {"replicas": r, "cost_model": COST, "seed": 0}, 1.0, None,
                           (None, None))
        for i, r in enumerate([1, 2, 3, 4])
    ]
    gen = sweep_module._execute_dask(tasks, {"w": wl}, client, None)
    first = next(gen)
    assert first[2] is None

    def deps(dask_scheduler):
        out = {}
        for key, ts in dask_scheduler.tasks.items():
            if str(key).startswith("inferasim-sweep-"):
                out[str(key)] = sorted(str(d.key) for d in ts.dependencies)
        data = {
            str(key): sorted(ws.address for ws in ts.who_has)
            for key, ts in dask_scheduler.tasks.items()
            if not str(key).startswith("inferasim-sweep-")
        }
        return out, data

    by_task, holders = client.run_on_scheduler(deps)
    assert len(by_task) == 4
    shared = {tuple(d) for d in by_task.values()}
    assert len(shared) == 1 and len(next(iter(shared))) == 1  # one dependency, the same for all
    (wl_key,) = next(iter(shared))
    assert len(holders[wl_key]) == 2  # broadcast to both workers
    assert len(pickle.dumps(tasks[0])) * 20 < len(pickle.dumps(wl))
    rest = list(gen)
    assert sorted(i for i, _, _ in [first, *rest]) == [0, 1, 2, 3]
