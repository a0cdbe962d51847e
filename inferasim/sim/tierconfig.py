"""Configuration of the KV tiers below HBM: :class:`Tier` and :class:`Tiers` (public).

``Simulator(tiers=[Tier(...), ...])`` takes a list of tiers (top first), or
a :class:`Tiers` holding the list with the options that concern the whole
stack (when to load, hot-block replication). The tiers' stores, links and
the lookup and offload rules are in :mod:`inferasim.sim.tiers` (internal).
"""

from __future__ import annotations

import numbers
from collections.abc import Iterator
from dataclasses import dataclass

from inferasim._validate import bandwidth_gbps, duration_us

__all__ = ["Tier", "Tiers"]

TIER_EVICTION = ("lru",)
WRITE_POLICIES = ("evict", "through")
PUBLISH = ("computed", "all")
LOAD_POLICIES = ("faster", "always")


@dataclass(frozen=True)
class Tier:
    """One KV tier below HBM (host DRAM, SSD, or a pool shared by every replica).

    Parameters
    ----------
    name : str
        Column prefix in the result frames (``<name>_hit_tokens``, ...): a
        Python identifier, not ``"hbm"``, unique among the tiers.
    capacity_tokens : int
        Tokens of KV the tier holds: per replica, or in all for a shared tier.
        Whole blocks count (``capacity_tokens // block_size`` blocks).
    read_gbps, write_gbps : float
        Bandwidth of one replica's link to the tier, in GB/s (1e9 bytes per
        second), for loads into HBM and for writes into the tier. Reads and
        writes share the link (processor sharing of link time) unless
        ``duplex``. At least 1e-9 GB/s (1 byte a second); a run also checks
        that moving every request's KV once over the link ends within 2**43 ms.
    latency_us : float, default 0.0
        Per transfer, from the last byte to delivery (microseconds), at most
        2**43 ms (``2**43 * 1000`` µs).
    shared : bool, default False
        One store for the whole fleet (a Mooncake-Store-like pool) reached
        by every replica over its own link.
    eviction : {"lru"}, default "lru"
        Eviction order within the tier.
    write : {"evict", "through"}, optional
        How blocks reach the tier. ``"evict"``: what the level directly
        above evicts (HBM's evictions for the first tier, the victims of the
        tier above for the others); a load takes its blocks out of a
        per-replica evict tier (exclusive, as vLLM's prefix cache over an
        LRU offload). ``"through"``: every full block a prefill computes, in
        bulk when its step ends (one transfer per step on the writer's link;
        no step waits for it); the tier keeps its copy when a block is
        loaded and takes no evictions from above (its own victims go on to
        the tier below if that one is an evict tier). Default: ``"through"``
        for a shared tier (Mooncake Store, LMCache remote and Dynamo's G3
        publish what a prefill computes), ``"evict"`` otherwise.
    publish : {"computed", "all"}, optional
        With ``write="through"``: write only the blocks this replica
        computed, or also the blocks it loads from its other tiers (when the
        load starts: bytes for the blocks the tier lacks, else a refresh of
        its LRU position; the tier's copy of what it serves itself is
        refreshed in both cases). Default (None): ``"all"`` for a shared
        tier (the pool sees every block a replica uses, so a local tier in
        front of it never leaves its LRU order stale), ``"computed"``
        otherwise; see :func:`publishes_loaded`.
    duplex : bool, default False
        Separate read and write budgets: writes use a link of their own at
        ``write_gbps`` (PCIe and RDMA NICs are full duplex) instead of
        sharing the read link.
    pool_gbps : float, optional
        A shared tier's aggregate bandwidth in GB/s, for the whole fleet (a
        storage service's, e.g. a Mooncake Store cluster's NICs together):
        every read and write of the tier also runs on one link of this
        bandwidth shared by all replicas (processor sharing, the tier's
        latency), and is delivered when both its own link and this one are
        done. None (default): no fleet-wide limit, each replica's link alone.

    Examples
    --------
    >>> dram = Tier("dram", capacity_tokens=3_000_000, read_gbps=50.0, write_gbps=50.0)
    >>> pool = Tier("pool", 30_000_000, read_gbps=25.0, write_gbps=25.0, latency_us=10.0,
    ...             shared=True)
    >>> dram.capacity_tokens, pool.shared, dram.write, pool.write
    (3000000, True, 'evict', 'through')
    """

    name: str
    capacity_tokens: int
    read_gbps: float
    write_gbps: float
    latency_us: float = 0.0
    shared: bool = False
    eviction: str = "lru"
    write: str | None = None
    publish: str | None = None
    duplex: bool = False
    pool_gbps: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"Tier name must be a Python identifier, got {self.name!r}")
        if self.name == "hbm":
            raise ValueError("Tier name 'hbm' is taken by the HBM tier")
        cap = self.capacity_tokens
        if isinstance(cap, bool) or not isinstance(cap, numbers.Integral) or not 0 <= cap < 2**62:
            raise ValueError(  # < 2**62: int64 frames, as kv_tokens
                f"Tier {self.name!r}: capacity_tokens must be an int >= 0 and < 2**62, got {cap!r}"
            )
        object.__setattr__(self, "capacity_tokens", int(cap))
        for field in ("read_gbps", "write_gbps"):
            v = bandwidth_gbps(getattr(self, field), f"Tier {self.name!r}: {field}")
            object.__setattr__(self, field, v)
        object.__setattr__(
            self, "latency_us", duration_us(self.latency_us, f"Tier {self.name!r}: latency_us")
        )
        if not isinstance(self.shared, bool):
            raise ValueError(f"Tier {self.name!r}: shared must be a bool, got {self.shared!r}")
        if self.write is None:
            object.__setattr__(self, "write", "through" if self.shared else "evict")
        if self.write not in WRITE_POLICIES:
            raise ValueError(
                f"Tier {self.name!r}: write must be one of {WRITE_POLICIES}, got {self.write!r}"
            )
        if self.publish is not None and self.publish not in PUBLISH:
            raise ValueError(
                f"Tier {self.name!r}: publish must be one of {PUBLISH}, got {self.publish!r}"
            )
        if self.publish == "all" and self.write != "through":
            raise ValueError(
                f"Tier {self.name!r}: publish={self.publish!r} needs write='through' "
                f"(an evict tier takes only what the level above evicts)"
            )
        if not isinstance(self.duplex, bool):
            raise ValueError(f"Tier {self.name!r}: duplex must be a bool, got {self.duplex!r}")
        if self.pool_gbps is not None:
            if not self.shared:
                raise ValueError(
                    f"Tier {self.name!r}: pool_gbps is the aggregate bandwidth of a tier "
                    f"shared by the fleet; a per-replica tier has read_gbps/write_gbps only "
                    f"(give shared=True, or leave pool_gbps out)"
                )
            v = bandwidth_gbps(self.pool_gbps, f"Tier {self.name!r}: pool_gbps")
            object.__setattr__(self, "pool_gbps", v)
        if self.eviction not in TIER_EVICTION:
            raise ValueError(
                f"Tier {self.name!r}: eviction must be one of {TIER_EVICTION}, "
                f"got {self.eviction!r}"
            )


