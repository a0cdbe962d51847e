"""Handoff traffic with and without a prefix cache on the decode instances.

The FAST'25 conversation trace, Llama-3.1-8B on H100-80GB (the default
roofline model), ``Disaggregated(prefill=8, decode=8)`` with the default
routing and 50 GB/s handoffs, ``decode_cache`` False and True. Prints, for
each, the prompt KV the handoffs moved (GB: ``(input_len -
decode_hit_tokens) * kv_bytes_per_token`` summed over the handed-off
requests), the share of prompt tokens the decode instances already held, and
the mean TTFT and TPOT; the README quotes this table
(``tests/test_sim_decode_cache.py`` checks it on the trace).

A second table runs the same fleet with ``decode_cache=True`` and the
README's KV tiers (3M tokens of host DRAM per replica and a 30M-token pool
shared by the fleet, ``bench_simulator.tiers()``), with and without tiers
on the decode instances (``Disaggregated(decode_tiers=...)``): the handoff
GB and the share of the handed-off prompt tokens the decode instances held
(HBM and their tiers); the README quotes it too.

Usage::

    python benchmarks/bench_decode_cache.py
"""

from __future__ import annotations

from typing import Any

from _common import core_build, trace_path
from bench_simulator import tiers


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


def decode_tier_table(wl: Any, tiers: list) -> list[tuple[str, float, float, float, float]]:
    """``(case, handoff GB, held share, TTFT mean ms, TPOT mean ms)`` of
    ``Disaggregated(prefill=8, decode=8, decode_cache=True)`` with ``tiers`` on
    ``wl``, for ``decode_tiers`` False and True.

    Examples
    --------
    >>> from inferasim import Workload
    >>> from inferasim.sim import Tier
    >>> wl = Workload.from_requests([0.0, 9e3], [48, 48], [4, 4], [[1, 2, 3]] * 2, block_size=16)
    >>> dram = Tier("dram", 10**6, read_gbps=50.0, write_gbps=50.0)
    >>> [(case, round(gb * 1e9 / 131072)) for case, gb, *_ in decode_tier_table(wl, [dram])]
    [('decode_tiers=False', 48), ('decode_tiers=True', 48)]
    """
    import inferasim as ism
    from inferasim.sim.roofline import RooflineCostModel

    cost = RooflineCostModel()
    kvb = cost.kv_bytes_per_token
    rows = []
    for on in (False, True):
        fleet = ism.Disaggregated(prefill=8, decode=8, decode_cache=True, decode_tiers=on)
        res = ism.Simulator(replicas=fleet, cost_model=cost, tiers=tiers).run(wl, progress=False)
        req = res.requests
        handed = req[req["decode_replica"] >= 0]
        held = handed["decode_hit_tokens"]
        moved = float((handed["input_len"] - held).sum()) * kvb / 1e9
        share = float(held.sum() / handed["input_len"].sum())
        rows.append((f"decode_tiers={on}", moved, share, float(req["ttft_ms"].mean()),
                     float(req["tpot_ms"].mean())))
    return rows


def _print(rows: list[tuple[str, float, float, float, float]]) -> None:
    """One table of :func:`handoff_table` or :func:`decode_tier_table` rows."""
    print(f"{'case':<20}{'handoff GB':>12}{'held':>8}{'TTFT mean ms':>14}{'TPOT mean ms':>14}")
    for case, gb, share, ttft, tpot in rows:
        print(f"{case:<20}{gb:>12.1f}{share:>8.3f}{ttft:>14.1f}{tpot:>14.2f}")


def main() -> None:
    import inferasim as ism

    wl = ism.Workload.from_mooncake(trace_path("conversation_trace.jsonl"))
    _print(handoff_table(wl))
    print("\ndecode_cache=True, tiers: 3M DRAM per replica + 30M shared pool")
    _print(decode_tier_table(wl, tiers()))
    print(f"simulator core {core_build()}")


if __name__ == "__main__":
    main()
