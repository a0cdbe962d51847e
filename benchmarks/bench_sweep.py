"""Benchmark of inferasim.sweep: 64 configurations of the conversation trace, serial vs Dask.

The grid: replicas {4, 6, 8, 12} x routing {kv_cost, cache_aware,
least_loaded, round_robin} x load {1, 1.5, 2, 3} (``load={"load": [...]}``,
multipliers of the trace's offered rate) on the FAST'25 conversation trace
(12,031 requests), Llama-3.1-8B on H100 (the default roofline model): 64
simulations of about a second each.

Timed (wall clock of the ``sweep`` call, median of ``--repeats``):

* ``serial``: ``executor=None``, this process;
* ``processes``: ``executor="processes"`` (one worker per core, the workload
  sent once per worker through the pool initializer);
* ``dask``: a ``distributed.LocalCluster(n_workers=2, threads_per_worker=1,
  processes=True)`` bound to 127.0.0.1 (started before the timing: its
  start-up time is reported on its own).

The target is ``dask <= 1.15 * serial / 2``. Bytes per task: the pickled
size of what one Dask task carries (the run's configuration and a reference
to the scattered workload; cloudpickle, as Dask sends it) against the
pickled workload, which is scattered once to each worker
(``client.scatter(..., broadcast=True)``) and never travels with a task.
The machine is shared: the 1-minute load average before and after each
case is printed with it.

Usage::

    python benchmarks/bench_sweep.py             # 3 repeats
    python benchmarks/bench_sweep.py --repeats 1
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import time

from _common import print_table, trace_path


def loadavg() -> str:
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


GRID = {
    "replicas": [4, 6, 8, 12],
    "routing": ["kv_cost", "cache_aware", "least_loaded", "round_robin"],
}
LOAD = {"load": [1.0, 1.5, 2.0, 3.0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    import cloudpickle
    from distributed import Client, LocalCluster

    import inferasim as ism
    from inferasim import sweep as sweep_module

    wl = ism.Workload.from_mooncake(trace_path("conversation_trace.jsonl"))
    n_runs = 4 * 4 * 4
    times: dict[str, list[float]] = {"serial": [], "processes": [], "dask": []}
    loads: dict[str, list[str]] = {k: [] for k in times}
    frames = {}

    def timed(name, **kw):
        before = loadavg()
        t = time.perf_counter()
        df = ism.sweep(wl, GRID, load=LOAD, progress=False, **kw)
        times[name].append(time.perf_counter() - t)
        loads[name].append(f"{before}->{loadavg()}")
        print(f"  {name}: {times[name][-1]:.1f} s (load {loads[name][-1]})", flush=True)
        assert len(df) == n_runs and df["error"].isna().all(), df["error"].dropna().head()
        frames[name] = df

    t = time.perf_counter()
    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
        dashboard_address="127.0.0.1:0",
    )
    client = Client(cluster)
    client.wait_for_workers(2)
    startup = time.perf_counter() - t
    try:
        for _ in range(args.repeats):
            timed("serial")
            timed("processes", executor="processes")
            timed("dask", executor=client)
        # What travels per task: the task tuple plus a reference to the scattered workload.
        task = sweep_module._Task(
            0, "workload", {"replicas": 8, "routing": "kv_cost", "seed": 1}, 1.0, None,
            (None, None),
        )
        ref = client.scatter(wl, broadcast=True, hash=False)
        per_task = len(cloudpickle.dumps((sweep_module._run_task, ref, task)))
        ref.release()
    finally:
        client.close()
        cluster.close()

    for name in ("processes", "dask"):
        a, b = frames["serial"].copy(), frames[name].copy()
        a.attrs, b.attrs = {}, {}
        assert a.equals(b), f"{name} frame differs from serial"

    serial = statistics.median(times["serial"])
    rows = []
    for name, ts in times.items():
        med = statistics.median(ts)
        rows.append(
            {
                "executor": name,
                "workers": 1 if name == "serial" else 2,
                "median_s": f"{med:.1f}",
                "runs": ", ".join(f"{x:.1f}" for x in ts),
                "per_run_s": f"{med / n_runs:.2f}",
                "vs_serial/2": "" if name == "serial" else f"{med / (serial / 2):.2f}x",
                "load_avg": " ".join(loads[name]),
            }
        )
    print(f"64 configurations x {len(wl):,} requests (conversation trace); "
          f"LocalCluster start-up {startup:.1f} s (not in the times)")
    print_table(rows)

    whole = len(pickle.dumps(wl, protocol=pickle.HIGHEST_PROTOCOL))
    print()
    print_table(
        [
            {"what": "one task's arguments (cloudpickle)", "bytes": f"{per_task:,}"},
            {"what": "the workload (pickled; scattered once per worker)", "bytes": f"{whole:,}"},
            {"what": "64 tasks if the workload went with each", "bytes": f"{64 * whole:,}"},
            {"what": "64 tasks + 2 scattered copies (what sweep sends)",
             "bytes": f"{64 * per_task + 2 * whole:,}"},
        ]
    )
    print("\nThe machine is shared (2 cores, other jobs running): load averages above.")


if __name__ == "__main__":
    main()
