"""The documentation site: built by Sphinx, then read in headless Chromium.

``tests/test_docs.py`` builds the site as the one documented command does
(``python -m sphinx -W -b html docs <out>``: warnings are errors) from the
notebooks this session has executed (the ``run_notebook`` fixture, shared
with tests/test_notebooks.py: CI executes each notebook once, and the build
executes none). It serves the pages on 127.0.0.1 from this process and,
in the same headless Debian Chromium the browser test uses, follows the top
navigation to an API page and to a notebook page and checks that a reader
finds what they came for: the docstring's parameters and runnable example,
the notebook's code cells and its figures (loaded images, not broken ones).
Without Sphinx, Chromium or Playwright the site tests skip, except under
``CI=true`` where they fail; ``$INFERASIM_SCREENSHOT_DIR`` keeps the
screenshots.
"""

from __future__ import annotations

import doctest
import functools
import http.server
import importlib
import inspect
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import chromium_page

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.py"))
ON_CI = os.environ.get("CI", "").lower() == "true"
# The modules the API reference documents, as docs/api/index.rst lists them.
API_MODULES = re.findall(r"^   (inferasim[\w.]*)$", (DOCS / "api" / "index.rst").read_text(), re.M)

def _missing(message: str) -> None:
    if ON_CI:
        pytest.fail(message + " (CI=true: the docs tests must run)")
    pytest.skip(message)


def test_the_how_to_page_examples_run() -> None:
    # docs/extending.md is prose around doctests; the numbers in it are derived by hand there.
    result = doctest.testfile(
        str(DOCS / "extending.md"), module_relative=False, raise_on_error=False,
        optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS, verbose=False,
    )
    assert result.attempted >= 15, result
    assert result.failed == 0, result


def test_the_api_reference_covers_every_public_module() -> None:
    # every subpackage `import inferasim` exposes has a page, and every top-level name
    # (ism.Workload, ism.Simulator, ...) is documented on one of the module pages
    import inferasim

    subpackages = {importlib.import_module(m).__name__ for m in inferasim._SUBMODULES.values()}
    assert sorted(subpackages - set(API_MODULES)) == []
    modules = [importlib.import_module(m) for m in API_MODULES]
    undocumented = [
        name for name in inferasim.__all__
        if not any(getattr(m, name, None) is getattr(inferasim, name)
                   and name in getattr(m, "__all__", []) for m in modules)
    ]
    assert undocumented == []


def _readme_quickstart() -> list[str]:
    text = (REPO / "README.md").read_text()
    section = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    commands = [
        line for block in re.findall(r"```bash\n(.*?)```", section, re.S)
        for line in block.splitlines() if line.strip() and not line.startswith("#")
    ]
    assert len(commands) == 2, commands
    return commands


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, run_notebook) -> Path:
    """The built site (the notebooks executed once in this session, rendered as they ran)."""
    try:
        importlib.import_module("sphinx")
    except ImportError:
        _missing("sphinx is not installed (pip install -e '.[docs]')")
    executed = [run_notebook(path) for path in NOTEBOOKS]
    folder = {e.ipynb.parent for e in executed}
    assert len(folder) == 1, folder
    base = tmp_path_factory.mktemp("docs")
    out = base / "html"
    cmd = [sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", "-d", str(base / "doctrees"),
           str(DOCS), str(out)]
    env = {**os.environ, "INFERASIM_DOCS_NOTEBOOKS": str(folder.pop()), "MPLBACKEND": "Agg"}
    start = time.perf_counter()
    build = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    elapsed = time.perf_counter() - start
    if build.returncode != 0:
        pytest.fail(f"the docs build failed (exit {build.returncode}):\n{build.stderr[-6000:]}")
    assert not build.stderr.strip(), build.stderr[-6000:]  # -q: anything printed is a warning
    print(f"\ndocs build: {elapsed:.1f} s ({out})")
    return out


