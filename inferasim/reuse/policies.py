"""Tiered prefix caches with per-tier write policies, replayed without timing.

The engine's KV tiers (:class:`inferasim.sim.Tier`) say how blocks reach
them: an *evict* tier takes what the level directly above evicts, a
*through* tier every block a prefill computes (and, with
``publish="all"``, the blocks a replica loads from its other tiers); a tier
may be one store per replica or one shared by the fleet.
:func:`replay_tiers` replays a workload through such a stack request by
request, each finishing before the next starts: the timing-free limit of
the simulator (huge bandwidths, no latency, requests far apart), which the
simulator equals exactly on workloads where its memory holds nothing but
the running request's blocks (tests/test_sim_write_policies.py).

One request on replica ``p``, HBM ``C`` blocks per replica:

1. **Lookup.** The leading run of the prompt's first ``(input_len - 1) //
   block_size`` blocks found in ``p``'s HBM or in a tier ``p`` sees (its
   own stores and the shared ones, top first; a block counts in the first
   tier holding it). The run ends at a block in none of them, or at an id
   repeated below HBM.
2. **Loads.** Tier by tier, the blocks found there are taken: a per-replica
   evict tier gives them up (a block lives in at most one of HBM and those
   tiers), a shared or through tier keeps its copy and refreshes it. Then
   every through tier with ``publish="all"`` (by default the shared ones) is
   written the blocks taken from the other tiers, in tier order.
3. **Room.** The request holds ``ceil((input_len + output_len - 1) /
   block_size)`` blocks at its peak; HBM evicts as many of its least
   recently used blocks as needed to fit them (never the request's own
   hits), LRU first, into the first tier if it is an evict tier.
4. **Compute.** The prompt's full blocks after the run that HBM lacks are
   computed, cached in HBM and written, in prompt order, to every through
   tier (top first).
5. **Release.** The request's cached blocks become the most recent in HBM,
   tail first (its first block the most recent).

A write is one put at a time in LRU order (a block the tier holds is only
refreshed); a tier's victims go on to the next tier if that one is an evict
tier and are dropped otherwise (and by the last tier). A tier with less than
one block of capacity is skipped.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from inferasim.reuse._result import check_capacity
from inferasim.workload import Workload

__all__ = ["replay_tiers"]

_WRITES = ("evict", "through")
_PUBLISH = ("computed", "all")


class _Spec:
    """One tier as the replay needs it (from any object with the Tier fields)."""

    __slots__ = ("name", "blocks", "shared", "write", "publish")

    def __init__(self, tier: Any, k: int, block_size: int) -> None:
        where = f"tiers[{k}]"
        try:
            self.name = str(tier.name)
            cap = tier.capacity_tokens
            self.shared = bool(tier.shared)
            self.write = tier.write if tier.write is not None else (
                "through" if self.shared else "evict"
            )
            self.publish = getattr(tier, "publish", None)
            if self.publish is None:  # (the Tier default: a shared tier publishes all)
                self.publish = "all" if self.shared else "computed"
        except AttributeError as exc:
            raise TypeError(
                f"{where} must have name, capacity_tokens, shared and write (an "
                f"inferasim.sim.Tier), got {tier!r}"
            ) from exc
        if self.name == "hbm" or not self.name.isidentifier():
            raise ValueError(f"{where}.name must be a Python identifier other than 'hbm', "
                             f"got {self.name!r}")
        self.blocks = check_capacity(cap, f"{where}.capacity_tokens") // block_size
        if self.write not in _WRITES:
            raise ValueError(f"{where}.write must be one of {_WRITES}, got {self.write!r}")
        if self.publish not in _PUBLISH:
            raise ValueError(f"{where}.publish must be one of {_PUBLISH}, got {self.publish!r}")


class _Stack:
    """The stores of every tier (one per replica, or one shared) and the write rule."""

    def __init__(self, specs: list[_Spec], replicas: int) -> None:
        self.specs = specs
        self.stores: list[list[OrderedDict[Any, None]]] = [
            [OrderedDict()] if s.shared else [OrderedDict() for _ in range(replicas)]
            for s in specs
        ]
        self.active = [k for k, s in enumerate(specs) if s.blocks > 0]
        evict = [s.write == "evict" for s in specs]
        below = [next((j for j in self.active if j > k), -1) for k in range(len(specs))]
        self.below = [j if j >= 0 and evict[j] else -1 for j in below]
        self.first_evict = self.active[0] if self.active and evict[self.active[0]] else -1
        self.through = [k for k in self.active if not evict[k]]
        self.publish = [k for k in self.through if specs[k].publish == "all"]  # (through only)
        self.exclusive = [not s.shared and evict[k] for k, s in enumerate(specs)]

    def store(self, k: int, p: int) -> OrderedDict[Any, None]:
        return self.stores[k][0 if self.specs[k].shared else p]

    def where(self, h: Any, p: int) -> int:
        for k in self.active:
            if h in self.store(k, p):
                return k
        return -1

    def write(self, k: int, p: int, ids: list[Any]) -> None:
        """Put ``ids`` into tier ``k`` (as replica ``p`` sees it), one at a time;
        cascade the victims."""
        store = self.store(k, p)
        cap = self.specs[k].blocks
        down: list[Any] = []
        for h in ids:
            if h in store:
                store.move_to_end(h)
                continue
            store[h] = None
            if len(store) > cap:
                down.append(store.popitem(last=False)[0])
        nxt = self.below[k]
        if down and nxt >= 0:
            self.write(nxt, p, down)

    def take(self, k: int, p: int, ids: list[Any]) -> None:
        store = self.store(k, p)
        for h in ids:
            if self.exclusive[k]:
                del store[h]
            else:
                store.move_to_end(h)

    def publish_loaded(self, p: int, by_tier: list[list[Any]]) -> None:
        """Every tier publishing loaded blocks is written those of the other tiers
        (in tier order), once every take is done."""
        for j in self.publish:
            ids = [h for k, hs in enumerate(by_tier) if k != j for h in hs]
            if ids:
                self.write(j, p, ids)


def _assignment(assign: object, n: int, replicas: int) -> list[int]:
    if isinstance(assign, str):
        if assign != "round_robin":
            raise ValueError(
                f"assign must be 'round_robin' or one replica index per request, got {assign!r}"
            )
        return [i % replicas for i in range(n)]
    out = np.asarray(assign)
    if out.shape != (n,) or not np.issubdtype(out.dtype, np.integer):
        raise ValueError(
            f"assign must hold one integer replica index per request ({n}), got shape "
            f"{out.shape} and dtype {out.dtype}"
        )
    if n and (out.min() < 0 or out.max() >= replicas):
        raise ValueError(f"assign holds replica indices outside 0..{replicas - 1}")
    return out.tolist()


def replay_tiers(
    workload: Workload,
    hbm_tokens: int,
    tiers: Sequence[Any],
    *,
    replicas: int = 1,
    assign: object = "round_robin",
) -> pd.DataFrame:
    """Per-request hits of HBM and every tier under the tiers' write policies.

    The replay of the module docstring: ``replicas`` HBM caches of
    ``hbm_tokens`` each, above ``tiers`` (top first) whose ``write``
    (``"evict"`` or ``"through"``), ``publish`` and ``shared`` are those of
    :class:`inferasim.sim.Tier`; requests in arrival order, each on the
    replica ``assign`` gives it, each done before the next starts.

    Parameters
    ----------
    workload : Workload
        A workload with hash ids.
    hbm_tokens : int
        HBM capacity of one replica, in tokens (whole blocks count); at least
        the peak blocks of every request.
    tiers : sequence of Tier
        The lower tiers, top first: objects with ``name``, ``capacity_tokens``
        (per replica, or in all when ``shared``), ``shared``, ``write`` and
        ``publish``, such as :class:`inferasim.sim.Tier`.
    replicas : int, default 1
        Number of replicas.
    assign : "round_robin" or array of int, default "round_robin"
        The replica of each request: request ``i`` on ``i % replicas``, or
        given (e.g. a simulation's ``requests["replica"]``).

    Returns
    -------
    pandas.DataFrame
        One row per request (index ``request_id``): ``replica``,
        ``input_len``, ``hbm_hit_tokens``, ``<name>_hit_tokens`` for every
        tier, and ``hit_tokens`` (their sum). ``frame.attrs`` holds
        ``token_hit_ratio`` (of ``sum(input_len)``) and ``tier_hit_ratio``
        (a dict: ``"hbm"`` and every tier name to its share).

    Raises
    ------
    WorkloadError
        When the workload has no hash ids.
    ValueError
        On a bad capacity, policy or assignment, or a request whose peak
        blocks exceed ``hbm_tokens``.

    Examples
    --------
    Block size 1, HBM 2 blocks on each of 2 replicas, round robin, a pool
    written through. R0 [1, 2, 9] on replica 0 writes 1, 2 and 9 to the
    pool; R1 [1, 2, 8] on replica 1 finds 1 and 2 there (its third block is
    computed: a hit run stops before the last token's block).

    >>> from inferasim.sim import Tier
    >>> wl = Workload.from_requests([0, 1], [3, 3], [1, 1], [[1, 2, 9], [1, 2, 8]],
    ...                             block_size=1)
    >>> pool = Tier("pool", 100, 1.0, 1.0, shared=True)           # write="through"
    >>> df = replay_tiers(wl, 3, [pool], replicas=2)
    >>> df["pool_hit_tokens"].tolist(), df.attrs["token_hit_ratio"]
    ([0, 2], 0.3333333333333333)

    With ``write="evict"`` the pool sees only HBM's evictions: nothing here.

    >>> evict = Tier("pool", 100, 1.0, 1.0, shared=True, write="evict")
    >>> replay_tiers(wl, 3, [evict], replicas=2)["pool_hit_tokens"].tolist()
    [0, 0]
    """
    if isinstance(replicas, bool) or not isinstance(replicas, int | np.integer) or replicas < 1:
        raise ValueError(f"replicas must be an int >= 1, got {replicas!r}")
    ids_flat, offsets = workload.hash_ids, workload.offsets  # (raises without hash ids)
    bs = workload.block_size
    cap = check_capacity(hbm_tokens, "hbm_tokens") // bs
    specs = [_Spec(t, k, bs) for k, t in enumerate(tiers)]
    names = [s.name for s in specs]
    if len(set(names)) < len(names):
        raise ValueError(f"tier names must be unique, got {names}")
    stack = _Stack(specs, int(replicas))
    n = len(workload)
    where = _assignment(assign, n, int(replicas))
    P = workload.input_len.tolist()
    out_len = workload.output_len.tolist()
    flat = ids_flat.tolist()
    off = offsets.tolist()
    hbm: list[OrderedDict[Any, None]] = [OrderedDict() for _ in range(int(replicas))]
    hits = np.zeros((n, 1 + len(specs)), dtype=np.int64)
    for i in range(n):
        p = where[i]
        cache = hbm[p]
        ids = flat[off[i] : off[i + 1]]
        full = min(len(ids), P[i] // bs)
        limit = min(len(ids), (P[i] - 1) // bs)
        peak = -(-(P[i] + out_len[i] - 1) // bs)
        if peak > cap:
            raise ValueError(
                f"request {i} holds {peak} blocks at its peak, more than hbm_tokens "
                f"({cap} blocks of {bs} tokens)"
            )
        # 1. lookup
        pinned: list[Any] = []
        by_tier: list[list[Any]] = [[] for _ in specs]
        seen: set[Any] = set()
        r = 0
        while r < limit:
            h = ids[r]
            if h in cache:
                pinned.append(h)
            else:
                k = stack.where(h, p)
                if k < 0 or h in seen:
                    break
                seen.add(h)
                by_tier[k].append(h)
            r += 1
        hits[i, 0] = len(pinned) * bs
        # 2. loads
        for k, hs in enumerate(by_tier):
            if hs:
                hits[i, 1 + k] = len(hs) * bs
                stack.take(k, p, hs)
        stack.publish_loaded(p, by_tier)
        # 3. room
        held = set(pinned)
        over = peak - len(held) - (cap - len(cache))
        if over > 0:
            victims = []
            for h in cache:
                if h not in held:
                    victims.append(h)
                    if len(victims) == over:
                        break
            for h in victims:
                del cache[h]
            if stack.first_evict >= 0:
                stack.write(stack.first_evict, p, victims)
        # loaded blocks are cached (pinned) when delivered
        cached = set(held)
        for hs in by_tier:
            for h in hs:
                cache[h] = None
                cached.add(h)
        # 4. compute
        computed = []
        for h in ids[r:full]:
            if h not in cache:
                cache[h] = None
                cached.add(h)
                computed.append(h)
        if computed:
            for k in stack.through:
                stack.write(k, p, computed)
        # 5. release, tail first
        for h in reversed(ids[:full]):
            if h in cached:
                cache.move_to_end(h)
                cached.discard(h)
    cols = ["hbm", *names]
    data: dict[str, Any] = {"replica": np.asarray(where, dtype=np.int64),
                            "input_len": workload.input_len.astype(np.int64)}
    for j, name in enumerate(cols):
        data[f"{name}_hit_tokens"] = hits[:, j]
    data["hit_tokens"] = hits.sum(axis=1)
    frame = pd.DataFrame(data)
    frame.index.name = "request_id"
    total = float(workload.input_len.sum())
    frame.attrs.update(
        token_hit_ratio=float(hits.sum() / total) if total else 0.0,
        tier_hit_ratio={c: float(hits[:, j].sum() / total) if total else 0.0
                        for j, c in enumerate(cols)},
    )
    return frame
