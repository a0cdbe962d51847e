"""Configuration of one KV tier below HBM: :class:`Tier` (public).

The tiers' stores, links and the lookup and offload rules are in
:mod:`inferasim.sim.tiers` (internal).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

__all__ = ["Tier"]

TIER_EVICTION = ("lru",)


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
        writes share the link (processor sharing of link time).
    latency_us : float, default 0.0
        Per transfer, from the last byte to delivery (microseconds).
    shared : bool, default False
        One store for the whole fleet (a Mooncake-Store-like pool) reached
        by every replica over its own link.
    eviction : {"lru"}, default "lru"
        Eviction order within the tier.

    Examples
    --------
    >>> dram = Tier("dram", capacity_tokens=3_000_000, read_gbps=50.0, write_gbps=50.0)
    >>> pool = Tier("pool", 30_000_000, read_gbps=25.0, write_gbps=25.0, latency_us=10.0,
    ...             shared=True)
    >>> dram.capacity_tokens, pool.shared
    (3000000, True)
    """

    name: str
    capacity_tokens: int
    read_gbps: float
    write_gbps: float
    latency_us: float = 0.0
    shared: bool = False
    eviction: str = "lru"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"Tier name must be a Python identifier, got {self.name!r}")
        if self.name == "hbm":
            raise ValueError("Tier name 'hbm' is taken by the HBM tier")
        cap = self.capacity_tokens
        if isinstance(cap, bool) or not isinstance(cap, numbers.Integral) or cap < 0:
            raise ValueError(
                f"Tier {self.name!r}: capacity_tokens must be an int >= 0, got {cap!r}"
            )
        object.__setattr__(self, "capacity_tokens", int(cap))
        for field in ("read_gbps", "write_gbps"):
            v = getattr(self, field)
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not (
                math.isfinite(v) and v > 0
            ):
                raise ValueError(f"Tier {self.name!r}: {field} must be a number > 0, got {v!r}")
        v = self.latency_us
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not (
            math.isfinite(v) and v >= 0
        ):
            raise ValueError(f"Tier {self.name!r}: latency_us must be a number >= 0, got {v!r}")
        if not isinstance(self.shared, bool):
            raise ValueError(f"Tier {self.name!r}: shared must be a bool, got {self.shared!r}")
        if self.eviction not in TIER_EVICTION:
            raise ValueError(
                f"Tier {self.name!r}: eviction must be one of {TIER_EVICTION}, "
                f"got {self.eviction!r}"
            )


def check_tiers(tiers: object) -> tuple[Tier, ...]:
    """The tiers as a tuple, after checking their types and names (internal)."""
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
