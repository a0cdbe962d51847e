"""The headline numbers of the figures, and the tables of ``figures/README.md`` built from them.

:func:`headline_numbers` reads the numbers every figure's README entry
quotes off the same studies the figures are drawn from (a
:class:`inferasim.figures.FigureData`, so nothing is computed twice);
:func:`readme_blocks` writes them as the README's tables and sentences, and
:func:`update_readme` puts those between the README's
``<!-- headline:NAME -->`` and ``<!-- /headline:NAME -->`` markers. Nothing in
those blocks is typed by hand.

``figures/headline.json`` keeps the numbers of the committed figures; the
test ``tests/test_headline.py`` recomputes them and fails when the code
gives other numbers (values, not bytes). After a deliberate change,
re-record the JSON and the README in one step::

    python -m inferasim figures --headline figures/headline.json

(``inferasim figures --out figures/`` does the same after drawing every
figure.)
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from inferasim import studies
from inferasim.studies import settings

__all__ = [
    "RECORD_COMMAND",
    "headline_numbers",
    "readme_blocks",
    "update_readme",
    "write_headline",
    "compare_numbers",
    "readme_is_current",
]

#: The one command that re-records ``figures/headline.json`` and the README's tables.
RECORD_COMMAND = "python -m inferasim figures --headline figures/headline.json"

#: Studies the headline numbers read (all computed by ``inferasim figures`` too).
HEADLINE_STUDIES: tuple[str, ...] = (
    "overview", "requests", "reuse_distances", "block_popularity", "hit_rates",
    "local_vs_pooled", "routing", "sizing",
)


def _f(value: Any) -> float:
    return float(value)


def _trace_numbers(data: Any) -> dict[str, Any]:
    """Per trace: lengths, arrivals, popularity, reuse distances, sessions."""
    ov = data.get("overview").set_index("trace")
    req = data.get("requests")
    pop = data.get("block_popularity")
    dist = data.get("reuse_distances")
    structure = studies.structure_stats(data.workloads).set_index(["trace", "statistic"])["value"]
    out: dict[str, Any] = {}
    for trace in ov.index:
        r = req[req["trace"] == trace]
        bins = (r["arrival_ms"] // 60_000).astype(np.int64)
        tok_s = r.groupby(bins)["input_len"].sum() / 60.0
        full = tok_s.iloc[:-1] if len(tok_s) > 1 else tok_s  # the last bin is partial
        p = pop[pop["trace"] == trace]
        d = dist[dist["trace"] == trace]["stack_distance_tokens"].to_numpy(dtype=float)
        repeat = np.isfinite(d)
        st = structure[trace]
        out[trace] = {
            "requests": int(ov.loc[trace, "requests"]),
            "duration_min": _f(ov.loc[trace, "duration_min"]),
            "rate_rps": _f(ov.loc[trace, "rate_rps"]),
            "prompt_median": _f(r["input_len"].median()),
            "prompt_p99": _f(r["input_len"].quantile(0.99)),
            "prompt_under_one_block": _f((r["input_len"] < 512).mean()),
            "prompt_tok_s_first_min": _f(full.iloc[0]),
            "prompt_tok_s_last_full_min": _f(full.iloc[-1]),
            "prompt_tok_s_min": _f(full.min()),
            "prompt_tok_s_max": _f(full.max()),
            "top_block_requests": int(p["requests"].max()),
            "blocks_used_once": _f((p["requests"] == 1).mean()),
            "references_repeating": _f(repeat.mean()),
            "repeats_within_3m": _f((d[repeat] <= settings.NODE_CACHE_TOKENS).mean()),
            "ceiling_token_hit_ratio": _f(ov.loc[trace, "ceiling_token_hit_ratio"]),
            "multi_turn_sessions": int(st["multi-turn sessions"]),
            "mean_turns": _f(st["mean turns per multi-turn session"]),
            "requests_in_multi_turn": _f(st["requests in multi-turn sessions"]),
            "median_gap_s": _f(st["median gap between turns (s)"]),
        }
    return out


def _latency_numbers(requests: pd.DataFrame) -> dict[str, Any]:
    """Hit ratio (routed requests), latency percentiles (finished requests), rejections."""
    fin = requests[requests["status"] == "finished"]
    routed = requests[requests["replica"] >= 0]
    return {
        "requests": len(requests),
        "rejected": int((requests["status"] == "rejected").sum()),
        "token_hit_ratio": _f(routed["cached_tokens"].sum() / routed["input_len"].sum()),
        "ttft_p50_ms": _f(fin["ttft_ms"].quantile(0.5)),
        "ttft_p99_ms": _f(fin["ttft_ms"].quantile(0.99)),
        "tpot_p50_ms": _f(fin["tpot_ms"].quantile(0.5)),
        "tpot_p99_ms": _f(fin["tpot_ms"].quantile(0.99)),
    }


def headline_numbers(data: Any) -> dict[str, Any]:
    """Every number ``figures/README.md`` quotes, from the figures' own studies.

    Parameters
    ----------
    data : inferasim.figures.FigureData
        The traces and studies (computed on first use, kept for the figures).

    Returns
    -------
    dict
        JSON-ready: ``traces`` (per trace), ``hit_rate_at_3m`` (per trace and
        policy, with the ceiling), ``sizing`` (the sizing simulation),
        ``local_vs_pooled``, ``routing`` (per trace and policy),
        ``teaching`` (per experiment and knob value) and ``settings`` (the
        fleets and runs they come from).

    Examples
    --------
    >>> from inferasim import Workload
    >>> from inferasim.figures import FigureData
    >>> wl = Workload.from_synthetic(60, 5.0, input_len=512, output_len=4, num_prefixes=4,
    ...                              prefix_len=1024, seed=0)
    >>> numbers = headline_numbers(FigureData(workloads={"conversation": wl, "synthetic": wl},
    ...                                       quick=True))
    >>> numbers["traces"]["conversation"]["requests"], numbers["sizing"]["rejected"]
    (60, 0)
    >>> numbers = headline_numbers(FigureData())  # the committed record  # doctest: +SKIP
    >>> round(numbers["hit_rate_at_3m"]["conversation"]["lru"], 3)  # doctest: +SKIP
    0.139
    """
    at = studies.at_capacity(
        data.get("hit_rates"), settings.NODE_CACHE_TOKENS, data.get("overview")
    )
    hit = {
        trace: {
            "ceiling": _f(rows["ceiling_token_hit_ratio"].iloc[0]),
            **{p: _f(v) for p, v in zip(rows["policy"], rows["token_hit_ratio"], strict=True)},
        }
        for trace, rows in at.groupby("trace", sort=False)
    }
    lvp = data.get("local_vs_pooled")
    local_vs_pooled = {
        trace: {
            "pooled": _f(rows.loc[rows["cache"] == "pooled", "token_hit_ratio"].iloc[0]),
            "ceiling": _f(rows["ceiling_token_hit_ratio"].iloc[0]),
            **{
                p: _f(v)
                for p, v in zip(
                    rows.loc[rows["cache"] == "local", "placement"],
                    rows.loc[rows["cache"] == "local", "token_hit_ratio"],
                    strict=True,
                )
            },
        }
        for trace, rows in lvp.groupby("trace", sort=False)
    }
    routing: dict[str, Any] = {}
    for row in studies.routing_summary(data.get("routing")).itertuples(index=False):
        routing.setdefault(row.trace, {})[row.routing] = {
            "requests": int(row.requests),
            "rejected": int(row.rejected),
            "ttft_p50_ms": _f(row.ttft_p50_ms),
            "ttft_p99_ms": _f(row.ttft_p99_ms),
            "token_hit_ratio": _f(row.token_hit_ratio),
            "busiest_share": _f(row.busiest_share),
        }
    teaching = {}
    for name in studies.TEACHING:
        table = data.get(f"teaching:{name}")
        teaching[name] = {
            _key(v): {
                "token_hit_ratio": _f(h),
                "infinite_token_hit_ratio": _f(c),
                "ttft_p50_ms": _f(p50),
                "ttft_p99_ms": _f(p99),
            }
            for v, h, c, p50, p99 in zip(
                table["value"], table["token_hit_ratio"], table["infinite_token_hit_ratio"],
                table["ttft_p50_ms"], table["ttft_p99_ms"], strict=True,
            )
        }
    base = studies.TEACHING_BASE
    return {
        "settings": {
            "quick": bool(data.quick),
            "node_cache_tokens": settings.NODE_CACHE_TOKENS,
            "sizing": {k: v for k, v in settings.SIZING_DEFAULTS.items() if k != "trace"},
            "teaching": {
                "num_requests": base["num_requests"] // (2 if data.quick else 1),
                "rate_rps": base["rate"],
                "num_prefixes": base["num_prefixes"],
                "prefix_len": base["prefix_len"],
                "prefix_zipf": base["prefix_zipf"],
                "input_len": base["input_len"],
                "burstiness": base["burstiness"],
                "kv_blocks": studies.TEACHING_KV_BLOCKS,
                "mean_prompt_tokens": _f(studies.teaching_workload().input_len.mean()),
            },
        },
        "traces": _trace_numbers(data),
        "hit_rate_at_3m": hit,
        "sizing": _latency_numbers(data.get("sizing")),
        "local_vs_pooled": local_vs_pooled,
        "routing": routing,
        "teaching": teaching,
    }


@functools.lru_cache(maxsize=1)
def _example_numbers(figure_data: Any) -> dict[str, Any]:
    """Headline numbers of a tiny workload standing in for both traces (the examples' input).

    ``figure_data`` is :class:`inferasim.figures.FigureData` (passed in: that
    module imports this one).
    """
    from inferasim.workload import Workload

    wl = Workload.from_synthetic(
        60, 5.0, input_len=512, output_len=4, num_prefixes=4, prefix_len=1024, seed=0
    )
    return headline_numbers(
        figure_data(workloads={"conversation": wl, "synthetic": wl}, quick=True)
    )


def _key(value: Any) -> str:
    """A knob value as a JSON key: ``0.5``, ``2``, ``1024``."""
    v = float(value)
    return str(int(v)) if v.is_integer() else repr(v)


# ------------------------------------------------------------------ comparing
def compare_numbers(
    recorded: Any, computed: Any, *, rtol: float = 1e-6, path: str = ""
) -> list[str]:
    """Where two headline records differ (keys, or numbers beyond ``rtol``), one line each.

    Examples
    --------
    >>> compare_numbers({"a": {"b": 1.0, "c": 2}}, {"a": {"b": 1.0 + 1e-12, "c": 3}})
    ['a.c: recorded 2, computed 3']
    >>> compare_numbers({"a": 1}, {"b": 1})
    ['a: recorded 1, computed (missing)', 'b: recorded (missing), computed 1']
    """
    if isinstance(recorded, Mapping) and isinstance(computed, Mapping):
        out = []
        for key in [*recorded, *(k for k in computed if k not in recorded)]:
            where = f"{path}.{key}" if path else str(key)
            if key not in computed:
                out.append(f"{where}: recorded {recorded[key]!r}, computed (missing)")
            elif key not in recorded:
                out.append(f"{where}: recorded (missing), computed {computed[key]!r}")
            else:
                out += compare_numbers(recorded[key], computed[key], rtol=rtol, path=where)
        return out
    if isinstance(recorded, (int, float)) and isinstance(computed, (int, float)) and not (
        isinstance(recorded, bool) or isinstance(computed, bool)
    ):
        a, b = float(recorded), float(computed)
        if math.isclose(a, b, rel_tol=rtol, abs_tol=1e-12) or (math.isnan(a) and math.isnan(b)):
            return []
    elif recorded == computed:
        return []
    return [f"{path}: recorded {recorded!r}, computed {computed!r}"]


# ------------------------------------------------------------------ README
def _pct(v: float, digits: int = 1) -> str:
    return f"{100 * v:.{digits}f}%"


def _ms(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:,.1f}"


def _tokens(v: float) -> str:
    from inferasim.style import tokens_text

    return tokens_text(v)


def _label(name: str) -> str:
    from inferasim.style import label

    return label(name)


def readme_blocks(numbers: Mapping[str, Any]) -> dict[str, str]:
    """The generated blocks of ``figures/README.md``, by marker name, from :func:`headline_numbers`.

    Examples
    --------
    >>> from inferasim.figures import FigureData
    >>> blocks = readme_blocks(_example_numbers(FigureData))
    >>> sorted(blocks)
    ['notebook01', 'notebook01_hit_rates', 'notebook02', 'notebook03', 'notebook04']
    >>> blocks["notebook01"].splitlines()[0]
    '| file | what it shows |'
    """
    tr, hit = numbers["traces"], numbers["hit_rate_at_3m"]
    c, s = tr["conversation"], tr["synthetic"]
    blocks: dict[str, str] = {}
    blocks["notebook01"] = "\n".join([
        "| file | what it shows |",
        "|---|---|",
        "| `trace_lengths` | ECDFs of prompt and output lengths (tokens, log x) per trace. "
        f"Conversation prompts: median {c['prompt_median']:,.0f}, p99 {c['prompt_p99']:,.0f} "
        f"tokens; synthetic: median {s['prompt_median']:,.0f}, "
        f"{_pct(s['prompt_under_one_block'], 0)} under one 512-token block. |",
        "| `trace_arrivals` | Arrival rate (requests/s) and prompt-token rate (tokens/s) in 60 s "
        f"bins. Conversation: {c['duration_min']:.0f} min at {c['rate_rps']:.2f} req/s, "
        f"{c['prompt_tok_s_min'] / 1e3:.0f}k-{c['prompt_tok_s_max'] / 1e3:.0f}k prompt tokens/s; "
        f"synthetic: {s['duration_min']:.0f} min at {s['rate_rps']:.2f} req/s, its token rate "
        f"climbing from {s['prompt_tok_s_first_min'] / 1e3:.0f}k to "
        f"{s['prompt_tok_s_last_full_min'] / 1e3:.0f}k tokens/s (first to last full minute). |",
        "| `block_popularity` | Requests per block against popularity rank (log-log). The top "
        f"conversation block is in all {c['top_block_requests']:,} requests (shared system "
        f"prompt); {_pct(c['blocks_used_once'], 0)} (conversation) and "
        f"{_pct(s['blocks_used_once'], 0)} (synthetic) of distinct blocks are used once. |",
        "| `reuse_distance` | CDF of LRU stack distance in tokens over all block references; "
        f"dashed line at 3M tokens. {_pct(c['references_repeating'], 0)} / "
        f"{_pct(s['references_repeating'], 0)} of references repeat a block; "
        f"{_pct(c['repeats_within_3m'], 0)} / {_pct(s['repeats_within_3m'], 0)} of those repeats "
        "come back within 3M tokens. |",
        "| `prefix_structure` | Reusable share of each prompt (infinite cache), share of sessions "
        "by turns per inferred conversation chain (log-log), and time between turns (s). Median "
        f"gap between turns: {c['median_gap_s']:.0f} s (conversation), {s['median_gap_s']:.0f} s "
        f"(synthetic); {c['multi_turn_sessions']:,} multi-turn chains of {c['mean_turns']:.1f} "
        f"turns on average hold {_pct(c['requests_in_multi_turn'], 0)} of conversation requests. |",
        "| `hit_rate_capacity` | Token hit ratio of one cache from 1e4 to 1e8 tokens (log x) under "
        "LRU, FIFO, LFU and the offline optimum, with the infinite-cache ceiling and the 3M-token "
        "point marked. |",
    ])
    rows = [
        "| trace | ceiling | LRU | FIFO | LFU | offline optimum |",
        "|---|---|---|---|---|---|",
    ]
    for trace, h in hit.items():
        cells = [f"{_pct(h[p])} ({_pct(h[p] / h['ceiling'], 0)})" for p in ("lru", "fifo", "lfu", "opt")]
        rows.append(f"| {trace} | {_pct(h['ceiling'])} | " + " | ".join(cells) + " |")
    blocks["notebook01_hit_rates"] = "\n".join(rows)
    sz, cfg = numbers["sizing"], numbers["settings"]["sizing"]
    lru = hit["conversation"]
    rejected = "none" if not sz["rejected"] else f"{sz['rejected']:,}"
    blocks["notebook02"] = "\n".join([
        "| file | what it shows |",
        "|---|---|",
        "| `sizing_hit_rate` | LRU token hit ratio of one cache against capacity (1e4-1e8 tokens, "
        f"blocks on the top axis), the chosen 3M-token point marked ({_pct(lru['lru'])}, "
        f"{_pct(lru['lru'] / lru['ceiling'], 0)} of the {_pct(lru['ceiling'])} ceiling). |",
        "| `sizing_simulation` | TTFT and TPOT ECDFs (p99 in the titles) and requests per replica. "
        f"Headline: {_pct(sz['token_hit_ratio'])} of prompt tokens served from cache, TTFT p50 "
        f"{_ms(sz['ttft_p50_ms'])} ms, p99 {_ms(sz['ttft_p99_ms'])} ms, TPOT p50 "
        f"{_ms(sz['tpot_p50_ms'])} ms, p99 {_ms(sz['tpot_p99_ms'])} ms ({sz['requests']:,} "
        f"requests, {rejected} rejected; latencies over the finished ones). |",
    ])
    del cfg
    lvp, rt = numbers["local_vs_pooled"], numbers["routing"]
    rows = [
        "| trace | placement | 10 local caches | pooled 30M cache | ceiling |",
        "|---|---|---|---|---|",
    ]
    for trace, t in lvp.items():
        for placement in ("random", "round_robin", "hash_first_block"):
            rows.append(
                f"| {trace} | {_label(placement)} | {_pct(t[placement])} | {_pct(t['pooled'])} | "
                f"{_pct(t['ceiling'])} |"
            )
    ca = {trace: r["cache_aware"]["token_hit_ratio"] for trace, r in rt.items()}
    rows += [
        "",
        "The simulated routers' local hit ratios are the \"token hit ratio\" column of the next "
        "table: cache-aware routing gets "
        + " and ".join(f"{_pct(v)} ({trace})" for trace, v in ca.items())
        + " out of ten local caches.",
        "",
        "Headline numbers of `ttft_by_routing`, `replica_load` and the routing bars of",
        "`local_vs_global` (full traces; latencies over finished requests):",
        "",
        "| trace | routing | TTFT p50 (ms) | TTFT p99 (ms) | token hit ratio | busiest replica "
        "| rejected |",
        "|---|---|---|---|---|---|---|",
    ]
    for trace, runs in rt.items():
        for routing, r in runs.items():
            rows.append(
                f"| {trace} | {_label(routing)} | {r['ttft_p50_ms']:,.0f} | {r['ttft_p99_ms']:,.0f} "
                f"| {_pct(r['token_hit_ratio'])} | {_pct(r['busiest_share'], 0)} | "
                f"{r['rejected']:,} |"
            )
    blocks["notebook03"] = "\n".join(rows)
    te = numbers["settings"]["teaching"]
    exp = numbers["teaching"]

    def cell(name: str, key: str, shown: str | None = None) -> str:
        r = exp[name][key]
        return f"{shown or key}: {_pct(r['token_hit_ratio'], 0)}, {_ms(r['ttft_p99_ms'])} ms"

    rows = [
        f"One replica, a synthetic prefix pool ({te['num_requests']:,} requests at "
        f"{te['rate_rps']:g} req/s, {te['num_prefixes']} prefixes of {te['prefix_len']:,} tokens "
        f"with Zipf {te['prefix_zipf']:g} plus ~{te['input_len']:,} own tokens, gamma arrivals of "
        f"shape {te['burstiness']:g}: an offered load of {te['rate_rps']:g} req/s = "
        f"{te['rate_rps'] * te['mean_prompt_tokens']:,.0f} prompt tokens/s) and a "
        f"{te['kv_blocks']}-block LRU KV cache; each figure changes one knob. Left: token hit "
        "ratio (dotted: infinite cache); right: TTFT p50 and p99 (ms, log y).",
        "",
        "| file | knob | headline (token hit ratio, TTFT p99) |",
        "|---|---|---|",
    ]
    spec = {
        "zipf": ("Zipf skew s", [("0", "s=0"), ("2", "s=2")]),
        "prefixes": ("distinct prefixes", [("4", None), ("256", None)]),
        "prefix_len": ("shared prefix length", [("512", None), ("2048", "2,048"), ("4096", "4,096")]),
        "burstiness": ("gamma shape", [("0.1", None), ("4", None)]),
        "cache_size": ("KV cache blocks", [("32", None), ("256", None), ("1024", "1,024")]),
    }
    for name, (knob, points) in spec.items():
        shown = "; ".join(cell(name, k, label) for k, label in points if k in exp[name])
        rows.append(f"| `teaching_{name}` | {knob} | {shown} |")
    blocks["notebook04"] = "\n".join(rows)
    return blocks


_BLOCK = re.compile(r"(<!-- headline:(\w+) -->\n)(.*?)(\n<!-- /headline:\2 -->)", re.S)


def update_readme(path: str | os.PathLike[str], numbers: Mapping[str, Any]) -> bool:
    """Rewrite the generated blocks of the README at ``path``; True when the text changed.

    Raises
    ------
    ValueError
        When the README lacks a block :func:`readme_blocks` makes, or has one it does not.

    Examples
    --------
    >>> import tempfile
    >>> from inferasim.figures import FigureData
    >>> names = sorted(readme_blocks(_example_numbers(FigureData)))
    >>> text = "".join(f"# {n}\\n<!-- headline:{n} -->\\nold\\n<!-- /headline:{n} -->\\n" for n in names)
    >>> with tempfile.TemporaryDirectory() as d:
    ...     readme = Path(d) / "README.md"
    ...     _ = readme.write_text(text)
    ...     changed = update_readme(readme, _example_numbers(FigureData))
    ...     again = update_readme(readme, _example_numbers(FigureData))
    ...     stale = readme_is_current(readme.read_text(), _example_numbers(FigureData))
    >>> changed, again, stale
    (True, False, [])
    """
    path = Path(path)
    text = path.read_text()
    blocks = readme_blocks(numbers)
    found = [m.group(2) for m in _BLOCK.finditer(text)]
    if sorted(found) != sorted(blocks):
        raise ValueError(
            f"{path}: generated blocks {sorted(found)} do not match {sorted(blocks)}; "
            "mark each with <!-- headline:NAME --> ... <!-- /headline:NAME -->"
        )
    new = _BLOCK.sub(lambda m: m.group(1) + blocks[m.group(2)] + m.group(4), text)
    if new != text:
        path.write_text(new)
    return new != text


def readme_is_current(text: str, numbers: Mapping[str, Any]) -> list[str]:
    """Names of the README's generated blocks that differ from what ``numbers`` give.

    Examples
    --------
    >>> from inferasim.figures import FigureData
    >>> readme_is_current("no blocks here", _example_numbers(FigureData))[:2]
    ['notebook01', 'notebook01_hit_rates']
    """
    blocks = readme_blocks(numbers)
    found = {m.group(2): m.group(3) for m in _BLOCK.finditer(text)}
    names = sorted(set(blocks) | set(found))
    return [n for n in names if found.get(n) != blocks.get(n)]


def write_headline(
    path: str | os.PathLike[str], data: Any, *, readme: bool = True
) -> dict[str, Any]:
    """Compute the headline numbers, write them to ``path`` (JSON) and refresh the README beside it.

    Parameters
    ----------
    path : path
        The JSON file (``figures/headline.json``).
    data : inferasim.figures.FigureData
    readme : bool, default True
        Also rewrite the generated blocks of ``README.md`` in the same folder
        (when it exists).

    Returns
    -------
    dict
        The numbers written.

    Examples
    --------
    >>> import tempfile
    >>> from inferasim import Workload
    >>> from inferasim.figures import FigureData
    >>> wl = Workload.from_synthetic(60, 5.0, input_len=512, output_len=4, num_prefixes=4,
    ...                              prefix_len=1024, seed=0)
    >>> data = FigureData(workloads={"conversation": wl, "synthetic": wl}, quick=True)
    >>> with tempfile.TemporaryDirectory() as d:
    ...     numbers = write_headline(Path(d) / "headline.json", data)
    ...     compare_numbers(json.loads((Path(d) / "headline.json").read_text()), numbers)
    []
    >>> write_headline("figures/headline.json", FigureData(quick=False))  # doctest: +SKIP
    """
    numbers = headline_numbers(data)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(numbers, indent=1, sort_keys=False) + "\n")
    readme_path = path.parent / "README.md"
    if readme and readme_path.is_file():
        update_readme(readme_path, numbers)
    return numbers
