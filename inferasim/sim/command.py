"""The ``inferasim simulate`` subcommand: a workload in, a summary table out.

With no arguments it runs a generated workload (``--generate``) on a fleet
of 4 Llama-3.1-8B replicas on H100-80GB; a ``SOURCE`` (``conversation``, a
file) replays a trace instead. ``--out`` writes the per-request frame
(``.csv`` or ``.parquet``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from inferasim._cli_types import integer, number
from inferasim._cli_workload import add_workload_arguments, workload_from_args
from inferasim._format import count_noun
from inferasim._validate import slo_ms
from inferasim.sim.cache import EVICTION_POLICIES
from inferasim.sim.config import EngineConfig
from inferasim.sim.presets import GPUS, MODELS
from inferasim.sim.router import ROUTING_POLICIES, KvCostRouter
from inferasim.sim.simulator import Simulator

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``simulate`` options to ``parser``.

    Examples
    --------
    >>> p = argparse.ArgumentParser()
    >>> add_arguments(p)
    >>> a = p.parse_args(["--trace", "conversation", "--replicas", "8"])
    >>> a.trace, a.replicas, a.routing
    ('conversation', 8, 'kv_cost')
    """
    add_workload_arguments(parser)
    fleet = parser.add_argument_group("fleet")
    fleet.add_argument("--replicas", type=integer(1), default=4, help="identical serving replicas")
    fleet.add_argument(
        "--routing", default="kv_cost", choices=list(ROUTING_POLICIES), help="routing policy"
    )
    fleet.add_argument(
        "--model",
        default="llama-3.1-8b",
        choices=list(MODELS),
        metavar="MODEL",
        help="model preset of the roofline cost model: " + ", ".join(MODELS),
    )
    fleet.add_argument(
        "--gpu",
        default="h100-80gb",
        choices=list(GPUS),
        metavar="GPU",
        help="GPU preset of the roofline cost model: " + ", ".join(GPUS),
    )
    fleet.add_argument("--tp", type=integer(1), default=1, help="tensor-parallel GPUs per replica")
    fleet.add_argument(
        "--kv-tokens",
        type=integer(1),
        default=None,
        help="KV-cache capacity per replica in tokens (default: what fits in HBM next to the "
        "weights)",
    )
    fleet.add_argument(
        "--eviction", default="lru", choices=list(EVICTION_POLICIES), help="prefix-cache eviction"
    )
    fleet.add_argument(
        "--max-num-seqs", type=integer(1), default=256, help="most sequences in one batch"
    )
    fleet.add_argument(
        "--max-batched-tokens", type=integer(1), default=8192, help="most tokens in one engine step"
    )
    fleet.add_argument(
        "--no-chunked-prefill",
        action="store_true",
        help="prefill whole prompts in one step (default: chunked prefill)",
    )
    fleet.add_argument(
        "--overlap-weight",
        type=number(0.0, strict=False),
        default=None,
        help="weight of cache overlap in kv_cost routing (default 1.0)",
    )
    fleet.add_argument("--routing-seed", type=integer(0), default=0, help="seed of random routing")
    out = parser.add_argument_group("output")
    out.add_argument(
        "--slo-ttft-ms",
        type=_slo_flag("--slo-ttft-ms"),
        default=None,
        help="TTFT objective in ms, for goodput and SLO attainment (default: none)",
    )
    out.add_argument(
        "--slo-tpot-ms",
        type=_slo_flag("--slo-tpot-ms"),
        default=None,
        help="TPOT objective in ms, for goodput and SLO attainment (default: none)",
    )
    out.add_argument(
        "--out",
        default=None,
        type=_out_path,
        help="write the per-request frame to this .csv or .parquet file (default: none)",
    )
    out.add_argument(
        "--no-progress", action="store_true", help="no progress bar (default: a bar on stderr)"
    )


