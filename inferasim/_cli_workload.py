"""The workload options every ``inferasim`` subcommand shares.

A workload comes from exactly one of two places, and the options say which:

* ``SOURCE`` (or ``--trace SOURCE``): a FAST'25 trace name
  (``conversation``, ``synthetic``, ``toolagent``: ``synthetic`` is the
  *published* trace of that name) or a CSV/JSON/JSON-lines file;
* ``--generate`` (the default when no ``SOURCE`` is given): a seeded workload
  generated here, shaped by the ``--num-requests``, ``--rate``, ... options
  (:data:`inferasim.workload.loaders.DEFAULT_SYNTHETIC`). It is labelled
  ``generator (seed N)``, never ``synthetic``.

Giving a shaping option together with a ``SOURCE`` is a usage error, so
``--trace synthetic --rate 4`` can no longer be read as "a synthetic
workload at 4 req/s".
"""

from __future__ import annotations

import argparse
from typing import Any

from inferasim._cli_types import integer, number
from inferasim.workload import Workload
from inferasim.workload.loaders import DEFAULT_SYNTHETIC, load_workload

__all__ = [
    "GENERATOR_HELP",
    "add_workload_arguments",
    "check_workload_arguments",
    "workload_from_args",
]

#: Help text of each generator option (the default is appended by the CLI's formatter).
GENERATOR_HELP: dict[str, str] = {
    "num_requests": "requests to generate",
    "rate": "mean arrival rate (requests/s)",
    "arrival": "arrival process",
    "burstiness": "gamma shape of inter-arrival times (<1 burstier than Poisson)",
    "input_len": "mean prompt length (tokens)",
    "output_len": "mean output length (tokens)",
    "range_ratio": "lengths drawn uniformly in mean * [1 - r, 1 + r]",
    "num_prefixes": "shared prefixes (system prompts) in the pool; 0: no shared prefix",
    "prefix_len": "length of each shared prefix (tokens)",
    "prefix_zipf": "Zipf exponent of prefix popularity (0: uniform)",
    "seed": "random seed",
}

#: The argparse type of each generator option: its value's bounds (those of
#: ``Workload.from_synthetic``), so a bad value is a usage error naming the flag.
GENERATOR_TYPES: dict[str, Any] = {
    "num_requests": integer(0),
    "rate": number(0.0),
    "burstiness": number(0.0),
    "input_len": integer(1),
    "output_len": integer(1),
    "range_ratio": number(0.0, strict=False, below=1.0),
    "num_prefixes": integer(0),
    "prefix_len": integer(0),
    "prefix_zipf": number(0.0, strict=False),
    "seed": integer(0),
}

_SOURCE_HELP = (
    "a FAST'25 trace name: conversation, synthetic or toolagent ('synthetic' is the "
    "published trace, not a generated workload), or a CSV/JSON/JSONL file (.gz too); "
    "without it a workload is generated (see --generate)"
)


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_workload_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the workload-source options: ``SOURCE``/``--trace`` or the generator group.

    Examples
    --------
    >>> p = argparse.ArgumentParser()
    >>> add_workload_arguments(p)
    >>> a = p.parse_args(["--trace", "synthetic"])
    >>> a.trace, a.rate
    ('synthetic', None)
    """
    parser.add_argument("source", nargs="?", metavar="SOURCE", help=_SOURCE_HELP)
    parser.add_argument("--trace", metavar="SOURCE", default=None, help="same as SOURCE")
    parser.add_argument(
        "--time-scale",
        type=number(0.0),
        default=1.0,
        help="multiply arrival times by this factor (<1 compresses the trace: more load)",
    )
    group = parser.add_argument_group(
        "generated workload",
        "--generate, the default when no SOURCE is given: a seeded workload generated "
        "on the spot from the options below. It is not the FAST'25 'synthetic' trace, "
        "and these options cannot be combined with SOURCE.",
    )
    group.add_argument(
        "--generate",
        action="store_true",
        help="generate the workload (the default without SOURCE; an error with one)",
    )
    for name, value in DEFAULT_SYNTHETIC.items():
        kwargs: dict[str, Any] = {"default": None, "help": f"{GENERATOR_HELP[name]} (default: {value})"}
        if name == "arrival":
            kwargs["choices"] = ("poisson", "deterministic", "gamma")
        else:
            kwargs["type"] = GENERATOR_TYPES[name]
            kwargs["metavar"] = type(value).__name__.upper()
        group.add_argument(_flag(name), **kwargs)


def check_workload_arguments(args: argparse.Namespace) -> str | None:
    """The usage error in the workload options, or None when they make sense.

    Examples
    --------
    >>> p = argparse.ArgumentParser()
    >>> add_workload_arguments(p)
    >>> check_workload_arguments(p.parse_args(["synthetic", "--rate", "4"]))  # doctest: +ELLIPSIS
    "--rate shapes a generated workload; it cannot apply to the trace or file 'synthetic' ..."
    >>> check_workload_arguments(p.parse_args(["--rate", "4"])) is None
    True
    """
    if args.source is not None and args.trace is not None:
        return f"give the source once: SOURCE {args.source!r} or --trace {args.trace!r}"
    source = args.trace if args.trace is not None else args.source
    if source is None:
        return None
    if args.generate:
        return f"--generate makes a workload; it cannot be combined with the source {source!r}"
    given = [_flag(n) for n in DEFAULT_SYNTHETIC if getattr(args, n, None) is not None]
    if given:
        return (
            f"{', '.join(given)} {'shapes' if len(given) == 1 else 'shape'} a generated workload; "
            f"it cannot apply to the trace or file {source!r} (drop {given[0]} or the source)"
        )
    return None


def workload_from_args(args: argparse.Namespace) -> Workload:
    """Build the workload the parsed options describe.

    Examples
    --------
    >>> p = argparse.ArgumentParser()
    >>> add_workload_arguments(p)
    >>> wl = workload_from_args(p.parse_args(["--num-requests", "10"]))
    >>> len(wl), wl.source
    (10, 'generator (seed 0)')
    """
    problem = check_workload_arguments(args)
    if problem is not None:
        raise ValueError(problem)
    source = args.trace if args.trace is not None else args.source
    if source is None:
        params = {
            name: (default if getattr(args, name, None) is None else getattr(args, name))
            for name, default in DEFAULT_SYNTHETIC.items()
        }
        generated = load_workload(**params)
        wl = Workload(
            generated.frame,
            generated.hash_ids,
            generated.offsets,
            block_size=generated.block_size,
            has_hash_ids=generated.has_hash_ids,
            source=f"generator (seed {params['seed']})",
        )
    else:
        wl = load_workload(source)
    if args.time_scale != 1.0:
        wl = wl.scale_time(args.time_scale)
    return wl
