"""The ``inferasim`` command: ``describe``, ``simulate`` and ``figures``.

Errors are one line on stderr: ``inferasim <command>: error: ...`` with exit
status 2 for a usage error (bad or conflicting options), ``inferasim: error:
...`` with exit status 1 when the work itself fails (a missing or corrupt
file, an invalid setting). ``--debug`` shows the traceback instead.

A subcommand implemented elsewhere is a module with ``add_arguments(parser)``
and ``run(args) -> int``, listed in ``_EXTERNAL``.

Ctrl-C at any moment (also while the first imports run, which take most of
a second) ends the command with one line, ``inferasim: interrupted``, and
exit status 130: the entry point (:mod:`inferasim._entry`) handles SIGINT
from its first instruction until the imports are done
(:mod:`inferasim._interrupt`), then :func:`main` catches the
KeyboardInterrupt around the work. This module imports nothing
heavy at its top.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
import warnings
from collections.abc import Sequence
from importlib import import_module

__all__ = ["build_parser", "main"]

# Subcommands implemented elsewhere: module with add_arguments(parser) and run(args).
_EXTERNAL = {
    "simulate": ("inferasim.sim.command", "simulate a fleet of replicas and print the summary"),
    "figures": ("inferasim.figures", "regenerate every figure of the notebooks (PDF and PNG)"),
}


class _HelpFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default (unless it already names one)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if (
            "default" not in text
            and not any(action.default is v for v in (None, False, argparse.SUPPRESS))
            and (action.option_strings or action.nargs in (argparse.OPTIONAL, argparse.ZERO_OR_MORE))
        ):
            text += " (default: %(default)s)"
        return text


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line on stderr, exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


_DEBUG_HELP = "show the full traceback when the command fails"


def _add_debug(parser: argparse.ArgumentParser) -> None:
    """``--debug`` after the subcommand too (``inferasim simulate --debug``)."""
    parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=_DEBUG_HELP)


def _version() -> str:
    from inferasim import __version__

    return __version__


def _describe(args: argparse.Namespace) -> int:
    from inferasim._cli_workload import workload_from_args
    from inferasim._format import format_summary

    wl = workload_from_args(args)
    d = wl.describe()
    notes = [] if wl.has_hash_ids else ["no hash ids in this source: it carries no prefix-reuse information"]
    print(format_summary(d, title=wl._header(), notes=[*d.notes, *notes]))
    return 0


def _traces(args: argparse.Namespace) -> int:
    """``inferasim traces``: each known trace, where it was found or where to put it."""
    import pandas as pd

    from inferasim.workload.traces import list_traces, trace_dirs

    table = list_traces()
    for name, row in table.iterrows():
        aliases = f" (alias {row['aliases']})" if row["aliases"] else ""
        count = "unknown number of" if pd.isna(row["requests"]) else f"{int(row['requests']):,}"
        print(f"{name}{aliases}: {row['file']}, {count} requests")
        if row["found"]:
            print(f"  found: {row['found']} (verified: {row['verified']})")
        else:
            print(f"  not found; download: {row['url']}")
        print(f"  sha256: {row['sha256'] or 'not pinned (printed on download)'}")
    print("searched, in order (put missing files in any; $INFERASIM_TRACE_DIR first):")
    for d in trace_dirs():
        print(f"  {d}")
    return 0


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser of the ``inferasim`` command.

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments about to be parsed. When given, only the subcommand
        they name loads its module (``inferasim describe`` never imports
        matplotlib for ``figures``); the others are listed with their help
        line. By default every subcommand is complete.

    Examples
    --------
    >>> build_parser().parse_args(["describe", "conversation"]).source
    'conversation'
    """
    from inferasim._cli_workload import add_workload_arguments

    wanted = None if argv is None else {a for a in argv if not a.startswith("-")}
    parser = _Parser(
        prog="inferasim",
        description="What does prefix KV-cache reuse do to LLM serving?",
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"inferasim {_version()}")
    parser.add_argument("--debug", action="store_true", help=_DEBUG_HELP)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    describe = sub.add_parser(
        "describe",
        help="print a workload's summary table",
        description="Print a workload's summary: sizes, lengths and the reuse ceiling.",
        formatter_class=_HelpFormatter,
    )
    add_workload_arguments(describe)
    _add_debug(describe)
    describe.set_defaults(func=_describe, parser=describe)
    traces = sub.add_parser(
        "traces",
        help="list the known traces and where each is",
        description="List the known traces: where each was found, or where to put it.",
        formatter_class=_HelpFormatter,
    )
    _add_debug(traces)
    traces.set_defaults(func=_traces, parser=traces)
    for name, (module, help_text) in _EXTERNAL.items():
        if wanted is not None and name not in wanted:
            sub.add_parser(name, help=help_text)  # listed; loaded when it is the command
            continue
        try:
            mod = import_module(module)
        except ImportError:  # pragma: no cover - a subcommand whose module is gone
            continue
        p = sub.add_parser(
            name,
            help=help_text,
            description=help_text[0].upper() + help_text[1:] + ".",
            formatter_class=_HelpFormatter,
        )
        mod.add_arguments(p)
        _add_debug(p)
        p.set_defaults(func=mod.run, parser=p)
    return parser


