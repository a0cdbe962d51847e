"""The figure registry: every figure drawn from its study, readable, at 200 dpi, deterministic; the CLI."""

from __future__ import annotations

import argparse
import itertools
import struct
from pathlib import Path

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from inferasim import Workload, figures, studies, style
from inferasim.studies import settings


# ----------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def tiny_data() -> figures.FigureData:
    """Figure data on two small synthetic workloads standing in for the traces."""
    mp = pytest.MonkeyPatch()
    # Small teaching experiments so every figure renders in seconds.
    mp.setitem(studies.TEACHING_BASE, "num_requests", 60)
    common = {"output_len": 16, "range_ratio": 0.5, "seed": 1}
    data = figures.FigureData(
        quick=True,
        workloads={
            "conversation": Workload.from_synthetic(
                300, 4.0, input_len=1500, num_prefixes=12, prefix_len=2048, **common
            ),
            "synthetic": Workload.from_synthetic(
                200, 4.0, input_len=3000, num_prefixes=40, prefix_len=1024, prefix_zipf=0.5, **common
            ),
        },
    )
    yield data
    mp.undo()


@pytest.fixture(scope="module")
def rendered(tiny_data: figures.FigureData) -> dict[str, object]:
    """Every registered figure, drawn once from the tiny data."""
    return {spec.name: spec.make(tiny_data) for spec in figures.FIGURES}


# ------------------------------------------------------------------ registry
def test_registry_names_are_unique_and_cover_the_notebooks():
    names = [s.name for s in figures.FIGURES]
    assert len(names) == len(set(names))
    notebooks = {s.notebook for s in figures.FIGURES}
    root = Path(__file__).resolve().parents[1]
    assert notebooks == {p.stem for p in (root / "notebooks").glob("0[1-4]_*.py")}
    readme = (root / "figures" / "README.md").read_text()
    assert all(f"`{n}`" in readme for n in names)


def test_notebooks_call_the_public_api_not_the_registry():
    root = Path(__file__).resolve().parents[1]
    for path in sorted((root / "notebooks").glob("0[1-4]_*.py")):
        text = path.read_text()
        assert "figures." not in text.replace("inferasim figures", ""), path.name
        assert "ism.plots." in text or "ism.widgets." in text, path.name


def test_studies_are_computed_once_and_shared(tiny_data):
    figures.FIGURES[0].make(tiny_data)
    first = tiny_data.get("requests")
    figures.FIGURES[1].make(tiny_data)  # trace_arrivals reads the same frame
    assert tiny_data.get("requests") is first
    assert set(tiny_data.timings) >= {"requests"}


def test_hit_rate_figure_marks_the_3m_point(tiny_data, rendered):
    ax = rendered["hit_rate_capacity"].axes[0]
    at = studies.at_capacity(
        tiny_data.get("hit_rates"), settings.NODE_CACHE_TOKENS, tiny_data.get("overview")
    )
    node = at[(at["trace"] == "conversation") & (at["policy"] == "lru")].iloc[0]
    marks = [ln for ln in ax.get_lines() if ln.get_marker() == "o" and len(ln.get_xdata()) == 1]
    assert [(m.get_xdata()[0], m.get_ydata()[0]) for m in marks] == [
        (node["capacity_tokens"], pytest.approx(node["token_hit_ratio"]))
    ]
    assert f"{node['share_of_ceiling']:.0%} of ceiling" in " ".join(t.get_text() for t in ax.texts)


def test_ttft_by_routing_names_policies_and_puts_longest_match_apart(tiny_data, rendered):
    fig = rendered["ttft_by_routing"]
    a, b, apart, dots = fig.axes
    policies = [p for p in settings.ROUTING_POLICIES]
    # policy names, not numbers, on the p99 axis; values on a log axis
    assert [t.get_text() for t in dots.get_yticklabels()] == [style.label(p) for p in policies]
    assert dots.get_xscale() == "log"
    # the collapsing policy is drawn only in its own panel
    lm = style.label("longest_match")
    for ax in (a, b):
        assert not any(lm in str(ln.get_label()) for ln in ax.get_lines())
    assert apart.get_title() == lm
    # the dots are the p99 of each run
    summary = studies.routing_summary(tiny_data.get("routing")).set_index(["trace", "routing"])
    conv = [ln for ln in dots.get_lines() if ln.get_label() == "conversation"][0]
    expected = [summary.loc[("conversation", p), "ttft_p99_ms"] for p in policies]
    assert conv.get_xdata().tolist() == pytest.approx(expected)


def test_replica_load_and_sizing_name_the_trace_and_fleet(rendered):
    title = rendered["replica_load"].get_suptitle()
    assert "conversation trace" in title and "10 replicas" in title and "3M-token" in title
    sizing = rendered["sizing_simulation"].get_suptitle()
    assert "conversation trace" in sizing and "4 replicas" in sizing
    assert style.label("kv_cost") in sizing


