"""KV tiers behind a replica's HBM: host DRAM, SSD, a shared pool.

:class:`~inferasim.sim.tierconfig.Tier` configures one tier
(``Simulator(tiers=[...])``, top first). Here a :class:`TierStore` holds a
tier's block ids in LRU order and :class:`ReplicaTiers` is one replica's
window on the tiers: its own stores
for per-replica tiers, the one shared store for a ``shared=True`` tier, and
its own :class:`~inferasim.sim.transfer.Link` to each tier.

Semantics (also in the :mod:`inferasim.sim` docstring):

* **Write policies.** Each tier says how blocks reach it
  (:class:`~inferasim.sim.tierconfig.Tier` ``write``). An *evict* tier takes
  what the level directly above it evicts: HBM's evictions for the first
  tier, the LRU victims of the tier above for the others (the last tier
  drops its own). A *through* tier takes every full block a prefill
  computes, in one write per step when the step ends (and, with
  ``publish="all"``, the default of a shared tier, the blocks the replica
  loads from its other tiers, when the load starts); it takes no evictions from above (it had its copy
  when the block was computed), and its victims go on to the tier below
  only if that one is an evict tier.
* **Copies.** A load takes its blocks out of a per-replica evict tier (a
  block lives in at most one of HBM and such tiers); a shared tier or a
  through tier keeps its copy (every replica may want it) and refreshes its
  LRU position. Writing a block a tier already holds only refreshes it (no
  bytes: the writer checks first, as Mooncake Store's ``exists`` before
  ``put``).
* **LRU order.** A tier's most recent block is the one written (or
  refreshed, or loaded from a keeping tier) last; blocks of one HBM
  eviction enter in eviction order (LRU first), so the HBM's order carries
  down; the blocks of one write-through enter in prompt order, the
  requests of one step in step order.
* **Links.** Every transfer is on the replica's own link to the tier:
  reads and writes share it (processor sharing) unless the tier is
  ``duplex``, which gives writes a link of their own. No step waits for a
  write.
* **A pool-wide budget.** A shared tier with ``pool_gbps`` also has one
  link for the whole fleet (:class:`PoolLink`, the store service's aggregate
  bandwidth): every read and write of the tier runs on the replica's own
  link and, at the same time, on the pool's, and is delivered when both are
  done (the slower of the two; a transfer alone on both takes
  ``bytes / min(own, pool)``, ``n`` replicas reading at once take ``n`` times
  the pool's share). The pool's deliveries are counted off the owners of
  whichever replica takes them.
* **Zero capacity.** A tier with ``capacity_tokens < block_size`` holds
  nothing and is skipped: a run with such tiers equals a run without.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from inferasim.sim.sequence import Seq
from inferasim.sim.tierconfig import Tier, publishes_loaded
from inferasim.sim.transfer import Link, SharedLink

# Internal (compiled with mypyc, see setup.py): the public class is Tier.
__all__: list[str] = []


def _load_order(o: Seq) -> tuple[float, int]:
    """Sort key of load owners: delivery time, then request id."""
    return (o.load_end, o.rid)


class TierStore:
    """Block ids of one tier in LRU order, with a capacity in blocks (internal).

    ``blocks`` maps each id held to its *stamp* and iterates in LRU order (a
    refresh re-inserts the id); ``order`` lists the ids in the order they
    were (re)inserted, stale entries included: its entry ``i`` has stamp
    ``base + i`` and is live while ``blocks`` holds that stamp for its id;
    the entries before ``head`` are all gone. (A plain dict and a list: cheaper
    compiled than an OrderedDict, the same order.)

    Examples
    --------
    >>> s = TierStore(2)
    >>> s.put(1), s.put(2), s.put(1), s.put(3)   # 1 refreshed: 2 is the LRU
    (None, None, None, 2)
    >>> list(s.blocks), s.peak
    ([1, 3], 2)
    """

    __slots__ = ("capacity", "blocks", "order", "base", "head", "peak", "changes", "log")

    def __init__(self, capacity: int, log: bool = False) -> None:
        self.capacity = capacity
        self.blocks: dict[int, int] = {}
        self.order: list[Any] = []
        self.base = 0  # stamp of order[0]
        self.head = 0  # order[:head] are stale
        self.peak = 0
        # (time, size) after each change, for a shared tier's timeline
        self.log: list[tuple[float, int]] | None = [] if log else None

    def put(self, h: int) -> int | None:
        """Insert (or refresh) ``h`` as the most recent; return the evicted id, if any."""
        blocks = self.blocks
        if h in blocks:
            self.refresh(h)
            return None
        blocks[h] = self.base + len(self.order)
        self.order.append(h)
        if len(blocks) > self.capacity:
            out: int = self.pop_oldest(1)[0]
            self.compact()
            return out
        if len(blocks) > self.peak:
            self.peak = len(blocks)
        return None

    def put_all(self, ids: list[Any], distinct: bool = False) -> tuple[int, list[Any], bool]:
        """Insert (or refresh) ``ids`` in order, as :meth:`put` one at a time would.

        Returns how many were new, the ids evicted (LRU first) and whether
        those are distinct (evicted in one batch; one put at a time may evict
        an id, insert it again and evict it again). ``distinct``: the caller
        knows ``ids`` are distinct (blocks evicted from one store).
        """
        blocks: dict[Any, int] = self.blocks
        batch = True  # none held yet (a loop: cheaper compiled than keys().isdisjoint)
        for h in ids:
            if h in blocks:
                batch = False
                break
        if batch and not distinct:
            batch = len(set(ids)) == len(ids)
        down: list[Any] = []
        if batch:
            # all new (the usual case): insert in order, then drop the overflow from
            # the LRU end (the same as one put at a time)
            order = self.order
            stamp = self.base + len(order)
            for h in ids:
                blocks[h] = stamp
                order.append(h)
                stamp += 1
            over = len(blocks) - self.capacity
            if over > 0:
                down = self.pop_oldest(over)
                self.peak = self.capacity
            elif len(blocks) > self.peak:
                self.peak = len(blocks)
            self.compact()
            return len(ids), down, True
        new = 0
        for h in ids:
            if h not in blocks:
                new += 1
            out = self.put(h)
            if out is not None:
                down.append(out)
        self.compact()
        return new, down, False

    def refresh(self, h: object) -> None:
        """Make ``h`` (held) the most recent."""
        blocks: dict[Any, int] = self.blocks
        del blocks[h]
        blocks[h] = self.base + len(self.order)
        self.order.append(h)

    def pop_oldest(self, count: int) -> list[Any]:
        """Drop the ``count`` least recent ids (at most the ids held); return them,
        LRU first."""
        blocks: dict[Any, int] = self.blocks
        order = self.order
        base = self.base
        i = self.head
        out: list[Any] = []
        while len(out) < count:
            h = order[i]
            if blocks.get(h, -1) == base + i:
                del blocks[h]
                out.append(h)
            i += 1
        self.head = i
        return out

    def compact(self) -> None:
        """Trim the stale entries of ``order`` once they outnumber the live ones
        (amortized: each trim drops at least half of them)."""
        blocks = self.blocks
        order = self.order
        stale = len(order) - len(blocks)
        if stale <= len(blocks) + 64:
            return
        head = self.head
        if 2 * head >= stale:  # most of them are gone from the front: cut those
            del order[:head]
            self.base += head
            self.head = 0
            return
        # (refreshed or taken ids in between: renumber; blocks is in LRU order)
        s = 0
        for h in blocks:
            blocks[h] = s
            s += 1
        self.order = list(blocks)
        self.base = 0
        self.head = 0


def all_distinct(ids: list[Any], n: int = -1) -> bool:
    """Whether no id repeats in ``ids[:n]`` (all of ``ids`` when ``n`` is negative;
    then a walk of :meth:`ReplicaTiers.run` needs no record of the ids it counted).

    Examples
    --------
    >>> all_distinct([3, 1, 2]), all_distinct([3, 1, 3]), all_distinct([3, 1, 3], 2)
    (True, False, True)
    """
    if n < 0 or n > len(ids):
        n = len(ids)
    # (strictly increasing ids repeat none: Mooncake's hash ids are numbered in
    # order of first appearance, so a prompt's run of them always increases, and
    # the check needs no set: the tiered conversation run built 27,341 sets here
    # and in SharedLookup, and took 5,231M instructions with them, 5,193M without)
    return _increasing(ids, n) or len(set(ids[:n])) == n


def _increasing(ids: list[int], n: int) -> bool:
    """Whether ``ids[:n]`` increases strictly (compiled: the ints are compared unboxed)."""
    for j in range(1, n):
        if ids[j] <= ids[j - 1]:
            return False
    return True


class SharedLookup:
    """Where each block of one request sits in the shared tiers, looked up once
    for all the replicas whose tiers are all shared (they see the same stores),
    and only as far as some replica's walk reaches (internal).

    Examples
    --------
    >>> pool = {"pool": TierStore(8)}
    >>> pool["pool"].put(5), pool["pool"].put(6)
    (None, None)
    >>> rt = ReplicaTiers([Tier("pool", 128, 1.0, 1.0, shared=True)], pool, 16, 1.0)
    >>> look = SharedLookup([5, 6, 7, 5, 6], 5)
    >>> rt.run([5, 6, 7, 5, 6], 0, 5, {}, look), rt.run([5, 6, 7, 5, 6], 1, 5, {7: 0, 5: 0}, look)
    ((2, [2], []), (4, [1], [7, 5]))
    >>> look.known  # (the repeats of 5 and 6 are misses from the start)
    [0, 0, -1, -1, -1]
    """

    __slots__ = ("ids", "known")

    def __init__(self, ids: list[Any], limit: int) -> None:
        self.ids = ids  # (Any: an id goes to a dict as the object it is, never re-boxed)
        # where() by position; -2: not looked up yet; -1 also for a repeated id
        known = [-2] * limit
        if not all_distinct(ids, limit):
            first: set[Any] = set()
            for j in range(limit):
                h = ids[j]
                if h in first:
                    known[j] = -1
                first.add(h)
        self.known: list[int] = known

    def where_at(self, tiers: ReplicaTiers, j: int) -> int:
        """``tiers.where(ids[j])``, looked up once per position; -1 for an id
        repeated from an earlier position (a repeat ends a run below HBM: an
        earlier copy is either in HBM, and then so is this one, or was counted
        below HBM already)."""
        k = self.known[j]
        if k == -2:
            k = tiers.where(self.ids[j])
            self.known[j] = k
        return k


class PoolLink:
    """The fleet-wide link of a shared tier with ``pool_gbps`` (internal).

    ``link`` carries every replica's transfers to the tier; ``owners`` maps a
    read's transfer id to the replica's tiers and the sequence waiting for it
    (writes have none), so whichever replica takes a delivery counts it off.

    Examples
    --------
    >>> pool = PoolLink(Tier("pool", 64, 10.0, 10.0, shared=True, pool_gbps=1.0))
    >>> pool.link.gb_per_s
    1.0
    """

    __slots__ = ("link", "owners")

    def __init__(self, tier: Tier) -> None:
        gbps = tier.pool_gbps
        assert gbps is not None
        self.link = Link(gbps, tier.latency_us)
        self.owners: dict[int, tuple[ReplicaTiers, Seq]] = {}

    def drain(self, t: float) -> None:
        """Take the pool link's deliveries up to ``t``; count each read off its owner."""
        owners = self.owners
        for when, tid in self.link.pop_delivered(t):
            entry = owners.pop(tid, None)
            if entry is not None:
                entry[0].delivered(entry[1], when)


