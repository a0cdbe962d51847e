"""Build hook: compile the simulator's inner loop with mypyc (optional).

The modules in ``inferasim.sim.native.NATIVE_MODULES`` (the simulator's hot
path, all internal: mypyc drops docstrings from what it compiles) are plain,
type-annotated Python. When a C compiler is available, ``pip install``
compiles them with mypyc (the same type hints, enforced at run time; same
results bit for bit, see tests/test_native.py); without one, or with ``INFERASIM_PURE_PYTHON=1`` in the environment, the
package installs as pure Python and runs the same code interpreted, slower.
``inferasim.sim.native_modules()`` tells which modules run compiled.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).parent


def native_sources() -> list[str]:
    """The files of ``inferasim.sim.native.NATIVE_MODULES`` (read, not imported)."""
    tree = ast.parse((HERE / "inferasim/sim/native.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "NATIVE_MODULES":
            return [name.replace(".", "/") + ".py" for name in ast.literal_eval(node.value)]
    raise RuntimeError("inferasim/sim/native.py defines no NATIVE_MODULES")


def native_extensions() -> list:
    if os.environ.get("INFERASIM_PURE_PYTHON", "") not in ("", "0"):
        return []
    from mypyc.build import mypycify

    extensions = mypycify(native_sources(), opt_level="3", group_name="inferasim.sim._native")
    for ext in extensions:
        ext.optional = True  # no C compiler: install the pure-Python package instead
    return extensions


setup(ext_modules=native_extensions())
