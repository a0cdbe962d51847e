"""Handoff traffic with and without a prefix cache on the decode instances.

The FAST'25 conversation trace, Llama-3.1-8B on H100-80GB (the default
roofline model), ``Disaggregated(prefill=8, decode=8)`` with the default
routing and 50 GB/s handoffs, ``decode_cache`` False and True. Prints, for
each, the prompt KV the handoffs moved (GB: ``(input_len -
decode_hit_tokens) * kv_bytes_per_token`` summed over the handed-off
requests), the share of prompt tokens the decode instances already held, and
the mean TTFT and TPOT; the README quotes this table
(``tests/test_sim_decode_cache.py`` checks it on the trace).

Usage::

    python benchmarks/bench_decode_cache.py
"""

from __future__ import annotations

from typing import Any

from _common import core_build, trace_path


def handoff_table(wl: Any) -> list[tuple[str, float, float, float, float]]:
    """``(case, handoff GB, held share, TTFT mean ms, TPOT mean ms)`` for
    ``decode_cache`` False and True on ``wl``.

    Examples
    --------
    >>> from inferasim import Workload
    >>> wl = Workload.from_requests([0.0, 9e3], [48, 48], [4, 4], [[1, 2, 3]] * 2, block_size=16)
    >>> [(case, round(gb * 1e9 / 131072)) for case, gb, *_ in handoff_table(wl)]
    [('decode_cache=False', 96), ('decode_cache=True', 48)]
    """
    import inferasim as ism
    from inferasim.sim.roofline import RooflineCostModel

    cost = RooflineCostModel()
    kvb = cost.kv_bytes_per_token
    rows = []
    for on in (False, True):
        fleet = ism.Disaggregated(prefill=8, decode=8, decode_cache=on)
        res = ism.Simulator(replicas=fleet, cost_model=cost).run(wl, progress=False)
        req = res.requests
        handed = req[req["decode_replica"] >= 0]
        held = handed["decode_hit_tokens"] if on else 0 * handed["input_len"]
        moved = float((handed["input_len"] - held).sum()) * kvb / 1e9
        share = float(held.sum() / handed["input_len"].sum())
        rows.append((f"decode_cache={on}", moved, share, float(req["ttft_ms"].mean()),
                     float(req["tpot_ms"].mean())))
    return rows


def main() -> None:
    import inferasim as ism

    wl = ism.Workload.from_mooncake(trace_path("conversation_trace.jsonl"))
    print(f"{'case':<20}{'handoff GB':>12}{'held':>8}{'TTFT mean ms':>14}{'TPOT mean ms':>14}")
    for case, gb, share, ttft, tpot in handoff_table(wl):
        print(f"{case:<20}{gb:>12.1f}{share:>8.3f}{ttft:>14.1f}{tpot:>14.2f}")
    print(f"simulator core {core_build()}")


if __name__ == "__main__":
    main()