def _one_line(exc: BaseException) -> str:
    """The exception's message on one line (its lines joined by '; ')."""
    text = str(exc) or type(exc).__name__
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


def _show_warning(message: Warning | str, category: type[Warning], *_: object, **__: object) -> None:
    """A warning during a command: one line on stderr, no source file or code line.

    Examples
    --------
    >>> import contextlib, io
    >>> err = io.StringIO()
    >>> with contextlib.redirect_stderr(err):
    ...     _show_warning(UserWarning("x.csv: no output_len column"), UserWarning, "f.py", 3)
    >>> err.getvalue()
    'inferasim: warning: x.csv: no output_len column\\n'
    """
    print(f"inferasim: warning: {_one_line(message)}", file=sys.stderr)  # type: ignore[arg-type]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 error, 2 usage, 130 Ctrl-C).

    Examples
    --------
    >>> main(["describe", "--num-requests", "20"])  # doctest: +ELLIPSIS
    Workload from generator (seed 0): 20 requests, block_size=512
      requests ...
    0
    """
    try:  # the first instruction: Ctrl-C while the imports below run is one line too
        return _main(argv)
    except KeyboardInterrupt:
        return _interrupted()


def _interrupted() -> int:
    try:
        print("inferasim: interrupted", file=sys.stderr)
    except (KeyboardInterrupt, OSError):  # a second Ctrl-C, or stderr closed
        pass
    return 130


def _main(argv: Sequence[str] | None) -> int:
    from inferasim._cli_workload import check_workload_arguments
    from inferasim._interrupt import work_begins

    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # --help, --version and usage errors
        return int(stop.code or 0) if not isinstance(stop.code, str) else 2
    if hasattr(args, "source") and hasattr(args, "generate"):
        problem = check_workload_arguments(args)
        if problem is not None:
            try:
                args.parser.error(problem)
            except SystemExit as stop:
                return int(stop.code or 2)
    work_begins()  # from here on Ctrl-C is a KeyboardInterrupt (caught by main)
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            return int(args.func(args) or 0)
    except BrokenPipeError:  # output piped into `head` and the like: stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        if args.debug:
            traceback.print_exc()
        else:
            # Expected failures speak for themselves; anything else names its type.
            plain = isinstance(exc, (ValueError, OSError, LookupError))
            kind = "" if plain else f"{type(exc).__module__}.{type(exc).__qualname__}: "
            print(f"inferasim: error: {kind}{_one_line(exc)}", file=sys.stderr)
        return 1
