"""Sweeps that survive crashes: a killed worker process, a corrupted store, keys of code.

Real process pools: a configuration that asks for it kills its own worker
process (``os.kill(os.getpid(), SIGKILL)``, what the out-of-memory killer
does) or exits it; the other rows must come back exactly as an in-process
sweep gives them. Store parts are damaged on disk the ways a crash, a full
disk or a bad copy do; the sweep must name the part, set it aside and rerun
only that run.
"""

from __future__ import annotations

import os
import signal
import warnings
from pathlib import Path

import pandas as pd
import pytest

import inferasim as ism
from inferasim import sweep as sweep_module
from inferasim.sweep import StoreWarning

pytest.importorskip("pyarrow")
import pyarrow as pa
import pyarrow.parquet as pq

WL = ism.Workload.from_synthetic(
    30, rate=40.0, input_len=256, output_len=6, num_prefixes=3, prefix_len=128, seed=5
)
COST = ism.LinearCostModel(kv_tokens=32 * 512)
GRID = {"replicas": [1, 2, 3, 4, 5, 6], "cost_model": [COST]}
_MARK = "INFERASIM_TEST_DIE_ONCE"


def plain(res) -> dict:
    """The metrics every test compares: finished requests and the mean TTFT."""
    req = res.requests
    return {"finished": int((req["status"] == "finished").sum()),
            "ttft_mean": float(req["ttft_ms"].mean())}


def killed_at_three(res) -> dict:
    """plain(), but the run with 3 replicas kills its own worker process."""
    if len(res.replicas) == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    return plain(res)


def exits_at_three(res) -> dict:
    if len(res.replicas) == 3:
        os._exit(3)
    return plain(res)


def killed_once_at_three(res) -> dict:
    """The run with 3 replicas kills its worker the first time only (a marker file says so)."""
    mark = Path(os.environ[_MARK])
    if len(res.replicas) == 3 and not mark.exists():
        mark.write_text("died once")
        os.kill(os.getpid(), signal.SIGKILL)
    return plain(res)


@pytest.fixture(scope="module")
def reference() -> pd.DataFrame:
    return ism.sweep(WL, GRID, metrics=plain, progress=False)


def _values(frame: pd.DataFrame) -> list:
    return frame[["replicas", "finished", "ttft_mean"]].to_dict("records")


def test_a_killed_worker_costs_only_its_own_configuration(reference, tmp_path: Path):
    store = tmp_path / "runs.parquet"
    df = ism.sweep(WL, GRID, metrics=killed_at_three, executor="processes", progress=False,
                   store=store)
    # Before: rows 3-6 (and any pending run) all became "BrokenProcessPool" errors.
    assert df["error"].isna().tolist() == [True, True, False, True, True, True]
    errors = df["error"].tolist()
    assert errors[2].startswith("WorkerDied: ") and "SIGKILL" in errors[2]
    assert "twice" in errors[2]  # it was retried alone and died again
    ok = df["error"].isna()
    assert _values(df[ok]) == _values(reference[ok])
    # every finished row was stored; the rerun runs only the failed one (and it dies again)
    assert len(list(store.glob("part-*.parquet"))) == 5
    again = ism.sweep(WL, GRID, metrics=killed_at_three, executor="processes", progress=False,
                      store=store)
    assert again.attrs == {"runs": 1, "stored": 5, "quarantined": []}
    assert _values(again[ok]) == _values(reference[ok])


def test_a_worker_that_dies_once_is_retried_and_its_row_is_kept(reference, tmp_path, monkeypatch):
    monkeypatch.setenv(_MARK, str(tmp_path / "mark"))
    df = ism.sweep(WL, GRID, metrics=killed_once_at_three, executor="processes", progress=False)
    assert (tmp_path / "mark").exists()  # the first attempt really died
    assert df["error"].isna().all()
    assert _values(df) == _values(reference)


def test_a_worker_exit_status_is_named(reference):
    df = ism.sweep(WL, GRID, metrics=exits_at_three, executor="processes", progress=False)
    assert df["error"].iloc[2] == (
        "WorkerDied: the worker process running this configuration exited with status 3 "
        "twice: among the other runs, then rerun alone"
    )
    assert df["error"].drop(index=2).isna().all()