def test_local_vs_global_placements_have_the_same_colours_in_every_panel(rendered):
    fig = rendered["local_vs_global"]
    per_panel = []
    for ax in fig.axes:
        names = [t.get_text() for t in ax.get_xticklabels()]
        per_panel.append(
            {n: p.get_facecolor() for n, p in zip(names, ax.patches, strict=True)}
        )
    shared = set(per_panel[0]) & set(per_panel[1])
    assert style.label("round_robin") in shared
    assert all(per_panel[0][n] == per_panel[1][n] for n in shared)


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
    "session",
)


def test_every_axis_is_labelled_with_a_unit(rendered):
    for name, fig in rendered.items():
        for ax in fig.axes:
            assert ax.get_xlabel(), name
            if not ax.get_ylabel():
                # Only a panel sharing its y axis with a labelled neighbour, or
                # a categorical axis with named ticks, may go without.
                named = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
                shared = len(ax.get_shared_y_axes().get_siblings(ax)) > 1
                assert shared or (named and not named[0][0].isdigit()), name
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
    if fig._suptitle is not None:
        boxes.append((fig._suptitle, fig._suptitle.get_window_extent(renderer)))
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
    widths = {round(float(fig.get_figwidth()), 2) for fig in rendered.values()}
    assert widths <= {style.SINGLE[0], style.DOUBLE[0]}
    for fig in rendered.values():
        for ax in fig.axes:
            assert ax.xaxis.label.get_fontsize() == style.RC_PARAMS["axes.labelsize"]


# -------------------------------------------------------------------- files
def _png_dpi_and_size(path: Path) -> tuple[float, int, int]:
    """(dots per inch from the pHYs chunk, width, height) of a PNG, read by hand."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    pos = 8
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        if kind == b"pHYs":
            ppu_x, _ppu_y, unit = struct.unpack(">IIB", data[pos + 8 : pos + 17])
            assert unit == 1  # metres
            return ppu_x * 0.0254, width, height
        pos += 12 + length
    raise AssertionError("no pHYs chunk: the PNG does not record its resolution")


def test_pngs_are_written_at_200_dpi(rendered, tmp_path):
    # The style's savefig.dpi used to be ignored (the file was saved outside the
    # style context at the figure's 100 dpi): check the file itself.
    for name in ("trace_lengths", "block_popularity"):
        fig = rendered[name]
        (png,) = style.save_figure(fig, tmp_path, name, formats=("png",))
        dpi, width, height = _png_dpi_and_size(png)
        assert dpi == pytest.approx(style.DPI, abs=0.5)
        # the page is the figure: inches times 200 pixels
        assert (width, height) == (
            round(fig.get_figwidth() * 200),
            round(fig.get_figheight() * 200),
        )


def test_make_figures_is_deterministic(tiny_data, tmp_path):
    names = ["trace_lengths", "hit_rate_capacity", "local_vs_global"]
    a = figures.make_figures(tmp_path / "a", names=names, data=tiny_data)
    b = figures.make_figures(tmp_path / "b", names=names, data=tiny_data)
    for name in names:
        assert [p.name for p in a[name]] == [f"{name}.pdf", f"{name}.png"]
        for pa, pb in zip(a[name], b[name], strict=True):
            assert pa.read_bytes() == pb.read_bytes(), pa.name
    assert b"CreationDate" not in (tmp_path / "a" / "trace_lengths.pdf").read_bytes()


def test_make_figures_same_files_on_a_process_pool(tiny_data, tmp_path):
    wls = tiny_data.workloads
    names = ["hit_rate_capacity", "replica_load"]
    serial = figures.make_figures(
        tmp_path / "s", names=names, data=figures.FigureData(quick=True, workloads=wls)
    )
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(2) as pool:
        par = figures.make_figures(
            tmp_path / "p",
            names=names,
            data=figures.FigureData(quick=True, workloads=wls, executor=pool),
        )
    for name in names:
        for ps, pp in zip(serial[name], par[name], strict=True):
            assert ps.read_bytes() == pp.read_bytes(), ps.name


def test_make_figures_rejects_unknown_names(tiny_data, tmp_path):
    with pytest.raises(ValueError, match="unknown figure"):
        figures.make_figures(tmp_path, names=["nope"], data=tiny_data)


def test_cli_lists_and_reports_missing_traces(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    figures.add_arguments(parser)
    assert figures.run(parser.parse_args(["--list"])) == 0
    listed = capsys.readouterr().out
    assert all(spec.name in listed for spec in figures.FIGURES)
    args = ["--traces", str(tmp_path), "--out", str(tmp_path / "f"), "--jobs", "1"]
    assert figures.run(parser.parse_args(args)) == 2
    assert "conversation" in capsys.readouterr().out


# ------------------------------------------------------------ real traces
def test_real_trace_figures(conversation_path, synthetic_trace_path, tmp_path):
    data = figures.FigureData(conversation_path.parent, quick=True)
    written = figures.make_figures(
        tmp_path, names=["trace_lengths", "block_popularity"], data=data
    )
    assert all(p.stat().st_size > 1000 for paths in written.values() for p in paths)
    ov = data.get("overview").set_index("trace")
    assert ov.loc["conversation", "requests"] == 12_031
    assert ov.loc["synthetic", "requests"] == 3_993
