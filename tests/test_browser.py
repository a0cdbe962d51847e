"""Notebook 02 in a real browser: JupyterLab + jupytext, driven by Playwright in headless Chromium.

The test does what a reader does after following the README's "Open the
notebooks": it starts JupyterLab (on 127.0.0.1, a free port, a token, and
its own root, config, data, runtime and settings folders, so nothing of the
machine's Jupyter setup leaks in), makes text notebooks open as notebooks
with ``jupytext-config set-default-viewer python`` (the README's step),
opens ``02_cache_sizing.py``, runs all cells from the Run menu, and checks:

* no cell shows an error;
* the cache-sizing widget rendered its controls (sliders, pickers, the
  simulate button) and its hit-rate plot;
* dragging the capacity slider changes the readout (to the capacity the
  slider shows) and the plot (the marker moves).

It then opens notebook 06 as the notebook tests executed it (the
``run_notebook`` fixture: nothing runs again) and checks that JupyterLab
shows its computed prose as written: a price such as ``$0.132 per million
tokens`` reads as dollars, never typeset as math (two ``$`` in a paragraph
start TeX in JupyterLab's Markdown; the notebook escapes them as ``\\$``).

Screenshots go to a folder the test prints (``$INFERASIM_SCREENSHOT_DIR``
if set). Chromium is Debian's ``/usr/bin/chromium`` (``.ci/run`` installs
it); Playwright never downloads a browser. Without chromium or Playwright
the test skips, except under ``CI=true`` where it fails.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import chromium_page

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = "02_cache_sizing.py"
ON_CI = os.environ.get("CI", "").lower() == "true"

pytestmark = pytest.mark.slow


def _missing(message: str) -> None:
    if ON_CI:
        pytest.fail(message + " (CI=true: the browser test must run)")
    pytest.skip(message)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for_server(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"JupyterLab exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"JupyterLab did not answer in {timeout:.0f} s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = os.environ.get("INFERASIM_SCREENSHOT_DIR")
    path = Path(folder) if folder else tmp_path_factory.mktemp("browser-screenshots")
    path.mkdir(parents=True, exist_ok=True)
    print(f"\nbrowser screenshots: {path}")
    return path


@pytest.fixture(scope="module")
def lab_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder JupyterLab serves (a test may add notebooks to it)."""
    root = tmp_path_factory.mktemp("lab") / "root"
    root.mkdir()
    return root