@dataclass(frozen=True)
class Tiers:
    """A stack of KV tiers below HBM with the options that concern all of them.

    Behaves as the tuple of its tiers (``len``, iteration, indexing).

    Parameters
    ----------
    tiers : sequence of Tier
        Top first: the lookup order below HBM.
    load_policy : {"faster", "always"}, default "faster"
        Load the blocks a request finds in lower tiers only when the load
        (on the links as they are) would end sooner than recomputing them
        takes (the cost model's marginal prefill time), or always.
    replicate_hot_blocks : int, optional
        Copy hot blocks of a shared tier into the reading replica's own
        tier: a block loaded from a shared tier counts one read (fleet-wide);
        when its count exceeds this number the reader also writes it into its
        first own tier as the load starts (that tier's link carries the
        bytes; no step waits for it), and replicas look blocks up in their
        own tiers before the shared ones. Needs an own tier and a shared
        tier. ``0`` copies on every read; None (default) never.

    Examples
    --------
    >>> stack = Tiers([Tier("dram", 3_000_000, 50.0, 50.0)], load_policy="always")
    >>> len(stack), stack[0].name, stack.load_policy
    (1, 'dram', 'always')
    """

    tiers: tuple[Tier, ...] = ()
    load_policy: str = "faster"
    replicate_hot_blocks: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "tiers", _as_tier_tuple(self.tiers))

    def __len__(self) -> int:
        return len(self.tiers)

    def __iter__(self) -> Iterator[Tier]:
        return iter(self.tiers)

    def __getitem__(self, k: int) -> Tier:
        return self.tiers[k]

    def checked(self) -> Tiers:
        """The stack after checking the options against its tiers (raises ValueError).

        Examples
        --------
        >>> Tiers([Tier("dram", 1024, 1.0, 1.0)], replicate_hot_blocks=2).checked()
        Traceback (most recent call last):
        ...
        ValueError: tiers.replicate_hot_blocks copies blocks read from a shared tier, and the tiers have none: add one with shared=True
        """
        if self.load_policy not in LOAD_POLICIES:
            raise ValueError(
                f"tiers.load_policy must be one of {LOAD_POLICIES}, got {self.load_policy!r}"
            )
        hot = self.replicate_hot_blocks
        if hot is not None:
            if isinstance(hot, bool) or not isinstance(hot, numbers.Integral) or hot < 0:
                raise ValueError(
                    f"tiers.replicate_hot_blocks must be None or an int >= 0, got {hot!r}"
                )
            if not any(not t.shared for t in self.tiers):
                raise ValueError(
                    "tiers.replicate_hot_blocks copies hot pool blocks into the reading "
                    "replica's own tier, and the tiers have none: add one, e.g. "
                    "Tier('dram', 3_000_000, read_gbps=50.0, write_gbps=50.0)"
                )
            if not any(t.shared for t in self.tiers):
                raise ValueError(
                    "tiers.replicate_hot_blocks copies blocks read from a shared tier, and the "
                    "tiers have none: add one with shared=True"
                )
        return self