def test_a_user_process_pool_that_breaks_loses_no_row_and_names_the_run(reference, tmp_path):
    # A user's ProcessPoolExecutor whose worker dies at the 3-replica run: before,
    # every run not yet finished (rows 3-6 here) became "BrokenProcessPool: A process
    # in the process pool was terminated abruptly ...". Now the finished rows are
    # kept, the lost runs rerun on sweep's own pool, and only row 3 (whose worker
    # dies there too, twice) has an error, naming how its worker died.
    from concurrent.futures import ProcessPoolExecutor

    store = tmp_path / "runs.parquet"
    with ProcessPoolExecutor(2) as pool, pytest.warns(
        RuntimeWarning, match=r"^executor: the ProcessPoolExecutor broke \(BrokenProcessPool"
    ):
        df = ism.sweep(WL, GRID, metrics=killed_at_three, executor=pool, progress=False,
                       store=store)
    assert df["error"].isna().tolist() == [True, True, False, True, True, True]
    assert df["error"].iloc[2].startswith("WorkerDied: ") and "SIGKILL" in df["error"].iloc[2]
    ok = df["error"].isna()
    assert _values(df[ok]) == _values(reference[ok])
    assert len(list(store.glob("part-*.parquet"))) == 5  # every finished row stored


def test_a_user_pool_broken_before_the_sweep_runs_everything_on_sweeps_own(reference):
    # a pool already broken refuses every submit (BrokenProcessPool at submit time)
    from concurrent.futures import ProcessPoolExecutor

    pool = ProcessPoolExecutor(1)
    pool.submit(os._exit, 1).exception()  # its worker exits: the pool is broken
    with pytest.warns(RuntimeWarning, match="with 6 of 6 runs unfinished"):
        df = ism.sweep(WL, GRID, metrics=plain, executor=pool, progress=False)
    pool.shutdown()
    assert df["error"].isna().all()
    assert _values(df) == _values(reference)


def test_processes_executor_still_equals_in_process(reference):
    df = ism.sweep(WL, GRID, metrics=plain, executor="processes", progress=False)
    assert _values(df) == _values(reference) and df["error"].isna().all()


# ------------------------------------------------------------------- store
def _truncate(part: Path) -> None:
    part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])


def _garbage(part: Path) -> None:
    part.write_bytes(b"not parquet at all" * 10)


def _empty(part: Path) -> None:
    part.write_bytes(b"")


def _altered_value(part: Path) -> None:
    # a valid Parquet file, same key and same stored digest, one metric changed:
    # only the content check can see it
    table = pq.read_table(part)
    i = table.column_names.index("ttft_mean")
    changed = table.set_column(i, "ttft_mean", pa.array([table.column(i)[0].as_py() + 1.0]))
    assert changed.schema.metadata == table.schema.metadata
    pq.write_table(changed, part)


def _other_run(part: Path) -> None:
    # a whole, valid part of another run under this run's name (a bad copy)
    others = sorted(p for p in part.parent.glob("part-*.parquet") if p != part)
    part.write_bytes(others[0].read_bytes())


@pytest.mark.parametrize("damage, why", [
    (_truncate, "unreadable"),
    (_garbage, "unreadable"),
    (_empty, "unreadable"),
    (_altered_value, "corrupted: its values fail the content check"),
    (_other_run, "the run with key [0-9a-f]{64}, not the one its name says"),
])
def test_a_damaged_part_is_named_quarantined_and_only_its_run_reruns(
    reference, tmp_path: Path, damage, why
):
    store = tmp_path / "runs.parquet"
    first = ism.sweep(WL, GRID, metrics=plain, progress=False, store=store)
    part = store / f"part-{first['key'].iloc[3]}.parquet"
    damage(part)
    # Before: pyarrow's ArrowInvalid escaped and the store could not resume.
    with pytest.warns(StoreWarning, match=rf"{part.name} is {why}.*moved to .*quarantine"):
        df = ism.sweep(WL, GRID, metrics=plain, progress=False, store=store)
    assert df.attrs == {"runs": 1, "stored": 5, "quarantined": [str(part)]}
    assert _values(df) == _values(reference)
    assert (store / "quarantine" / part.name).exists()  # kept for a person to look at
    assert part.exists()  # rewritten by the rerun
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the store is whole again: no warning
        again = ism.sweep(WL, GRID, metrics=plain, progress=False, store=store)
    assert again.attrs == {"runs": 0, "stored": 6, "quarantined": []}


