"""Eviction policies of the prefix cache: the :class:`EvictionPolicy` protocol.

``Simulator(eviction=...)`` takes a built-in policy by name (``"lru"``,
``"fifo"``, ``"lfu"``, ``"length_aware"``; see :mod:`inferasim.sim.cache`)
or an object following this protocol. The prefix cache tells the policy
what happens to its blocks and asks it which evictable block goes next;
each replica gets its own copy of the object (``copy.deepcopy``).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["EvictionPolicy"]


@runtime_checkable
class EvictionPolicy(Protocol):
    """What the prefix cache tells an eviction policy, and asks it.

    A cached block (a hash id) is *inserted* when a sequence computes it,
    becomes *evictable* (:meth:`add`) when no running sequence uses it any
    more, leaves the evictable set when a sequence reuses it
    (:meth:`discard`, then :meth:`hit`), and is *forgotten* when evicted.
    :meth:`pop` chooses the victim among the evictable blocks; ``len()`` is
    how many are evictable.

    Examples
    --------
    Most recently used first (MRU), a policy no engine ships:

    >>> class MostRecentFirst:
    ...     def __init__(self):
    ...         self.order = {}
    ...     def inserted(self, h, pos=0): pass
    ...     def hit(self, h): pass
    ...     def add(self, h): self.order[h] = None
    ...     def discard(self, h): del self.order[h]
    ...     def forget(self, h): pass
    ...     def pop(self):
    ...         h = next(reversed(self.order)); del self.order[h]; return h
    ...     def __len__(self): return len(self.order)
    >>> isinstance(MostRecentFirst(), EvictionPolicy)
    True
    >>> import inferasim as ism
    >>> wl = ism.Workload.from_synthetic(300, rate=20.0, input_len=1024, output_len=8,
    ...                                  num_prefixes=8, prefix_len=512, seed=0)
    >>> run = lambda ev: ism.Simulator(kv_tokens=16 * 512, eviction=ev,
    ...     cost_model=ism.LinearCostModel()).run(wl, progress=False).summary()
    >>> bool(run(MostRecentFirst())["token_hit_ratio"] != run("lru")["token_hit_ratio"])
    True
    """

    def inserted(self, h: int, pos: int = 0) -> None:
        """Block ``h`` entered the cache (``pos``: its 0-based place in its prompt)."""
        ...

    def hit(self, h: int) -> None:
        """A sequence reused block ``h``."""
        ...

    def add(self, h: int) -> None:
        """Block ``h`` became evictable (no running sequence uses it)."""
        ...

    def discard(self, h: int) -> None:
        """Evictable block ``h`` is in use again."""
        ...

    def forget(self, h: int) -> None:
        """Block ``h`` was evicted (after :meth:`pop` chose it)."""
        ...

    def pop(self) -> int:
        """Choose, remove and return the evictable block to evict."""
        ...

    def __len__(self) -> int:
        """Evictable blocks."""
        ...
