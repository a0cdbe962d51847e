"""Which of the simulator's modules run compiled (mypyc) and which interpreted.

``pip install`` compiles the modules in :data:`NATIVE_MODULES` with mypyc
when a C compiler is available (``setup.py``; ``INFERASIM_PURE_PYTHON=1``
skips it). They are ordinary type-annotated Python either way: compiled,
the same code runs several times fewer interpreter instructions and gives
the same frames bit for bit (``tests/test_native.py`` compares the two).
"""

from __future__ import annotations

import warnings
from importlib.machinery import PathFinder
from pathlib import Path

__all__ = ["NATIVE_MODULES", "native_modules"]

#: The modules ``setup.py`` compiles (it reads this tuple from the source).
NATIVE_MODULES = (
    "inferasim.sim.kernels",
    "inferasim.sim._roofline_kernel",
    "inferasim.sim.sequence",
    "inferasim.sim.recorder",
    "inferasim.sim.decode",
    "inferasim.sim.transfer",
    "inferasim.sim.cache",
    "inferasim.sim.tiers",
    "inferasim.sim.kv",
    "inferasim.sim.scheduler",
    "inferasim.sim.stretch",
    "inferasim.sim.replica",
    "inferasim.sim.views",
    "inferasim.sim.routing",
    "inferasim.sim.handoff",
    "inferasim.sim.arrivals",
    "inferasim.sim.fleet",
    "inferasim.sim.loop",
)


def native_modules() -> dict[str, str]:
    """How each module of :data:`NATIVE_MODULES` runs: ``"compiled"`` or ``"interpreted"``.

    Returns
    -------
    dict
        Module name to ``"compiled"`` (a mypyc extension was imported) or
        ``"interpreted"`` (the pure-Python source was imported).

    Examples
    --------
    >>> status = native_modules()
    >>> sorted(set(status.values()) - {"compiled", "interpreted"})
    []
    >>> list(status)[0]
    'inferasim.sim.kernels'
    """
    return {
        name: "interpreted" if _origin(name).suffix == ".py" else "compiled"
        for name in NATIVE_MODULES
    }


def _origin(name: str) -> Path:
    """The file the import system loads for ``name`` (an extension before a .py).

    (Not ``module.__file__``: a mypyc module sharing a library reports a wrong one.)
    """
    spec = PathFinder.find_spec(name.rsplit(".", 1)[1], [str(Path(__file__).parent)])
    if spec is None or spec.origin is None:
        raise ImportError(f"{name} is missing from {Path(__file__).parent}")
    return Path(spec.origin)


def warn_if_stale() -> list[str]:
    """Warn when a compiled module is older than its source (internal).

    In a source checkout (an editable install) an edited or checked-out ``.py``
    does not reach the compiled extension beside it until the package is built
    again; this names such modules once, at import. Returns their names.
    """
    stale: list[str] = []
    if not (Path(__file__).parents[2] / "setup.py").exists():
        return stale  # an installed wheel: built from the source it carries
    here = Path(__file__).parent
    # (the compiled code is in the shared library; a module's own extension is a shim
    # that is not rebuilt when only the code changes)
    shared = [p.stat().st_mtime for p in here.glob("*__mypyc*")]
    for name in NATIVE_MODULES:
        so = _origin(name)
        src = so.parent / (name.rsplit(".", 1)[1] + ".py")
        built = max([so.stat().st_mtime, *shared]) if so.suffix != ".py" else 0.0
        if so.suffix != ".py" and src.exists() and src.stat().st_mtime > built:
            stale.append(name)
    if stale:
        warnings.warn(
            f"compiled modules older than their source: {', '.join(stale)}; the compiled "
            f"code runs. Rebuild with `pip install -e .` (or remove the .so files to run "
            f"the source interpreted)",
            RuntimeWarning,
            stacklevel=2,
        )
    return stale
