"""Argument types of the ``inferasim`` options: a bad value is a usage error.

argparse calls these on the option's text; an :class:`argparse.ArgumentTypeError`
becomes ``inferasim <command>: error: argument --replicas: must be an
integer >= 1, got -2`` with exit status 2, before any work starts. The
bounds are the library's own (``Simulator``, ``Workload.from_synthetic``);
the library still checks them for Python callers.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

__all__ = ["integer", "number"]


def integer(low: int = 0) -> Callable[[str], int]:
    """An argparse type: an integer ``>= low``.

    Examples
    --------
    >>> integer(1)("4")
    4
    >>> integer(1)("-2")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be an integer >= 1, got '-2'
    >>> integer(0)("2.5")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be an integer >= 0, got '2.5'
    """

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < low:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {text!r}")
        return value

    parse.__name__ = "integer"  # argparse names the type in its own messages
    return parse


def number(
    low: float = 0.0, *, strict: bool = True, below: float | None = None
) -> Callable[[str], float]:
    """An argparse type: a finite number ``> low`` (``>= low`` when not ``strict``), ``< below``.

    Examples
    --------
    >>> number(0.0)("2.5")
    2.5
    >>> number(0.0)("0")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be a finite number > 0, got '0'
    >>> number(0.0, strict=False, below=1.0)("1")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be a finite number >= 0 and < 1, got '1'
    """
    bound = f"{'>' if strict else '>='} {low:g}" + ("" if below is None else f" and < {below:g}")

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        ok = math.isfinite(value) and (value > low if strict else value >= low)
        if not ok or (below is not None and value >= below):
            raise argparse.ArgumentTypeError(f"must be a finite number {bound}, got {text!r}")
        return value

    parse.__name__ = "number"
    return parse