def _slo_flag(flag: str) -> Callable[[str], float]:
    """The argparse type of an objective flag: a number with ``0 < v <= 2**43``
    ms, by the rule of every objective (:func:`inferasim._validate.slo_ms`).

    Examples
    --------
    >>> _slo_flag("--slo-ttft-ms")("200")
    200.0
    >>> _slo_flag("--slo-tpot-ms")("nan")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: --slo-tpot-ms must be a finite number > 0 and <= 2**43 (ms), got 'nan'
    """

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{flag} must be a number of ms, got {text!r}"
            ) from None
        try:
            out = slo_ms(value, flag, optional=False)
        except ValueError as e:  # (argparse names the flag; the text as typed)
            rule = str(e).rsplit(", got ", 1)[0]
            raise argparse.ArgumentTypeError(f"{rule}, got {text!r}") from None
        assert out is not None
        return out

    parse.__name__ = flag  # (argparse names the type in some messages)
    return parse


def _out_path(text: str) -> str:
    """``--out``: a path ending in .csv or .parquet (else a usage error)."""
    if Path(text).suffix.lower() not in (".csv", ".parquet"):
        raise argparse.ArgumentTypeError(f"--out must end in .csv or .parquet, got {text!r}")
    return text


def _routing(args: argparse.Namespace) -> str | KvCostRouter:
    """``--routing`` as ``Simulator(routing=...)``: a name, or a router with ``--overlap-weight``.

    Examples
    --------
    >>> _routing(argparse.Namespace(routing="kv_cost", overlap_weight=2.0)).overlap_weight
    2.0
    >>> _routing(argparse.Namespace(routing="round_robin", overlap_weight=2.0))
    Traceback (most recent call last):
    ...
    ValueError: --overlap-weight weighs the cache overlap of --routing kv_cost, not of round_robin
    """
    if args.overlap_weight is None:
        return args.routing
    if args.routing != "kv_cost":
        raise ValueError(
            f"--overlap-weight weighs the cache overlap of --routing kv_cost, not of {args.routing}"
        )
    return KvCostRouter(overlap_weight=args.overlap_weight)


def run(args: argparse.Namespace) -> int:
    """Run the simulation the parsed options describe and print its summary.

    Examples
    --------
    >>> import argparse
    >>> p = argparse.ArgumentParser(); add_arguments(p)
    >>> run(p.parse_args(["--num-requests", "50", "--replicas", "2", "--no-progress"]))
    ... # doctest: +ELLIPSIS
    Simulation: 50 requests on 2 replicas (kv_cost routing, llama-3.1-8b on h100-80gb, tp=1)
      requests ...
    0
    """
    from inferasim.sim.roofline import RooflineCostModel

    if args.out is not None:
        _out_path(args.out)
    routing = _routing(args)
    wl = workload_from_args(args)
    cost = RooflineCostModel(args.model, args.gpu, tp=args.tp)
    sim = Simulator(
        replicas=args.replicas,
        routing=routing,
        cost_model=cost,
        kv_tokens=args.kv_tokens,
        engine=EngineConfig(
            max_num_seqs=args.max_num_seqs,
            max_batched_tokens=args.max_batched_tokens,
            chunked_prefill=not args.no_chunked_prefill,
        ),
        eviction=args.eviction,
        seed=args.routing_seed,
    )
    res = sim.run(wl, progress=not args.no_progress)
    title = (
        f"Simulation: {count_noun(len(wl), 'request')} on {count_noun(args.replicas, 'replica')} "
        f"({args.routing} routing, "
        f"{args.model} on {args.gpu}, tp={args.tp})"
    )
    summary = res.summary(args.slo_ttft_ms, args.slo_tpot_ms)
    summary.title = title
    print(repr(summary))  # (the metrics that apply to this run)
    reps = res.replicas[["requests", "token_hit_ratio", "busy_fraction", "evictions"]]
    print("\nper replica:")
    print(reps.to_string(float_format=lambda v: f"{v:.3f}"))
    if args.out is not None:
        path = Path(args.out)
        if path.suffix.lower() == ".csv":
            res.requests.to_csv(path)  # request_id (the index) first
        else:
            res.requests.to_parquet(path, index=True)
        print(f"\nwrote {len(res.requests):,} rows to {path}")
    return 0