def publishes_loaded(tier: Tier) -> bool:
    """Whether ``tier`` is written the blocks a replica loads from its other tiers:
    a through tier with ``publish="all"``, or a shared through tier by default.

    Examples
    --------
    >>> pool = Tier("pool", 1024, 1.0, 1.0, shared=True)
    >>> publishes_loaded(pool), publishes_loaded(Tier("pool", 1024, 1.0, 1.0, shared=True,
    ...                                               publish="computed"))
    (True, False)
    """
    if tier.write != "through":
        return False
    return tier.publish == "all" or (tier.publish is None and tier.shared)


def as_tiers(tiers: object) -> Tiers:
    """``Simulator(tiers=...)`` as a :class:`Tiers` (None: no tiers), checked.

    Examples
    --------
    >>> as_tiers(None).tiers
    ()
    >>> as_tiers([Tier("dram", 1024, 1.0, 1.0)]).load_policy
    'faster'
    """
    if isinstance(tiers, Tiers):
        return tiers.checked()
    return Tiers(_as_tier_tuple(tiers)).checked()


def _as_tier_tuple(tiers: object) -> tuple[Tier, ...]:
    """The tiers as a tuple, after checking their types and names."""
    if tiers is None:
        return ()
    if isinstance(tiers, Tier):
        tiers = [tiers]
    try:
        out = tuple(tiers)  # type: ignore
    except TypeError:
        raise TypeError(f"tiers must be a list of Tier, got {tiers!r}") from None
    names = set()
    for t in out:
        if not isinstance(t, Tier):
            raise TypeError(f"tiers must be a list of Tier, got an item {t!r}")
        if t.name in names:
            raise ValueError(f"tier names must be unique, {t.name!r} appears twice")
        names.add(t.name)
    return out
