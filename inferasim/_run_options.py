"""The options of :meth:`Simulator.run`, for the tools that run simulations for the user.

:func:`inferasim.sweep`, :func:`inferasim.plan.max_rate`,
:func:`inferasim.plan.min_replicas` and
:func:`inferasim.sim.compare_topologies` take a ``run={...}`` mapping that
they pass to every :meth:`~inferasim.sim.Simulator.run` call; this module
checks its keys, once, with one message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["RUN_OPTIONS", "run_options"]

#: The keyword options of :meth:`inferasim.sim.Simulator.run`.
RUN_OPTIONS: tuple[str, ...] = ("closed_loop", "think_time", "timeline_ms", "progress")


def run_options(run: Mapping[str, Any] | None, *, progress: bool = True) -> dict[str, Any]:
    """``run=`` as a dict of :meth:`Simulator.run` options, after checking its keys.

    Parameters
    ----------
    run : mapping, optional
        Options by name (None: none).
    progress : bool, default True
        Whether the caller lets ``progress`` through (:func:`inferasim.sweep`
        shows one bar of its own and does not).

    Returns
    -------
    dict

    Raises
    ------
    TypeError
        When ``run`` is not a mapping.
    ValueError
        For a key that is not a run option (or ``progress`` where not allowed).

    Examples
    --------
    >>> run_options({"closed_loop": True, "think_time": 500.0})
    {'closed_loop': True, 'think_time': 500.0}
    >>> run_options({"replicas": 2})
    Traceback (most recent call last):
    ...
    ValueError: run= takes options of Simulator.run (closed_loop, think_time, timeline_ms, progress), got 'replicas'; simulator settings belong to the Simulator
    """
    if run is None:
        return {}
    if not isinstance(run, Mapping):
        raise TypeError(f"run= must be a dict of Simulator.run options, got {run!r}")
    allowed = RUN_OPTIONS if progress else tuple(o for o in RUN_OPTIONS if o != "progress")
    for key in run:
        if key == "progress" and not progress:
            raise ValueError("run= sets 'progress': sweep runs simulations without their own bars")
        if key not in allowed:
            raise ValueError(
                f"run= takes options of Simulator.run ({', '.join(allowed)}), got {key!r}; "
                "simulator settings belong to the Simulator"
            )
    return dict(run)
