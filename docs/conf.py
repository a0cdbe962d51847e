"""Sphinx configuration of the inferasim documentation site.

Build it with one command (``pip install -e '.[docs]'`` first)::

    python -m sphinx -W -b html docs docs/_build/html

The seven companion notebooks (``notebooks/NN_*.py``, jupytext percent
files, the source of truth) become ``docs/notebooks/NN_*.ipynb`` (generated,
not committed) and are rendered with their outputs and figures:

* by default the build executes them itself (MyST-NB with jupyter-cache, so
  a rebuild re-executes only the notebooks whose code changed);
* with ``INFERASIM_DOCS_NOTEBOOKS=<folder>`` the build takes the executed
  ``NN_*.ipynb`` of that folder and executes nothing. The test suite does
  this (``tests/test_docs.py``): the notebooks run once in CI, for the
  notebook tests and the site together.
"""

from __future__ import annotations

import os
import shutil
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
copyright = "the inferasim authors, Apache-2.0"  # noqa: A001 (Sphinx's name)
version = release = inferasim.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
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
intersphinx_mapping = {}  # offline build: no inventories fetched

# -- notebooks ----------------------------------------------------------------------------
myst_enable_extensions = ["colon_fence"]
# The notebooks' prose is written for JupyterLab: a "$" is a dollar (escaped where it
# must be, ``\$``), never math, so dollarmath stays off here as in the outputs.
nb_execution_mode = "off" if EXECUTED else "cache"
nb_execution_cache_path = str(HERE / "_build" / ".jupyter_cache")
nb_execution_timeout = 1200
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True
# A static page has no kernel behind a widget: show its text fallback, not an empty box
# (and fetch no widget JavaScript from a CDN).
nb_ipywidgets_js = {}
nb_mime_priority_overrides = [("html", "application/vnd.jupyter.widget-view+json", None)]

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


def _notebook_pages() -> None:
    """Write docs/notebooks/NN_*.ipynb: the executed copies, or the converted sources."""
    GENERATED.mkdir(exist_ok=True)
    wanted = {p.stem + ".ipynb" for p in NOTEBOOK_SOURCES}
    for stale in GENERATED.glob("*.ipynb"):
        if stale.name not in wanted:
            stale.unlink()
    for source in NOTEBOOK_SOURCES:
        target = GENERATED / (source.stem + ".ipynb")
        if EXECUTED:
            executed = Path(EXECUTED) / target.name
            if not executed.is_file():
                raise FileNotFoundError(
                    f"INFERASIM_DOCS_NOTEBOOKS={EXECUTED}: no executed {target.name} there"
                )
            shutil.copyfile(executed, target)
            continue
        text = nbformat.writes(jupytext.read(source))
        if not target.is_file() or target.read_text() != text:
            target.write_text(text)  # unchanged sources keep their file (and cache entry)


_notebook_pages()
