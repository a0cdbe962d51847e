"""Readable text tables for summaries printed by the command line."""

from __future__ import annotations

import math

import pandas as pd

__all__ = ["format_value", "format_summary"]


def format_value(value: object) -> str:
    """A number as people read it: thousands separators, 4 significant digits.

    Examples
    --------
    >>> format_value(12031.0), format_value(0.366412), format_value(3536999.0), format_value(float("nan"))
    ('12,031', '0.3664', '3,536,999', '-')
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, float) and math.isnan(value):
        return "-"
    if float(value).is_integer() and abs(value) >= 1:
        return f"{int(value):,}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.4g}"


def format_summary(summary: pd.Series, title: str | None = None) -> str:
    """A labelled Series as a two-column text table.

    Examples
    --------
    >>> print(format_summary(pd.Series({"requests": 2.0, "hit_ratio": 0.25}), title="demo"))
    demo
      requests   2
      hit_ratio  0.25
    """
    width = max(len(str(k)) for k in summary.index)
    lines = [title] if title else []
    lines += [f"  {str(k):<{width}}  {format_value(v)}" for k, v in summary.items()]
    return "\n".join(lines)