@pytest.fixture(scope="module")
def server(site: Path) -> Iterator[str]:
    """The site over HTTP on 127.0.0.1 (a free port), stopped after the module."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = os.environ.get("INFERASIM_SCREENSHOT_DIR")
    path = Path(folder) if folder else tmp_path_factory.mktemp("docs-screenshots")
    path.mkdir(parents=True, exist_ok=True)
    print(f"\ndocs screenshots: {path}")
    return path


@pytest.fixture(scope="module")
def page(server: str):
    with chromium_page(_missing) as tab:
        # Every request stays on this machine's server (the site fetches nothing else).
        outside: list[str] = []
        tab.on("request", lambda r: None if r.url.startswith((server, "data:"))
               else outside.append(r.url))
        yield tab
        assert not outside, outside


LOADED_IMAGES_JS = """
(imgs) => imgs.map((img) => ({src: img.getAttribute('src'), ok: img.complete && img.naturalWidth > 0}))
"""


@pytest.mark.slow
def test_the_navigation_reaches_an_api_page(server, page, shots) -> None:
    page.goto(server + "/index.html")
    navbar = page.locator(".bd-header .navbar-header-items")
    navbar.get_by_role("link", name="API reference").first.click()
    page.wait_for_url(re.compile(r"/api/index\.html$"))
    page.locator("article").get_by_role("link", name="inferasim.sim", exact=True).first.click()
    page.wait_for_url(re.compile(r"/inferasim\.sim\.html(#.*)?$"))
    assert page.locator("h1").first.inner_text().startswith("inferasim.sim")
    page.locator("article").get_by_role("link", name="Simulator", exact=True).first.click()
    page.wait_for_url(re.compile(r"/inferasim\.sim\.Simulator\.html(#.*)?$"))
    page.screenshot(path=str(shots / "docs_api_simulator.png"))
    # The class signature, its numpydoc parameters, its methods and its runnable example.
    assert page.locator("dt#inferasim\\.sim\\.Simulator").count() == 1
    params = page.locator("dl.field-list").first.inner_text()
    for name in ("replicas", "routing", "cost_model", "kv_tokens", "tiers"):
        assert name in params, params
    for method in ("run", "get_params", "set_params"):
        assert page.locator(f"dt#inferasim\\.sim\\.Simulator\\.{method}").count() == 1, method
    examples = page.locator("article div.highlight").all_inner_texts()
    assert any(">>> " in e and "Simulator(" in e for e in examples), examples


@pytest.mark.slow
def test_the_navigation_reaches_a_notebook_with_its_figures(server, page, shots) -> None:
    page.goto(server + "/index.html")
    navbar = page.locator(".bd-header .navbar-header-items")
    navbar.get_by_role("link", name="Notebooks").first.click()
    page.wait_for_url(re.compile(r"/notebooks\.html$"))
    page.locator("article").get_by_role("link", name=re.compile(r"^2\. Sizing a prefix KV cache")
                                        ).first.click()
    page.wait_for_url(re.compile(r"/notebooks/02_cache_sizing\.html(#.*)?$"))
    page.wait_for_load_state("load")
    assert page.locator("h1").first.inner_text().startswith("2. Sizing a prefix KV cache")
    # Code cells with their source, and the outputs of one execution (figures, prose).
    code = page.locator("div.cell div.cell_input").all_inner_texts()
    assert len(code) >= 5 and any("ism.widgets.cache_sizing(" in c for c in code), code[:3]
    images = page.locator("div.cell_output img").evaluate_all(LOADED_IMAGES_JS)
    assert len(images) >= 2, images
    assert all(i["ok"] for i in images), images
    page.locator("div.cell_output img").first.scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "docs_notebook_02.png"))


@pytest.mark.slow
def test_every_notebook_page_shows_its_code_and_figures(server, page, run_notebook) -> None:
    # Page against the executed notebook: every code cell and every figure it produced.
    for path in NOTEBOOKS:
        nb = run_notebook(path).nb
        code = [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]
        figures = sum("image/png" in o.get("data", {}) for c in code for o in c.get("outputs", []))
        page.goto(f"{server}/notebooks/{path.stem}.html")
        page.wait_for_load_state("load")
        cells = page.locator("div.cell div.cell_input").count()
        images = page.locator("div.cell_output img").evaluate_all(LOADED_IMAGES_JS)
        assert cells == len(code), (path.stem, cells, len(code))
        assert len(images) == figures, (path.stem, images, figures)
        assert all(i["ok"] for i in images), (path.stem, images)
        # no traceback or error box was rendered
        assert page.locator(".output.traceback, .output.error").count() == 0, path.stem


@pytest.mark.slow
def test_getting_started_shows_the_readme_quickstart(server, page) -> None:
    page.goto(server + "/getting-started.html")
    blocks = "\n".join(page.locator("article pre").all_inner_texts())
    for command in _readme_quickstart():
        assert command in blocks, command


@pytest.mark.slow
def test_the_api_reference_has_a_page_for_every_public_name(site: Path) -> None:
    missing = []
    for name in API_MODULES:
        module = importlib.import_module(name)
        for attr in getattr(module, "__all__", []):
            obj = getattr(module, attr)
            if inspect.isfunction(obj) or inspect.isclass(obj):
                if not (site / "api" / "generated" / f"{name}.{attr}.html").is_file():
                    missing.append(f"{name}.{attr}")
    assert not missing, missing
