"""Numbers as people read them: summary Series, text tables and HTML cards.

One set of rules, keyed by the metric's name, formats every summary the
package shows (``Workload.describe()``, ``SimResult.summary()``, the reuse
results and the command line): counts and lengths as integers with
thousands separators, ratios to 4 decimals, other numbers to 4 significant
digits, never in scientific notation. The values themselves are never
rounded: :class:`Summary` is a plain float Series that only *displays*
rounded.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "CardRepr",
    "Summary",
    "card_html",
    "card_text",
    "format_metric",
    "format_summary",
    "format_value",
    "human_duration",
    "metric_rows",
    "metric_unit",
]

#: Metrics shown as yes/no.
_FLAGS = frozenset({"saturated"})
#: Metrics counted in whole things (requests, events).
_COUNTS = frozenset(
    {"requests", "finished", "rejected", "preemptions", "evictions", "nodes", "leaves",
     "root_children", "shared_nodes", "sessions", "turns"}
)


def format_value(value: object) -> str:
    """A number as people read it: thousands separators, 4 significant digits.

    Never scientific notation; NaN shows as ``-``.

    Examples
    --------
    >>> format_value(12031.0), format_value(0.366412), format_value(3536999.0), format_value(float("nan"))
    ('12,031', '0.3664', '3,536,999', '-')
    >>> format_value(0.0000123456), format_value(2.0), format_value("lru")
    ('0.00001235', '2', 'lru')
    """
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if not isinstance(value, (int, float, np.integer, np.floating)):
        return str(value)
    v = float(value)
    if math.isnan(v):
        return "-"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v.is_integer() and abs(v) >= 1:
        return f"{int(v):,}"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return np.format_float_positional(v, precision=4, unique=False, fractional=False, trim="-")


#: Spans of a whole run, shown in human units (``59 min``): ``describe()`` and
#: ``summary()`` both give ``duration_ms``.
_DURATIONS = {"duration_ms": 1e-3}


def count_noun(count: int, noun: str) -> str:
    """A count with its noun in the right number: ``1 replica``, ``8 replicas``, ``12,031 requests``.

    Examples
    --------
    >>> count_noun(1, "replica"), count_noun(8, "replica"), count_noun(12031, "request")
    ('1 replica', '8 replicas', '12,031 requests')
    """
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"


def human_duration(seconds: float) -> str:
    """A span of time in the unit people read it in: ``850 ms``, ``12.3 s``, ``59 min``, ``2.5 h``.

    Examples
    --------
    >>> [human_duration(s) for s in (0.85, 12.34, 3536.999, 1022.0, 9000.0, 0.0)]
    ['850 ms', '12.3 s', '59 min', '17 min', '2.5 h', '0 ms']
    """
    s = float(seconds)
    if not math.isfinite(s):
        return format_value(s)
    if abs(s) < 1:
        return f"{s * 1000:,.0f} ms"
    if abs(s) < 60:
        return f"{s:.1f} s"
    if abs(s) < 600:
        return f"{s / 60:.1f} min"
    if abs(s) < 2 * 3600:
        return f"{s / 60:,.0f} min"
    return f"{s / 3600:,.1f} h"


def _kind(name: str) -> str:
    """How the metric called ``name`` is shown: flag, ratio, rate, duration, integer or number."""
    if name in _FLAGS:
        return "flag"
    if name in _DURATIONS:
        return "duration"
    if name.endswith(("_ratio", "share", "attainment", "fraction")):
        return "ratio"
    if name.endswith(("_rps", "_tok_s", "_per_s")):
        return "rate"
    if name.startswith(("mean_", "zipf_")):
        return "number"
    if (
        name in _COUNTS
        or name.startswith(("input_", "output_", "blocks", "kv_blocks"))
        or name.endswith(("_blocks", "_tokens", "_bytes"))
        or name == "duration_ms"
    ):
        return "integer"
    return "number"


#: Units that the name alone would get wrong.
_UNITS = {"inconsistent_blocks": "requests", "max_requests_per_block": "requests"}


def metric_unit(name: str) -> str:
    """The unit of the metric called ``name``, from its name ('' for ratios and counts).

    Examples
    --------
    >>> metric_unit("ttft_ms_p99"), metric_unit("input_mean"), metric_unit("token_hit_ratio")
    ('ms', 'tokens', '')
    """
    if name in _UNITS:
        return _UNITS[name]
    kind = _kind(name)
    if kind in ("ratio", "flag", "duration") or name in _COUNTS:  # a duration carries its unit
        return ""
    if name.endswith("_rps"):
        return "req/s"
    if name.endswith("_tok_s"):
        return "tok/s"
    if "_ms" in name:
        return "ms"
    if name.endswith("_s"):
        return "s"
    if "blocks" in name:
        return "blocks"
    if "bytes" in name:
        return "bytes"
    if name.startswith(("input_", "output_")) or "tokens" in name:
        return "tokens"
    return ""


def format_metric(name: str, value: object) -> str:
    """``value`` formatted by the rule for the metric called ``name``.

    Examples
    --------
    >>> format_metric("input_mean", 12035.4), format_metric("token_hit_ratio", 0.5)
    ('12,035', '0.5000')
    >>> format_metric("saturated", 0.0), format_metric("offered_rate_rps", 3.3421)
    ('no', '3.342')
    >>> format_metric("duration_ms", 3_536_999.0), format_metric("duration_ms", 59_000.0)
    ('59 min', '59.0 s')
    """
    if not isinstance(value, (int, float, bool, np.integer, np.floating, np.bool_)):
        return str(value)
    v = float(value)
    if math.isnan(v):
        return "-"
    kind = _kind(name)
    if kind == "flag":
        return "yes" if v else "no"
    if kind == "duration":
        return human_duration(v * _DURATIONS[name])
    if kind == "ratio" and math.isfinite(v):
        return f"{v:.4f}"
    if kind == "integer" and math.isfinite(v):
        return f"{round(v):,}"
    return format_value(v)


def format_summary(summary: pd.Series, title: str | None = None, notes: Iterable[str] = ()) -> str:
    """A labelled Series as a text table: name, value, unit; then notes.

    Examples
    --------
    >>> print(format_summary(pd.Series({"requests": 2.0, "hit_ratio": 0.25, "ttft_ms_p50": 6.6}),
    ...                      title="demo", notes=["no SLO given"]))
    demo
      requests        2
      hit_ratio  0.2500
      ttft_ms_p50   6.6  ms
    no SLO given
    """
    keys = [str(k) for k in summary.index]
    values = [format_metric(k, v) for k, v in zip(keys, summary.tolist(), strict=True)]
    units = [metric_unit(k) for k in keys]
    kw = max((len(k) for k in keys), default=0)
    vw = max((len(v) for v in values), default=0)
    lines = [title] if title else []
    for k, v, u in zip(keys, values, units, strict=True):
        lines.append(f"  {k:<{kw}}  {v:>{vw}}" + (f"  {u}" if u else ""))
    lines += list(notes)
    return "\n".join(lines)


class Summary(pd.Series):
    """A float Series of named metrics that displays rounded values.

    Indexing, arithmetic and ``to_dict()`` see the full-precision floats
    (results of operations are plain Series); ``repr`` and the notebook view
    format each value by its metric name (:func:`format_metric`) with its
    unit, under ``title`` and above ``notes``.

    Examples
    --------
    >>> s = Summary({"requests": 3.0, "token_hit_ratio": 1 / 3}, title="demo")
    >>> s
    demo
      requests              3
      token_hit_ratio  0.3333
    >>> float(s["token_hit_ratio"] * 3)
    1.0
    """

    _metadata = ["title", "notes", "inapplicable"]

    def __init__(
        self,
        data: Any = None,
        *args: Any,
        title: str | None = None,
        notes: Iterable[str] = (),
        inapplicable: Iterable[str] = (),
        **kwargs: Any,
    ) -> None:
        if not args and "dtype" not in kwargs and isinstance(data, dict):
            kwargs["dtype"] = np.float64
        super().__init__(data, *args, **kwargs)
        self.title = title
        self.notes = tuple(notes)
        # metrics that do not apply to what was measured (NaN): not displayed
        self.inapplicable = frozenset(inapplicable)

    @property
    def _constructor(self) -> type[pd.Series]:  # derived results are plain Series
        return pd.Series

    @property
    def _constructor_expanddim(self) -> type[pd.DataFrame]:
        return pd.DataFrame

    def __repr__(self) -> str:
        return format_summary(self._shown(), title=getattr(self, "title", None), notes=self._notes())

    def _shown(self) -> pd.Series:
        """The rows to display: every metric that applies to the run."""
        hidden = getattr(self, "inapplicable", frozenset())
        if not hidden:
            return self
        return pd.Series(self.to_numpy(), index=self.index)[[k not in hidden for k in self.index]]

    def _notes(self) -> tuple[str, ...]:
        notes = tuple(getattr(self, "notes", ()) or ())
        hidden = getattr(self, "inapplicable", frozenset())
        if hidden:
            notes += (f"{len(hidden)} metrics that do not apply here are NaN and not shown",)
        return notes

    def _repr_html_(self) -> str:
        shown = self._shown()
        keys = [str(k) for k in shown.index]
        rows = [(k, format_metric(k, v), metric_unit(k)) for k, v in zip(keys, shown.tolist(), strict=True)]
        return card_html(getattr(self, "title", None) or "summary", rows, notes=self._notes())


_CSS = (
    "<style>.ism-card{font-family:var(--jp-code-font-family,monospace);font-size:12px}"
    ".ism-card table{border-collapse:collapse}.ism-card td{padding:1px 8px;text-align:left}"
    ".ism-card td.v{text-align:right}.ism-card .u{color:#777}"
    ".ism-card .h{font-weight:bold;margin-bottom:4px}.ism-card .n{color:#777;margin-top:4px}</style>"
)


def card_html(
    title: str,
    rows: Iterable[tuple[str, str, str]],
    *,
    notes: Iterable[str] = (),
    extra_html: str = "",
) -> str:
    """An HTML card: a bold header line, then (name, value, unit) rows, then notes.

    Examples
    --------
    >>> "<b>" in card_html("demo", [("requests", "2", "")]) or "ism-card" in card_html("d", [])
    True
    """
    esc = html.escape
    body = "".join(
        f"<tr><td>{esc(k)}</td><td class='v'>{esc(v)}</td><td class='u'>{esc(u)}</td></tr>"
        for k, v, u in rows
    )
    foot = "".join(f"<div class='n'>{esc(n)}</div>" for n in notes)
    return (
        f"{_CSS}<div class='ism-card'><div class='h'>{esc(title)}</div>"
        f"<table>{body}</table>{foot}{extra_html}</div>"
    )


def card_text(title: str, rows: Iterable[tuple[str, str, str]], notes: Iterable[str] = ()) -> str:
    """The text twin of :func:`card_html`.

    Examples
    --------
    >>> print(card_text("demo", [("requests", "2", ""), ("ttft", "6.6", "ms")]))
    demo
      requests    2
      ttft      6.6  ms
    """
    rows = list(rows)
    kw = max((len(k) for k, _, _ in rows), default=0)
    vw = max((len(v) for _, v, _ in rows), default=0)
    lines = [title]
    lines += [f"  {k:<{kw}}  {v:>{vw}}" + (f"  {u}" if u else "") for k, v, u in rows]
    lines += list(notes)
    return "\n".join(lines)


class CardRepr:
    """Mixin: a compact text ``repr`` and a notebook card from ``_card()``.

    Subclasses define ``_card() -> (title, rows, notes)`` with rows of
    ``(name, value, unit)`` strings (dataclasses need ``repr=False``).
    """

    def _card(self) -> tuple[str, list[tuple[str, str, str]], list[str]]:
        raise NotImplementedError

    def __repr__(self) -> str:
        title, rows, notes = self._card()
        return card_text(title, rows, notes)

    def _repr_html_(self) -> str:
        title, rows, notes = self._card()
        return card_html(title, rows, notes=notes)


def metric_rows(values: dict[str, Any]) -> list[tuple[str, str, str]]:
    """``(name, formatted value, unit)`` rows of named metrics.

    Examples
    --------
    >>> metric_rows({"token_hit_ratio": 0.25, "hit_tokens": 512})
    [('token_hit_ratio', '0.2500', ''), ('hit_tokens', '512', 'tokens')]
    """
    return [(k, format_metric(k, v), metric_unit(k)) for k, v in values.items()]