@pytest.fixture(scope="module")
def lab(lab_root: Path, conversation_path: Path, synthetic_trace_path: Path) -> Iterator[str]:
    """A hermetic JupyterLab serving a copy of notebook 02; yields the notebook's URL."""
    if shutil.which("jupyter-lab", path=str(Path(sys.executable).parent)) is None:
        _missing("jupyterlab is not installed (pip install -e '.[test]')")
    if conversation_path.parent != synthetic_trace_path.parent:
        pytest.fail("the notebook needs both FAST'25 traces in one folder")
    root = lab_root
    base = root.parent
    shutil.copy(REPO / "notebooks" / NOTEBOOK, root / NOTEBOOK)
    shutil.copy(REPO / "jupytext.toml", root / "jupytext.toml")
    env = {
        **os.environ,
        "HOME": str(base / "home"),
        "JUPYTER_CONFIG_DIR": str(base / "config"),
        "JUPYTER_DATA_DIR": str(base / "data"),
        "JUPYTER_RUNTIME_DIR": str(base / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(base / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(base / "workspaces"),
        "IPYTHONDIR": str(base / "ipython"),
        "MPLCONFIGDIR": str(base / "mpl"),
        "INFERASIM_TRACE_DIR": str(conversation_path.parent),
        # The notebook's quick mode: the simulate button replays the first 10 minutes.
        "CI": "true",
    }
    env.pop("JUPYTER_PATH", None)
    env.pop("JUPYTER_PLATFORM_DIRS", None)
    bindir = Path(sys.executable).parent
    # The README's step: .py text notebooks open as notebooks on a double click / URL.
    subprocess.run(
        [str(bindir / "jupytext-config"), "set-default-viewer", "python"],
        env=env, check=True, capture_output=True, timeout=60,
    )
    # This JupyterLab only: render every cell (no windowing, so the widget is in the
    # page wherever it is scrolled) and no news pop-up.
    overrides = Path(env["JUPYTER_CONFIG_DIR"]) / "labconfig" / "default_setting_overrides.json"
    settings = json.loads(overrides.read_text())
    settings["@jupyterlab/notebook-extension:tracker"] = {"windowingMode": "none"}
    settings["@jupyterlab/apputils-extension:notification"] = {"fetchNews": "false"}
    overrides.write_text(json.dumps(settings, indent=2))
    port = _free_port()
    token = os.urandom(16).hex()
    log = base / "jupyterlab.log"
    cmd = [
        str(bindir / "jupyter-lab"),
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--ServerApp.root_dir={root}",
        f"--IdentityProvider.token={token}",
        f"--LabServerApp.user_settings_dir={base / 'settings'}",
        f"--LabServerApp.workspaces_dir={base / 'workspaces'}",
        "--LabApp.news_url=",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.extension_manager=readonly",  # no extension index look-ups
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # CI runs as root
        cmd.append("--allow-root")
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        _wait_for_server(f"http://127.0.0.1:{port}/api/status?token={token}", proc, log, 90)
        yield f"http://127.0.0.1:{port}/lab/tree/{NOTEBOOK}?token={token}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


@pytest.fixture(scope="module")
def page(lab: str):
    with chromium_page(_missing) as tab:
        yield tab


try:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
except ImportError:  # reported by the `page` fixture
    PlaywrightTimeout = TimeoutError


# Horizontal position (0..1 of the image width) of the capacity marker in the
# hit-rate plot: the mean x of its vermillion (#D55E00) pixels, read back from the
# PNG the browser shows. Nothing else in that plot has this colour.
MARKER_X_JS = """
async (img) => {
  if (img.decode) { await img.decode(); }
  const c = document.createElement('canvas');
  c.width = img.naturalWidth; c.height = img.naturalHeight;
  const g = c.getContext('2d');
  g.drawImage(img, 0, 0);
  const d = g.getImageData(0, 0, c.width, c.height).data;
  let sx = 0, n = 0;
  for (let i = 0; i < d.length; i += 4) {
    if (d[i] > 180 && d[i + 1] > 60 && d[i + 1] < 130 && d[i + 2] < 60) { sx += (i / 4) % c.width; n++; }
  }
  return n > 10 ? sx / n / c.width : null;
}
"""


def _code_prompts(page) -> list[str]:
    return page.locator(".jp-CodeCell .jp-InputArea-prompt").all_text_contents()


def test_notebook_02_runs_and_the_widget_responds(lab, page, shots):
    start = time.monotonic()
    page.goto(lab)
    # Opened as a notebook (not as text): notebook cells appear.
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    # A fresh JupyterLab asks which kernel to start: take the notebook's own (preselected).
    select = page.locator(".jp-Dialog").get_by_role("button", name="Select", exact=True)
    try:
        select.wait_for(state="visible", timeout=10_000)
        page.screenshot(path=str(shots / "00_kernel_dialog.png"))
        select.click()
    except PlaywrightTimeout:
        pass  # started the kernel without asking
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=60_000)
    page.screenshot(path=str(shots / "01_opened.png"))

    # Run > Run All Cells, as a reader would.
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name=re.compile(r"^Run All Cells")).click()
    deadline = time.monotonic() + 150
    while time.monotonic() < deadline:
        prompts = _code_prompts(page)
        if prompts and all(re.fullmatch(r"\[\d+\]:", p.strip()) for p in prompts):
            break
        page.wait_for_timeout(500)
    else:
        page.screenshot(path=str(shots / "timeout.png"), full_page=True)
        pytest.fail(f"cells did not finish: prompts {_code_prompts(page)}")
    page.screenshot(path=str(shots / "02_ran.png"), full_page=True)

    # No error output anywhere (tracebacks render as stderr with the error name).
    errors = [
        t for t in page.locator("[data-mime-type='application/vnd.jupyter.stderr']").all_inner_texts()
        if "Traceback" in t or "Error" in t
    ]
    assert errors == [], errors[0][:2000] if errors else ""

    # The widget: its controls and its plot are rendered.
    widget = page.locator(".jupyter-widgets.widget-vbox").first
    widget.scroll_into_view_if_needed()
    assert widget.locator(".widget-dropdown").count() >= 3  # trace, eviction, routing
    assert widget.locator(".widget-hslider").count() >= 3  # capacity, replicas, load
    assert widget.get_by_role("button", name="simulate").count() == 1
    plot = widget.locator("img.widget-image").first
    plot.wait_for(state="visible")
    box = plot.bounding_box()
    assert box is not None and box["width"] > 300 and box["height"] > 100
    readout = widget.locator(".widget-html-content", has_text="token hit ratio").first
    before_text = readout.inner_text()
    before_src = plot.get_attribute("src")
    before_x = plot.evaluate(MARKER_X_JS)
    assert before_x is not None, "no marker in the hit-rate plot"
    slider = widget.locator(".widget-hslider").first
    before_label = slider.locator(".widget-readout").inner_text()
    assert "settings changed" not in widget.inner_text()  # nothing changed after the build
    # The capacity is exactly the slider's label: 3M -> 3,000,000 tokens.
    assert before_label == "3M" and "3,000,000" in before_text
    widget.screenshot(path=str(shots / "03_widget_before.png"))

    # Drag the capacity slider's handle to the left.
    handle = slider.locator(".noUi-handle").first
    handle.scroll_into_view_if_needed()
    hb = handle.bounding_box()
    assert hb is not None
    x, y = hb["x"] + hb["width"] / 2, hb["y"] + hb["height"] / 2
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x - 60, y, steps=8)
    page.mouse.up()
    page.wait_for_function(
        "([el, old]) => el.getAttribute('src') !== old",
        arg=[plot.element_handle(), before_src],
        timeout=30_000,
    )
    after_x = plot.evaluate(MARKER_X_JS)
    after_label = slider.locator(".widget-readout").inner_text()
    after_text = readout.inner_text()
    widget.screenshot(path=str(shots / "04_widget_after.png"))
    assert after_label != before_label
    assert after_text != before_text
    # The readout names the capacity the slider now shows (e.g. 1.5M -> 1,500,000).
    m = re.fullmatch(r"([\d.]+)([kM])", after_label)
    assert m, after_label
    tokens = round(float(m.group(1)) * {"k": 1e3, "M": 1e6}[m.group(2)])
    assert f"{tokens:,}" in after_text
    # The marker moved left with the handle (a smaller capacity on a log axis).
    assert after_x is not None and after_x < before_x - 0.02, (before_x, after_x)
    # a simulation shown below the controls is now stale and says so; with none shown
    # yet, the status still asks for one (never a stale result presented as current)
    status = widget.inner_text()
    assert "settings changed" in status or "press simulate to run" in status, status
    elapsed = time.monotonic() - start
    print(f"browser test: {elapsed:.0f} s")
    assert elapsed < 180