def test_read_store_skips_a_damaged_part_and_names_it(tmp_path: Path):
    store = tmp_path / "runs.parquet"
    first = ism.sweep(WL, GRID, metrics=plain, progress=False, store=store)
    part = store / f"part-{first['key'].iloc[0]}.parquet"
    _truncate(part)
    with pytest.warns(StoreWarning, match=rf"{part.name} is unreadable.*skipped"):
        rows = sweep_module.read_store(store)
    assert sorted(rows["replicas"]) == [2, 3, 4, 5, 6]
    assert part.exists()  # a reader moves nothing


def test_a_part_is_written_whole_or_not_at_all(tmp_path: Path, monkeypatch):
    # the write fails half way (disk full): no part and no temporary file remain
    store = tmp_path / "runs.parquet"

    def disk_full(table, where, **kwargs):
        where.write(b"PAR1 half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pq, "write_table", disk_full)
    with pytest.raises(OSError, match="No space left"):
        ism.sweep(WL, {"replicas": [1], "cost_model": [COST]}, metrics=plain, progress=False,
                  store=store)
    assert list(store.iterdir()) == []


# ------------------------------------------------------------------- keys
def _scaled(c: float):
    def metrics(res):
        return {"finished_scaled": c * int((res.requests["status"] == "finished").sum())}
    return metrics


def test_functions_of_one_name_never_share_a_store_key(tmp_path: Path):
    store = tmp_path / "runs.parquet"
    grid = {"replicas": [1], "cost_model": [COST]}
    one, two = _scaled(1.0), _scaled(2.0)
    assert one.__qualname__ == two.__qualname__  # the case that used to share a key
    a = ism.sweep(WL, grid, metrics=one, progress=False, store=store)
    b = ism.sweep(WL, grid, metrics=two, progress=False, store=store)
    # WL has 30 requests, all finish on one replica: 1 x 30 and 2 x 30
    assert a["finished_scaled"].tolist() == [30.0] and b["finished_scaled"].tolist() == [60.0]
    assert b.attrs["runs"] == 1 and a["key"].iloc[0] != b["key"].iloc[0]
    # the same code over the same values is the same run: read back, not rerun
    c = ism.sweep(WL, grid, metrics=_scaled(2.0), progress=False, store=store)
    assert c.attrs["runs"] == 0 and c["finished_scaled"].tolist() == [60.0]


def test_lambdas_and_redefined_functions_get_their_own_keys(tmp_path: Path):
    store = tmp_path / "runs.parquet"
    grid = {"replicas": [1], "cost_model": [COST]}
    first = eval("lambda res: {'n': 1}", {"__name__": "__main__"})
    second = eval("lambda res: {'n': 2}", {"__name__": "__main__"})
    assert first.__qualname__ == second.__qualname__ == "<lambda>"
    assert ism.sweep(WL, grid, metrics=first, progress=False, store=store)["n"].tolist() == [1]
    assert ism.sweep(WL, grid, metrics=second, progress=False, store=store)["n"].tolist() == [2]


def _router_class(pick: int) -> type:
    class Fixed:
        """Always the same replica: ``pick`` lives in the class body."""

        def __repr__(self) -> str:
            return "Fixed()"

        def __call__(self, request, replicas) -> int:
            return pick if pick >= 0 else len(replicas) - 1

    return Fixed


def test_grid_objects_of_redefined_classes_get_their_own_keys(tmp_path: Path):
    # two classes of one qualified name and repr ("Fixed()"), routing to replica 0 or 1
    store = tmp_path / "runs.parquet"
    keys = []
    for pick in (0, 1):
        router = _router_class(pick)()
        df = ism.sweep(WL, {"replicas": [2], "routing": [router], "cost_model": [COST]},
                       metrics=plain, progress=False, store=store)
        assert df.attrs["runs"] == 1 and df["error"].isna().all()
        keys.append(df["key"].iloc[0])
    assert keys[0] != keys[1]


class _Opaque:
    """An object nothing describes (no parameters, a repr with its address)."""


def test_a_function_capturing_what_cannot_be_described_is_refused_for_a_store(tmp_path: Path):
    hidden = _Opaque()

    def metrics(res):
        return {"n": len(res.requests), "seen": hidden is not None}

    grid = {"replicas": [1], "cost_model": [COST]}
    with pytest.raises(ValueError, match=r"store= cannot identify.*captured 'hidden'"):
        ism.sweep(WL, grid, metrics=metrics, progress=False, store=tmp_path / "runs.parquet")
    # without a store nothing needs identifying: it runs
    df = ism.sweep(WL, grid, metrics=metrics, progress=False)
    assert df["n"].tolist() == [30]
