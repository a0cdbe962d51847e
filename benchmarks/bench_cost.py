"""Benchmark the step-time cost models.

Run: ``python benchmarks/bench_cost.py``. Prices 1e6 decode steps in one
vectorised call (the simulator's closed-form jump over a pure-decode stretch)
and single steps one call at a time (the event loop), for the roofline model
with a dense and an MoE preset and for LinearCostModel as a baseline. Prints
medians over repeats and the peak memory of the vectorised call.
"""

from __future__ import annotations

import time

import numpy as np
from _common import median_time, peak_memory_mb, print_table

from inferasim.sim.cost import LinearCostModel
from inferasim.sim.roofline import RooflineCostModel

N_STEPS = 1_000_000
N_SCALAR = 100_000


def main() -> None:
    # a decode stretch: 64 sequences whose contexts grow by one token a step
    steps = np.arange(N_STEPS, dtype=np.float64)
    decode_seqs = np.full(N_STEPS, 64.0)
    decode_context = 64 * 2048 + 64 * steps
    models = {
        "roofline llama-3.1-8b/h100": RooflineCostModel("llama-3.1-8b", "h100-80gb"),
        "roofline deepseek-v3/h200 tp8 (MoE)": RooflineCostModel("deepseek-v3", "h200", tp=8),
        "LinearCostModel (baseline)": LinearCostModel(),
    }
    rows = []
    for name, model in models.items():

        def vectorised(model=model):
            return model.step_time_ms(0, 0, decode_seqs, decode_context)

        t_vec, _ = median_time(vectorised, repeats=7)
        peak = peak_memory_mb(vectorised)

        def scalar_loop(model=model):
            f = model.step_time_ms
            start = time.perf_counter()
            for i in range(N_SCALAR):
                f(0, 0, 64, 131072 + 64 * i)
            return time.perf_counter() - start

        t_loop, _ = median_time(scalar_loop, repeats=5)
        rows.append(
            {
                "model": name,
                "1e6 steps vectorised (ms)": f"{t_vec * 1e3:.1f}",
                "ns/step": f"{t_vec / N_STEPS * 1e9:.1f}",
                "peak MB": f"{peak:.0f}",
                "scalar call (us)": f"{t_loop / N_SCALAR * 1e6:.2f}",
            }
        )
    print(f"Pricing decode steps: {N_STEPS:,} vectorised, {N_SCALAR:,} scalar calls; medians")
    print_table(rows)


if __name__ == "__main__":
    main()