class ReplicaTiers:
    """One replica's tiers: stores (own or shared), links and traffic (internal).

    ``stores[k]``/``links[k]`` serve ``tiers[k]``; only tiers holding at
    least one block take part (``active``). ``pool_links`` holds the
    fleet-wide :class:`PoolLink` of each shared tier with ``pool_gbps``.
    """

    def __init__(
        self,
        tiers: Sequence[Tier],
        shared_stores: dict[str, TierStore],
        block_size: int,
        kv_bytes_per_token: float,
        pool_links: dict[str, PoolLink] | None = None,
        nic: str | None = None,
    ) -> None:
        self.tiers = tuple(tiers)
        self.n = len(self.tiers)
        # (the tiers' speeds as plain floats: read natively in the hot paths)
        self.read_gbps: list[float] = [float(t.read_gbps) for t in self.tiers]
        self.write_gbps: list[float] = [float(t.write_gbps) for t in self.tiers]
        self.block_bytes = float(kv_bytes_per_token) * block_size
        self.stores: list[TierStore] = []
        self.links: list[Link] = []  # reads (and writes, unless duplex)
        self.wlinks: list[Link] = []  # writes
        self.duplex_links: list[Link] = []  # the write links of duplex tiers
        for t in self.tiers:
            if t.shared:
                self.stores.append(shared_stores[t.name])
            else:
                self.stores.append(TierStore(t.capacity_tokens // block_size))
            # (the tier named ``nic`` carries the handoffs too: its write link is shared)
            link = SharedLink(t.read_gbps, t.latency_us) if t.name == nic and not t.duplex else (
                Link(t.read_gbps, t.latency_us))
            self.links.append(link)
            if t.duplex:
                link = SharedLink(t.write_gbps, t.latency_us) if t.name == nic else (
                    Link(t.write_gbps, t.latency_us))
                self.duplex_links.append(link)
            self.wlinks.append(link)
        self.active = [k for k in range(self.n) if self.stores[k].capacity > 0]
        # the fleet-wide link of each tier (None: the replica's own link alone)
        pl = pool_links if pool_links is not None else {}
        self.pools: list[PoolLink | None] = [pl.get(t.name) for t in self.tiers]
        self.pool_list: list[PoolLink] = [p for p in self.pools if p is not None]
        evict = [t.write == "evict" for t in self.tiers]
        # the active tiers written through (every computed block, at step end),
        # and those of them that also take the blocks loaded from other tiers
        self.through: list[int] = [k for k in self.active if not evict[k]]
        self.publish_loaded: list[int] = [
            k for k in self.through if publishes_loaded(self.tiers[k])
        ]
        # HBM's evictions go to the first active tier if it is an evict tier
        self.first_evict = self.active[0] if self.active and evict[self.active[0]] else -1
        self.pending: list[Any] = []  # computed blocks of the step under way
        self.loaded: list[tuple[int, list[Any]]] = []  # (tier, blocks) taken, to publish
        # (tier index, its blocks) of the active tiers, top first: the lookup order
        self.lookup: list[tuple[int, dict[int, int]]] = [
            (k, self.stores[k].blocks) for k in self.active
        ]
        self.zeros = [0] * self.n  # (a template for per-tier counts)
        # where each tier's victims go: the next active tier if it is an evict
        # tier (-1: dropped, by the last tier or above a through tier)
        below = [next((j for j in self.active if j > k), -1) for k in range(self.n)]
        self.below: list[int] = [j if j >= 0 and evict[j] else -1 for j in below]
        # whether HBM's evictions can reach a shared tier (through the evict tiers'
        # cascade): then a decode step that evicts writes what other replicas read
        self.evictions_shared = False
        k = self.first_evict
        while k >= 0:
            if self.tiers[k].shared:
                self.evictions_shared = True
            k = self.below[k]
        # a load takes its blocks out of the tier (per-replica evict tiers) or the
        # tier keeps its copy (shared or through tiers)
        self.exclusive: list[bool] = [not t.shared and evict[k] for k, t in enumerate(self.tiers)]
        # every tier shared: a request's place in them is the same from every
        # replica (the conductor looks it up once a request)
        self.all_shared = all(t.shared for t in self.tiers)
        self.bytes_read: list[float] = [0.0] * self.n
        self.bytes_written: list[float] = [0.0] * self.n
        # loads in flight: (tier, transfer id) -> owner (a sequence with ``loads_left``
        # and ``load_end``); owners whose loads are all delivered wait in ``ready``
        self.owner: dict[tuple[int, int], Seq] = {}
        self.ready: list[Seq] = []

    # ----------------------------------------------------------------- lookup
    def where(self, h: object) -> int:
        """Index of the first active tier holding ``h`` (in ``lookup`` order), or -1."""
        for k, blocks in self.lookup:
            if h in blocks:
                return k
        return -1

    def run(
        self,
        ids: list[int],
        start: int,
        limit: int,
        ref: dict,
        lookup: SharedLookup | None,
        distinct: bool = False,
    ) -> tuple[int, list[int], list[int]]:
        """The reusable run of ``ids[start:limit]`` that goes on below HBM.

        ``ref`` holds the ids resident in HBM. Walking from ``start``, a block
        in HBM is reused in place (it goes to ``mid``), a block in a lower tier
        is loaded from the first one holding it (``where``; counted in
        ``counts``); the run ends at a block in neither, or at an id repeated
        below HBM (its first copy is loaded already). Returns ``(end, counts,
        mid)``. Admission and the routers' estimates share this walk;
        ``lookup`` (only when every tier is shared) memoises ``where`` by
        position for all replicas routing one request; ``distinct``: the caller
        knows no id of ``ids`` repeats (:func:`all_distinct`), so none ends the
        run (the routers, which walk one request on every replica: on the
        conversation trace with DRAM and a pool, 0.8% of a run's instructions
        less; admission's walks, mostly short, would lose more looking than
        they gain).

        Examples
        --------
        >>> dram = Tier("dram", 64, read_gbps=50.0, write_gbps=50.0)
        >>> rt = ReplicaTiers([dram], {}, 16, 1e5)
        >>> rt.offload(0.0, [1, 2, 3])
        >>> rt.run([9, 1, 7, 2, 2, 3], 1, 6, {9: 1, 7: 0}, None)  # (the repeated 2 ends it)
        (4, [2], [7])
        """
        counts = [0] * self.n
        mid: list[int] = []
        seen: set[object] | None = None  # ids counted below HBM (made at the first one)
        # (ids as objects: dict and set lookups take them as they are, unboxed)
        objs: list[Any] = ids
        r = start
        while r < limit:
            h = objs[r]
            if h in ref:
                mid.append(h)
            else:
                if lookup is not None:  # (a repeat is a miss there already)
                    k = lookup.where_at(self, r)
                else:
                    k = self.where(h)
                    if k >= 0 and not distinct:
                        if seen is None:
                            seen = {h}
                        elif h in seen:
                            break
                        else:
                            seen.add(h)
                if k < 0:
                    break
                counts[k] = counts[k] + 1  # (an augmented item assignment is generic)
            r += 1
        return r, counts, mid

    def sizes(self) -> list[int]:
        """Blocks held now in each tier."""
        return [len(s.blocks) for s in self.stores]

    # ----------------------------------------------------------------- writes
    def _write(self, t: float, k: int, ids: list[int], distinct: bool = False) -> None:
        """Write ``ids`` into tier ``k`` at ``t`` (bytes for the ones it lacks);
        cascade its evictions down. ``distinct``: the caller knows the ids are
        distinct (blocks evicted from one store)."""
        store = self.stores[k]
        new, down, batch = store.put_all(ids, distinct)
        if self.below[k] < 0:  # the last tier (or one above a through tier) drops them
            down = []
        if store.log is not None:
            store.log.append((t, len(store.blocks)))
        if new:
            nbytes = new * self.block_bytes
            link = self.wlinks[k]
            link.start(t, nbytes, self.write_gbps[k])
            # take what the link delivered up to t (the new write ends after t; the
            # start advanced the link to t, as draining first would have)
            pending = link._pending
            if pending and pending[0][0] <= t:
                if link is self.links[k]:
                    self._drain(k, t)
                else:  # (a duplex write link: nobody waits for its deliveries)
                    link.pop_delivered(t)
            written = self.bytes_written
            written[k] = written[k] + nbytes
            pool = self.pools[k]
            if pool is not None:  # (the fleet-wide link carries it too)
                pool.link.start(t, nbytes)
                if pool.link._pending and pool.link._pending[0][0] <= t:
                    pool.drain(t)
        if down:
            self._write(t, self.below[k], down, batch)

    def offload(self, t: float, ids: list[int]) -> None:
        """Blocks evicted from HBM at ``t`` (LRU first) go to the first active tier,
        if it is an evict tier (a through tier had its copy when they were computed)."""
        if self.first_evict >= 0 and ids:
            self._write(t, self.first_evict, ids, True)

    def write_through_blocks(self, t: float, ids: list[int]) -> None:
        """Blocks a prefill step ending at ``t`` computed: kept for :meth:`flush`
        (one write per tier and step)."""
        self.pending.extend(ids)

    def flush(self, t: float) -> None:
        """The step ending at ``t`` is over: write its computed blocks (prompt
        order, the step's requests in order) to every through tier, in bulk.

        Examples
        --------
        >>> dram = Tier("dram", 64, read_gbps=50.0, write_gbps=50.0, write="through")
        >>> rt = ReplicaTiers([dram], {}, 16, 1e5)
        >>> rt.write_through_blocks(1.0, [1, 2]); rt.write_through_blocks(1.0, [3])
        >>> rt.flush(1.0)
        >>> list(rt.stores[0].blocks), rt.links[0].transfers   # one transfer of 3 blocks
        ([1, 2, 3], 1)
        """
        ids = self.pending
        if ids:
            self.pending = []
            for k in self.through:
                self._write(t, k, ids)

    # ------------------------------------------------------------------ loads
    def take(self, k: int, ids: list[int], t: float = 0.0) -> None:
        """Blocks of tier ``k`` about to be loaded at ``t``: an exclusive tier gives
        them up, a keeping (shared or through) tier refreshes them; the through
        tiers with ``publish="all"`` other than ``k`` are written them when the
        loads start (:meth:`start_loads`, after every take of the request)."""
        store = self.stores[k]
        objs: list[Any] = ids
        if self.exclusive[k]:
            blocks: dict[Any, int] = store.blocks
            for h in objs:
                del blocks[h]
        else:
            for h in objs:
                store.refresh(h)
        store.compact()
        if self.publish_loaded:  # (written when the loads start: every take is done)
            self.loaded.append((k, ids))

    def in_flight(self) -> bool:
        """Whether a transfer is in flight on any link (then a load estimate made
        now, :meth:`load_estimate_ms`, depends on when it is made)."""
        for link in self.links:
            if link.in_flight():
                return True
        for link in self.duplex_links:
            if link.in_flight():
                return True
        for pool in self.pool_list:
            if pool.link.in_flight():
                return True
        return False

    def load_estimate_ms(self, t: float, counts: list[int]) -> float:
        """When loads of ``counts[k]`` blocks from each tier, started at ``t``, would
        all be delivered (from ``t``, if nothing else starts on the links)."""
        worst = 0.0
        for k, c in enumerate(counts):
            if c:
                nbytes = c * self.block_bytes
                est = self.links[k].estimate_ms(t, nbytes, self.read_gbps[k])
                if est > worst:
                    worst = est
                pool = self.pools[k]
                if pool is not None:  # (the fleet-wide link too: the slower one)
                    est = pool.link.estimate_ms(t, nbytes)
                    if est > worst:
                        worst = est
        return worst

    def start_loads(self, t: float, counts: list[int], owner: Seq) -> list[tuple[int, int]]:
        """Start one read per tier with blocks to load for ``owner`` at ``t``; return
        the ``(tier, transfer id)`` pairs.

        The owner's count of loads in flight (``loads_left``) and its load times
        are set here, before any write: a write that starts at ``t`` on a link
        with one of these reads (a published block's victim cascading into the
        tier being read) takes that link's deliveries up to ``t``, and a read
        delivered then is counted off its owner at once.
        """
        out: list[tuple[int, int]] = []
        for k, c in enumerate(counts):
            if c:
                nbytes = c * self.block_bytes
                key = (k, self.links[k].start(t, nbytes, self.read_gbps[k]))
                self.owner[key] = owner
                out.append(key)
                self.bytes_read[k] = self.bytes_read[k] + nbytes
                pool = self.pools[k]
                if pool is not None:  # (also on the fleet-wide link: key tier n + k)
                    tid = pool.link.start(t, nbytes)
                    pool.owners[tid] = (self, owner)
                    out.append((self.n + k, tid))
        owner.loads_left = len(out)
        owner.load_start = owner.load_end = t
        if self.loaded:
            loaded, self.loaded = self.loaded, []
            for j in self.publish_loaded:  # the loaded blocks of the other tiers, tier order
                ids: list[Any] = [h for k, hs in loaded if k != j for h in hs]
                if ids:
                    self._write(t, j, ids, True)
        return out

    def cancel(self, t: float, keys: list[tuple[int, int]]) -> None:
        """Drop the loads ``keys`` (their owner was preempted) at ``t``."""
        n = self.n
        for key in keys:
            k = key[0]
            if k >= n:  # (a part on a fleet-wide link)
                pool = self.pools[k - n]
                assert pool is not None
                if pool.owners.pop(key[1], None) is not None:
                    pool.link.cancel(t, key[1])
            elif self.owner.pop(key, None) is not None:
                self.links[k].cancel(t, key[1])

    def _drain(self, k: int, t: float) -> None:
        """Take the deliveries of link ``k`` up to ``t``; owners done go to ``ready``."""
        delivered = self.links[k].pop_delivered(t)
        owner = self.owner
        if not owner:  # (only writes were in flight: nobody waits for them)
            return
        for when, tid in delivered:
            o = owner.pop((k, tid), None)
            if o is not None:
                self.delivered(o, when)

    def delivered(self, o: Seq, when: float) -> None:
        """One of ``o``'s loads was delivered at ``when``; ``o`` is ready after its last."""
        o.loads_left -= 1
        if when > o.load_end:
            o.load_end = when
        if not o.loads_left:
            self.ready.append(o)

    def _drain_all(self, t: float) -> None:
        """Take every link's deliveries up to ``t`` (read, duplex write and pool links)."""
        for k, link in enumerate(self.links):
            if link.in_flight():
                self._drain(k, t)
        for link in self.duplex_links:
            if link.in_flight():
                link.pop_delivered(t)
        for pool in self.pool_list:
            if pool.link.in_flight():
                pool.drain(t)

    def collect(self, t: float) -> list[Seq]:
        """Owners whose loads were all delivered by ``t``, by delivery time then id."""
        self._drain_all(t)
        out = self.ready
        if out:
            self.ready = []
            out.sort(key=_load_order)
        return out

    def next_delivery(self, t: float) -> float:
        """Earliest delivery after ``t`` on any link (a load or a write), inf if none;
        ``t`` itself when a load owner is already ready."""
        self._drain_all(t)
        if self.ready:
            return t
        best = math.inf
        for link in self.links:
            if link.in_flight():
                d = link.next_done()
                if d < best:
                    best = d
        for link in self.duplex_links:
            if link.in_flight():
                d = link.next_done()
                if d < best:
                    best = d
        for pool in self.pool_list:  # (any replica's: an early wake finds nothing)
            if pool.link.in_flight():
                d = pool.link.next_done()
                if d < best:
                    best = d
        return best

    def backlog_ms(self, t: float) -> float:
        """Link time the transfers in flight still need, over all this replica's links."""
        return (
            sum(link.backlog_ms(t) for link in self.links)
            + sum(link.backlog_ms(t) for link in self.duplex_links)
            + sum(pool.link.backlog_ms(t) for pool in self.pool_list)
        )


class HotReplicaTiers(ReplicaTiers):
    """:class:`ReplicaTiers` that copy hot shared blocks into the replica's own tier (internal).

    ``Simulator(replicate_hot_blocks=k)``: every block a load takes from a
    shared tier counts one read of it in ``reads[tier name]`` (one dict per
    shared tier, for the whole fleet); a block whose count then exceeds
    ``hot`` is also written into this replica's first own (not shared) tier
    when its load starts (bytes on that tier's link for the blocks it lacks,
    like an offload; no step waits for it). Lookup tries the replica's own
    tiers before the shared ones, so the copy is what a later request loads.
    """

    def __init__(
        self,
        tiers: Sequence[Tier],
        shared_stores: dict[str, TierStore],
        block_size: int,
        kv_bytes_per_token: float,
        *,
        hot: int,
        reads: dict[str, dict[int, int]],
        pool_links: dict[str, PoolLink] | None = None,
        nic: str | None = None,
    ) -> None:
        super().__init__(tiers, shared_stores, block_size, kv_bytes_per_token, pool_links, nic)
        self.hot = hot
        self.reads = [reads.setdefault(t.name, {}) if t.shared else None for t in self.tiers]
        own = [k for k in self.active if not self.tiers[k].shared]
        self.own = own[0] if own else -1
        self.order = own + [k for k in self.active if self.tiers[k].shared]
        # the scheduler's inlined lookups walk ``lookup``: own tiers first here too
        self.lookup = [(k, self.stores[k].blocks) for k in self.order]
        self.pending: list[int] = []
        self.copies = 0  # blocks copied into the own tier

    def take(self, k: int, ids: list[int], t: float = 0.0) -> None:
        """As :meth:`ReplicaTiers.take`; reads of a shared tier are counted and the
        blocks read more than ``hot`` times wait for the loads' start to be copied."""
        super().take(k, ids, t)
        reads = self.reads[k]
        if reads is not None and self.own >= 0:
            hot = self.hot
            for h in ids:
                c = reads.get(h, 0) + 1
                reads[h] = c
                if c > hot:
                    self.pending.append(h)

    def start_loads(self, t: float, counts: list[int], owner: Seq) -> list[tuple[int, int]]:
        """As :meth:`ReplicaTiers.start_loads`, then the hot copies are written."""
        out = super().start_loads(t, counts, owner)
        if self.pending:
            ids, self.pending = self.pending, []
            self.copies += len(ids)
            self._write(t, self.own, ids)
        return out


def replica_tiers(
    tiers: Sequence[Tier],
    shared_stores: dict[str, TierStore],
    block_size: int,
    kv_bytes_per_token: float,
    hot: int | None = None,
    reads: dict[str, dict[int, int]] | None = None,
    pool_links: dict[str, PoolLink] | None = None,
    nic: str | None = None,
) -> ReplicaTiers:
    """One replica's tiers; with ``hot`` (``replicate_hot_blocks``) a
    :class:`HotReplicaTiers` counting reads in ``reads`` (internal).

    Examples
    --------
    >>> dram = Tier("dram", 64, read_gbps=50.0, write_gbps=50.0)
    >>> pool = Tier("pool", 640, read_gbps=25.0, write_gbps=25.0, shared=True)
    >>> stores = {"pool": TierStore(640 // 16)}
    >>> type(replica_tiers([dram, pool], stores, 16, 1e5)).__name__
    'ReplicaTiers'
    >>> rt = replica_tiers([pool, dram], stores, 16, 1e5, hot=2, reads={"pool": {}})
    >>> rt.own, rt.order  # copies go to tier 1 (dram), looked up first
    (1, [1, 0])
    """
    if hot is None:
        return ReplicaTiers(tiers, shared_stores, block_size, kv_bytes_per_token, pool_links, nic)
    return HotReplicaTiers(
        tiers, shared_stores, block_size, kv_bytes_per_token,
        hot=hot, reads={} if reads is None else reads, pool_links=pool_links, nic=nic,
    )
