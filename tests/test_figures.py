"""The figure pipeline: data by hand, figure data, units, overlaps, determinism, CLI."""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from inferasim import Workload, figures, reuse, style


# ----------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def tiny_study(tmp_path_factory: pytest.TempPathFactory) -> figures.Study:
    """A study on two small synthetic workloads standing in for the traces."""
    mp = pytest.MonkeyPatch()
    # Small teaching experiments so every figure renders in seconds.
    mp.setitem(figures.TEACHING_BASE, "num_requests", 60)
    common = {"output_len": 16, "range_ratio": 0.5, "seed": 1}
    study = figures.Study(
        quick=True,
        workloads={
            "conversation": Workload.from_synthetic(
                300,
                4.0,
                input_len=1500,
                num_prefixes=12,
                prefix_len=2048,
                prefix_zipf=1.0,
                **common,
            ),
            "synthetic": Workload.from_synthetic(
                200,
                4.0,
                input_len=3000,
                num_prefixes=40,
                prefix_len=1024,
                prefix_zipf=0.5,
                **common,
            ),
        },
    )
    yield study
    mp.undo()


@pytest.fixture(scope="module")
def rendered(tiny_study: figures.Study) -> dict[str, object]:
    """Every registered figure, drawn once from the tiny study."""
    return {spec.name: spec.make(tiny_study) for spec in figures.FIGURES}


# ------------------------------------------------------------------- data
def test_capacity_grid_by_hand():
    # 1e4..1e6 tokens, 1 point per decade: 10000/512 = 19.5 -> 20,
    # 1e5/512 = 195.3 -> 195, 1e6/512 = 1953.1 -> 1953 blocks.
    assert figures.capacity_grid(1e4, 1e6, per_decade=1).tolist() == [20, 195, 1953]
    # Tiny capacities never round to 0 blocks and duplicates merge.
    assert figures.capacity_grid(1, 10, per_decade=4).tolist() == [1]


def test_cached_prefix_tokens_by_hand():
    # r0 [1,2] (1024 tokens) cold; r1 [1,3] of 1000 tokens reuses block 1 (512);
    # r2 [4,2]: block 2 was seen but its predecessor 4 was not -> 0 (prefix rule);
    # r3 [1,2,5] of 1100 tokens: leading run 1,2 -> 1024.
    wl = Workload.from_requests(
        [0, 1, 2, 3], [1024, 1000, 1024, 1100], [1] * 4, [[1, 2], [1, 3], [4, 2], [1, 2, 5]]
    )
    assert figures.cached_prefix_tokens(wl).tolist() == [0, 512, 0, 1024]


def test_cached_prefix_tokens_agree_with_the_infinite_ceiling(tiny_study):
    for wl in tiny_study.workloads.values():
        ceiling = reuse.infinite_hit_ratio(wl).token_hit_ratio
        assert figures.cached_prefix_tokens(wl).sum() / wl.input_len.sum() == pytest.approx(ceiling)