PRICE = re.compile(r"\\?\$(\d[\d,]*\.\d+)")  # $0.132 or \$0.132 in a Markdown source


def test_notebook_06_prose_shows_dollars_not_math(lab, lab_root, page, shots, run_notebook):
    executed = run_notebook(REPO / "notebooks" / "06_capacity_planning.py")
    prose = [
        "".join(out["data"]["text/markdown"])
        for cell in executed.nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if "text/markdown" in out.get("data", {})
    ]
    prices = [m.group(1) for text in prose for m in PRICE.finditer(text)]
    assert len(prices) >= 3, prose  # the GPU price and the fleets' cost per million tokens
    name = "06_capacity_planning.ipynb"
    shutil.copy(executed.ipynb, lab_root / name)
    page.goto(lab.replace(NOTEBOOK, name))
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    select = page.locator(".jp-Dialog").get_by_role("button", name="Select", exact=True)
    try:
        select.wait_for(state="visible", timeout=10_000)
        select.click()
    except PlaywrightTimeout:
        pass
    outputs = page.locator(".jp-OutputArea-output.jp-RenderedMarkdown")
    conclusion = outputs.filter(has_text="per million tokens").first
    conclusion.wait_for(state="visible", timeout=60_000)
    # JupyterLab typesets math after rendering: give it time to do so, if it would.
    page.wait_for_timeout(3_000)
    conclusion.scroll_into_view_if_needed()
    conclusion.screenshot(path=str(shots / "06_conclusion.png"))
    math = page.locator(".jp-RenderedMarkdown mjx-container, .jp-RenderedMarkdown .MathJax")
    assert math.count() == 0, math.first.inner_text()
    shown = "\n".join(outputs.all_inner_texts())
    for price in prices:
        assert f"${price}" in shown, (price, shown[:2000])
    assert re.search(r"\$\d+\.\d{3} per million tokens", shown), shown[:2000]
