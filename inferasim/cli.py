"""The ``inferasim`` command: ``describe``, ``simulate`` and ``figures``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from importlib import import_module

from inferasim._format import format_summary
from inferasim.errors import TraceNotFoundError, WorkloadError
from inferasim.workload.loaders import add_workload_arguments, workload_from_args

__all__ = ["main"]

# Subcommands implemented elsewhere: module with add_arguments(parser) and run(args).
_EXTERNAL = {
    "simulate": ("inferasim.sim.command", "simulate a fleet of replicas and print the summary"),
    "figures": ("inferasim.figures", "regenerate every figure of the notebooks (PDF and PNG)"),
}


def _describe(args: argparse.Namespace) -> int:
    wl = workload_from_args(args)
    print(format_summary(wl.describe(), title=wl._header()))
    if not wl.has_hash_ids:
        print("\nno hash ids in this source: it carries no prefix-reuse information")
    return 0


def _traces(args: argparse.Namespace) -> int:
    """``inferasim traces``: each known trace, where it was found or where to put it."""
    from inferasim.workload.traces import list_traces, trace_dirs

    table = list_traces()
    for name, row in table.iterrows():
        aliases = f" (alias {row['aliases']})" if row["aliases"] else ""
        print(f"{name}{aliases}: {row['file']}, {row['requests']:,} requests")
        if row["found"]:
            print(f"  found: {row['found']} (verified: {row['verified']})")
        else:
            print(f"  not found; download: {row['url']}")
        print(f"  sha256: {row['sha256'] or 'not pinned (printed on download)'}")
    print("searched, in order (put missing files in any; $INFERASIM_TRACE_DIR first):")
    for d in trace_dirs():
        print(f"  {d}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``inferasim`` command.

    Examples
    --------
    >>> build_parser().parse_args(["describe", "conversation"]).source
    'conversation'
    """
    parser = argparse.ArgumentParser(
        prog="inferasim", description="What does prefix KV-cache reuse do to LLM serving?"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    describe = sub.add_parser("describe", help="print a workload's summary table")
    add_workload_arguments(describe)
    describe.set_defaults(func=_describe)
    sub.add_parser("traces", help="list the known traces and where each is").set_defaults(
        func=_traces
    )
    for name, (module, help_text) in _EXTERNAL.items():
        try:
            mod = import_module(module)
        except ImportError:
            continue
        p = sub.add_parser(name, help=help_text)
        mod.add_arguments(p)
        p.set_defaults(func=mod.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status.

    Examples
    --------
    >>> main(["describe", "--num-requests", "20"])  # doctest: +ELLIPSIS
    Workload from synthetic: 20 requests, block_size=512
      requests ...
    0
    """
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (WorkloadError, TraceNotFoundError, FileNotFoundError, ValueError) as exc:
        print(f"inferasim: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into `head` and the like: stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
