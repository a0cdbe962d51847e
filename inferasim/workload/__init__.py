"""Workloads: one pandas-backed table of requests and the sources that build it.

* :class:`Workload` (:mod:`inferasim.workload.core`): the table, its block
  hash ids and the operations on it;
* sources: :mod:`~inferasim.workload.synthetic` (seeded generators),
  :mod:`~inferasim.workload.tabular` (CSV/JSON length files),
  :mod:`~inferasim.workload.mooncake` (Mooncake traces),
  :mod:`~inferasim.workload.traces` (the FAST'25 traces by name);
* :mod:`~inferasim.workload.loaders`: the command line's workload flags.

Examples
--------
>>> from inferasim.workload import Workload
>>> len(Workload.from_requests([0, 10], [512, 512], [8, 8]))
2
"""

from __future__ import annotations

from inferasim.workload.core import Workload

__all__ = ["Workload"]