def test_hit_rate_curve_beyond_the_working_set_is_the_ceiling(tiny_study):
    wl = tiny_study.workloads["conversation"]
    working_set = np.unique(wl.hash_ids).size
    curve = figures.hit_rate_curve(
        wl, np.array([working_set // 4, working_set, 10 * working_set]), "lru"
    )
    ceiling = reuse.infinite_hit_ratio(wl).token_hit_ratio
    assert curve["token_hit_ratio"].iloc[1:].tolist() == pytest.approx([ceiling, ceiling])
    assert curve["capacity_tokens"].tolist() == [
        b * 512 for b in (working_set // 4, working_set, 10 * working_set)
    ]
    direct = reuse.replay_cache(wl, working_set // 4, policy="lru")
    assert curve["token_hit_ratio"].iloc[0] == pytest.approx(
        direct["hit_tokens"].sum() / wl.input_len.sum()
    )


def test_study_ceilings_by_hand():
    # r0 [1,2], r1 [1,3], r2 [1,2], 1024 tokens each: hits are r1's block 1
    # and r2's blocks 1,2 -> 3 of 6 blocks, 1536 of 3072 tokens.
    wl = Workload.from_requests([0, 1, 2], [1024] * 3, [4] * 3, [[1, 2], [1, 3], [1, 2]])
    c = figures.Study(workloads={"t": wl}).ceilings.loc["t"]
    assert c["ceiling_block_hit_ratio"] == 0.5
    assert c["ceiling_token_hit_ratio"] == 0.5
    assert c["unique_tokens"] == 3 * 512
    assert c["prompt_tokens"] == 3072


def test_node_cache_share_is_hit_over_ceiling(tiny_study):
    node = tiny_study.node_cache
    assert set(node["policy"]) == set(figures.POLICIES)
    np.testing.assert_allclose(
        node["share_of_ceiling"], node["token_hit_ratio"] / node["ceiling_token_hit_ratio"]
    )
    # The tiny workloads fit in 3M tokens: every policy reaches the ceiling.
    np.testing.assert_allclose(node["share_of_ceiling"], 1.0)


def test_hit_rates_are_monotone_and_bounded_by_the_ceiling(tiny_study):
    for (trace, policy), curve in tiny_study.hit_rates.groupby(["trace", "policy"]):
        ratios = curve["token_hit_ratio"].to_numpy()
        ceiling = tiny_study.ceilings.loc[trace, "ceiling_token_hit_ratio"]
        assert ratios.max() <= ceiling + 1e-12, (trace, policy)
        if policy in ("lru", "opt"):  # stack policies: no Belady anomaly
            assert np.all(np.diff(ratios) >= -1e-12), (trace, policy)
        assert curve["capacity_tokens"].min() <= figures.CAPACITY_RANGE[0] * 1.05
        assert curve["capacity_tokens"].max() >= figures.CAPACITY_RANGE[1] * 0.95


def test_local_vs_global_by_hand():
    # Four requests of one block [1]; two nodes of one block, round-robin:
    # node 0 sees r0, r2 -> r2 hits; node 1 sees r1, r3 -> r3 hits: 2 of 4.
    # The pooled cache hits r1, r2, r3: 3 of 4.
    wl = Workload.from_requests([0, 1, 2, 3], [512] * 4, [1] * 4, [[1], [1], [1], [1]])
    t = figures.local_vs_global({"t": wl}, replicas=2, capacity_tokens=512, assigns=["round_robin"])
    assert t[
        ["local_token_hit_ratio", "global_token_hit_ratio", "ceiling_token_hit_ratio"]
    ].values.tolist() == [[0.5, 0.75, 0.75]]


def test_local_never_beats_global_for_random_placement(tiny_study):
    t = tiny_study.local_global
    assert (t["local_token_hit_ratio"] <= t["ceiling_token_hit_ratio"] + 1e-12).all()
    assert (t["global_token_hit_ratio"] <= t["ceiling_token_hit_ratio"] + 1e-12).all()


def test_routing_summary_matches_the_request_frames(tiny_study):
    table = tiny_study.routing_table
    assert len(table) == 2 * len(figures.ROUTING_POLICIES)
    for row in table.itertuples():
        req = tiny_study.routing[row.trace, row.routing].requests
        assert row.ttft_p99_ms == pytest.approx(req["ttft_ms"].quantile(0.99))
        assert row.busiest_share == pytest.approx(req["replica"].value_counts().max() / len(req))
        assert 1 / figures.FLEET_REPLICAS - 1e-12 <= row.busiest_share <= 1


def test_teaching_experiment_varies_only_its_knob(tiny_study):
    table = tiny_study.teaching("prefix_len")
    assert table["value"].tolist() == list(figures.TEACHING["prefix_len"].values)
    # Longer shared prefixes leave a larger share of each prompt reusable.
    assert np.all(np.diff(table["infinite_token_hit_ratio"]) > 0)
    assert (table["token_hit_ratio"] <= table["infinite_token_hit_ratio"] + 1e-12).all()


# ---------------------------------------------------------------- figures
def test_trace_lengths_draw_the_ecdf_of_each_trace():
    wl = Workload.from_requests([0, 1, 2], [300, 100, 200], [5, 7, 6])
    fig = figures.plot_trace_lengths({"t": wl})
    line = fig.axes[0].get_lines()[0]
    assert line.get_xdata().tolist() == [100, 200, 300]
    assert line.get_ydata().tolist() == pytest.approx([1 / 3, 2 / 3, 1])


def test_arrivals_count_requests_per_bin():
    # Arrivals at 0, 10, 20 s and 70, 80 s with 60 s bins: 3 requests in [0, 60)
    # -> 0.05/s; [60, 80] is 20 s wide (the last bin ends at the last arrival)
    # with 2 requests -> 0.1/s.
    wl = Workload.from_requests([0, 10_000, 20_000, 70_000, 80_000], [10] * 5, [1] * 5)
    fig = figures.plot_trace_arrivals({"t": wl})
    assert fig.axes[0].get_lines()[0].get_ydata().tolist() == pytest.approx([0.05, 0.1])


def test_hit_rate_figure_marks_the_3m_point(tiny_study, rendered):
    ax = rendered["hit_rate_capacity"].axes[0]
    node = tiny_study.node_cache.set_index(["trace", "policy"]).loc[("conversation", "lru")]
    marks = [ln for ln in ax.get_lines() if ln.get_marker() == "o" and len(ln.get_xdata()) == 1]
    assert [(m.get_xdata()[0], m.get_ydata()[0]) for m in marks] == [
        (node["capacity_tokens"], pytest.approx(node["token_hit_ratio"]))
    ]
    assert f"{node['share_of_ceiling']:.0%} of ceiling" in " ".join(t.get_text() for t in ax.texts)


_UNITLESS_OK = (
    "policy",
    "trace",
    "turn",
    "ratio",
    "fraction",
    "share",
    "rank",
    "replica",
    "requests",
    "shape",
    "skew",
    "prefixes",
    "references",
)


def test_every_axis_is_labelled_with_a_unit(rendered):
    for name, fig in rendered.items():
        for ax in fig.axes:
            assert ax.get_xlabel(), name
            if not ax.get_ylabel():
                # Only a panel sharing its y axis with a labelled neighbour may go without.
                assert len(ax.get_shared_y_axes().get_siblings(ax)) > 1, name
            for lab in (ax.get_xlabel(), ax.get_ylabel()):
                if lab:
                    assert "(" in lab or any(w in lab for w in _UNITLESS_OK), (name, lab)


def _text_boxes(fig):
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    boxes = []
    for ax in fig.axes:
        items = [ax.title, ax.xaxis.label, ax.yaxis.label, *ax.texts]
        legend = ax.get_legend()
        if legend is not None:
            items.append(legend)
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            items += [
                t.label1
                for t in axis.get_major_ticks()
                if t.label1.get_visible() and t.label1.get_text() and lo <= t.get_loc() <= hi
            ]
        for item in items:
            if item.get_visible() and (not hasattr(item, "get_text") or item.get_text()):
                boxes.append((item, item.get_window_extent(renderer)))
    for legend in fig.legends:
        boxes.append((legend, legend.get_window_extent(renderer)))
    return boxes


def _rotated(item) -> bool:
    return hasattr(item, "get_rotation") and item.get_rotation() % 180 != 0


def test_no_two_labels_overlap(rendered):
    for name, fig in rendered.items():
        boxes = _text_boxes(fig)
        for (a, ba), (b, bb) in itertools.combinations(boxes, 2):
            if a is b or (_rotated(a) and _rotated(b)):
                continue  # parallel slanted labels: checked below
            overlap = min(ba.x1, bb.x1) - max(ba.x0, bb.x0), min(ba.y1, bb.y1) - max(ba.y0, bb.y0)
            assert not (overlap[0] > 1 and overlap[1] > 1), (name, str(a), str(b))


def test_slanted_tick_labels_are_far_enough_apart(rendered):
    # Parallel labels rotated by r, with anchors d pixels apart along the axis,
    # are d * sin(r) apart across their baselines: that must exceed the text height.
    checked = 0
    for name, fig in rendered.items():
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        for ax in fig.axes:
            labels = [t for t in ax.get_xticklabels() if t.get_text() and _rotated(t)]
            if len(labels) < 2:
                continue
            xs = np.sort(ax.transData.transform([(t.get_position()[0], 0) for t in labels])[:, 0])
            height = labels[0].get_fontsize() * fig.dpi / 72
            gap = np.diff(xs).min() * abs(np.sin(np.radians(labels[0].get_rotation())))
            assert gap > height, (name, gap, height)
            checked += 1
    assert checked >= 2  # local_vs_global has slanted labels on both panels


def test_figures_use_the_paper_size_and_font(rendered):
    widths = {round(fig.get_figwidth(), 2) for fig in rendered.values()}
    assert widths <= {style.SINGLE[0], style.DOUBLE[0]}
    for fig in rendered.values():
        for ax in fig.axes:
            assert ax.xaxis.label.get_fontsize() == style.RC_PARAMS["axes.labelsize"]


def test_make_figures_is_deterministic(tiny_study, tmp_path):
    names = ["trace_lengths", "hit_rate_capacity", "local_vs_global"]
    a = figures.make_figures(tmp_path / "a", names=names, study=tiny_study)
    b = figures.make_figures(tmp_path / "b", names=names, study=tiny_study)
    for name in names:
        assert [p.name for p in a[name]] == [f"{name}.pdf", f"{name}.png"]
        for pa, pb in zip(a[name], b[name], strict=True):
            assert pa.read_bytes() == pb.read_bytes(), pa.name
    assert b"CreationDate" not in (tmp_path / "a" / "trace_lengths.pdf").read_bytes()


def test_make_figures_rejects_unknown_names(tiny_study, tmp_path):
    with pytest.raises(ValueError, match="unknown figure"):
        figures.make_figures(tmp_path, names=["nope"], study=tiny_study)


def test_cli_lists_and_reports_missing_traces(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    figures.add_arguments(parser)
    assert figures.run(parser.parse_args(["--list"])) == 0
    listed = capsys.readouterr().out
    assert all(spec.name in listed for spec in figures.FIGURES)
    code = figures.run(parser.parse_args(["--traces", str(tmp_path), "--out", str(tmp_path / "f")]))
    assert code == 2
    assert "conversation" in capsys.readouterr().out


def test_registry_names_are_unique_and_cover_the_notebooks():
    names = [s.name for s in figures.FIGURES]
    assert len(names) == len(set(names))
    notebooks = {s.notebook for s in figures.FIGURES}
    assert notebooks == {
        "01_trace_reuse_structure",
        "02_cache_sizing",
        "03_routing_and_locality",
        "04_teaching_cache_reuse",
    }
    root = Path(__file__).resolve().parents[1]
    readme = (root / "figures" / "README.md").read_text()
    # Each notebook draws through the figures module (no copy-pasted plotting).
    for nb in notebooks:
        assert "figures." in (root / "notebooks" / f"{nb}.py").read_text()
    assert all(f"`{n}`" in readme for n in names)


# ------------------------------------------------------------ real traces
def test_real_trace_figures(conversation_path, synthetic_trace_path, tmp_path):
    study = figures.Study(conversation_path.parent, quick=True)
    written = figures.make_figures(
        tmp_path, names=["trace_lengths", "block_popularity"], study=study
    )
    assert all(p.stat().st_size > 1000 for paths in written.values() for p in paths)
    ceilings = study.ceilings
    assert ceilings.loc["conversation", "requests"] == 12_031
    assert ceilings.loc["synthetic", "requests"] == 3_993
    # The infinite-cache ceiling equals the reuse module's, an independent computation.
    for name, wl in study.workloads.items():
        assert ceilings.loc[name, "ceiling_token_hit_ratio"] == pytest.approx(
            reuse.infinite_hit_ratio(wl).token_hit_ratio
        )
    assert isinstance(study.workloads["conversation"].frame, pd.DataFrame)


def _write_trace(path: Path, n: int) -> None:
    lines = [
        f'{{"timestamp": {i * 1000}, "input_length": 1024, "output_length": 4, "hash_ids": [1, {i + 2}]}}'
        for i in range(n)
    ]
    path.write_text("\n".join(lines) + "\n")


def test_load_traces_takes_toolagent_only_when_present(tmp_path):
    _write_trace(tmp_path / "conversation_trace.jsonl", 3)
    _write_trace(tmp_path / "synthetic_trace.jsonl", 2)
    assert {k: len(v) for k, v in figures.load_traces(tmp_path).items()} == {
        "conversation": 3,
        "synthetic": 2,
    }
    _write_trace(tmp_path / "toolagent_trace.jsonl", 4)
    assert list(figures.load_traces(tmp_path)) == ["conversation", "synthetic", "toolagent"]
    (tmp_path / "synthetic_trace.jsonl").unlink()
    with pytest.raises(FileNotFoundError, match="synthetic"):
        figures.load_traces(tmp_path)
