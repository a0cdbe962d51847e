"""Sphinx configuration of the inferasim documentation site.

Build it with one command (``pip install -e '.[docs]'`` first)::

    python -m sphinx -W -b html docs docs/_build/html

The seven companion notebooks (``notebooks/NN_*.py``, jupytext percent
files, the source of truth) become ``docs/notebooks/NN_*.ipynb`` (generated,
not committed) and are rendered with their outputs and figures:

* by default the build executes them itself (nbclient, this interpreter's
  kernel, in ``notebooks/``) and keeps each in ``docs/_build/.executed/``
  under a hash of its source, so a rebuild executes only a notebook whose
  ``.py`` changed;
* with ``INFERASIM_DOCS_NOTEBOOKS=<folder>`` the build takes the executed
  ``NN_*.ipynb`` of that folder and executes nothing. The test suite does
  this (``tests/test_docs.py``): the notebooks run once in CI, for the
  notebook tests and the site together.
"""

from __future__ import annotations

import os
from pathlib import Path

import jupytext
import nbformat

import inferasim

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
NOTEBOOK_SOURCES = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
GENERATED = HERE / "notebooks"
EXECUTED = os.environ.get("INFERASIM_DOCS_NOTEBOOKS", "")

project = "inferasim"
author = "the inferasim authors"
copyright = "the inferasim authors, Apache-2.0"
version = release = inferasim.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "myst_nb",
]

exclude_patterns = ["_build", "notebooks/*.py", "**/.ipynb_checkpoints", "jupyter_execute"]
templates_path = ["_templates"]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}

# -- API reference: autosummary stubs from the docstrings, read by numpydoc --------------
autosummary_generate = True
autosummary_imported_members = True
autosummary_ignore_module_all = False  # a module page lists its __all__, nothing else
autodoc_typehints = "none"  # numpydoc's Parameters sections carry the types
numpydoc_show_class_members = False  # class pages list their members themselves (template)
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# -- notebooks ----------------------------------------------------------------------------
# The pages render notebooks executed before Sphinx reads them (_notebook_pages below):
# MyST-NB executes nothing itself.
nb_execution_mode = "off"
nb_merge_streams = True
myst_enable_extensions = ["colon_fence"]
# The notebooks' prose is written for JupyterLab: a "$" is a dollar (escaped, ``\$``, where
# two meet in a paragraph), never math; dollarmath stays off here.
# A static page has no kernel behind a widget: _notebook_pages() puts a note in its place
# (and no widget JavaScript is fetched from a CDN).
nb_ipywidgets_js: dict[str, dict[str, str]] = {}
WIDGET = "application/vnd.jupyter.widget-view+json"
WIDGET_NOTE = (
    "*An interactive widget: it needs a running kernel. Open the notebook in JupyterLab "
    "(see Getting started) to use it; the cells below compute the same numbers in code.*"
)
CACHE = HERE / "_build" / ".executed"  # executed notebooks of the standalone build

# -- HTML ---------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"inferasim {release}"
html_static_path: list[str] = []
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": [],
}
html_sidebars = {"index": [], "getting-started": [], "extending": []}
html_show_sourcelink = False


def _execute(source: Path) -> nbformat.NotebookNode:
    """``source`` executed by this interpreter's kernel in notebooks/, cached by its text."""
    import hashlib

    import nbclient

    text = source.read_text()
    quick = [os.environ.get(name, "") for name in ("CI", "INFERASIM_QUICK")]  # smaller runs
    digest = hashlib.sha256(repr((text, quick)).encode()).hexdigest()[:16]
    cached = CACHE / f"{source.stem}-{digest}.ipynb"
    if cached.is_file():
        return nbformat.read(cached, as_version=4)
    nb = jupytext.reads(text, fmt="py:percent")
    print(f"executing {source.name} ...", flush=True)
    client = nbclient.NotebookClient(
        nb, kernel_name="python3", timeout=1200, resources={"metadata": {"path": str(source.parent)}}
    )
    client.execute()  # a failing cell stops the build with its traceback
    CACHE.mkdir(parents=True, exist_ok=True)
    for old in CACHE.glob(f"{source.stem}-*.ipynb"):
        old.unlink()
    nbformat.write(nb, cached)
    return nb


def _notebook_pages() -> None:
    """Write docs/notebooks/NN_*.ipynb, executed, for MyST-NB to render."""
    GENERATED.mkdir(exist_ok=True)
    wanted = {p.stem + ".ipynb" for p in NOTEBOOK_SOURCES}
    for stale in GENERATED.glob("*.ipynb"):
        if stale.name not in wanted:
            stale.unlink()
    for source in NOTEBOOK_SOURCES:
        if EXECUTED:
            executed = Path(EXECUTED) / (source.stem + ".ipynb")
            if not executed.is_file():
                raise FileNotFoundError(
                    f"INFERASIM_DOCS_NOTEBOOKS={EXECUTED}: no executed {executed.name} there"
                )
            nb = nbformat.read(executed, as_version=4)
        else:
            nb = _execute(source)
        for cell in nb.cells:
            for output in cell.get("outputs", []):
                if WIDGET in output.get("data", {}):
                    output["data"] = {"text/markdown": WIDGET_NOTE}
        text = nbformat.writes(nb)
        target = GENERATED / (source.stem + ".ipynb")
        if not target.is_file() or target.read_text() != text:
            target.write_text(text)  # an unchanged page keeps its file: Sphinx skips it


_notebook_pages()
