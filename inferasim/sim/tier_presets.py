"""Tier stacks of the systems people deploy (``ism.tiers.<system>(...)``, public).

Each function returns the list of :class:`~inferasim.sim.tierconfig.Tier`
(top first) that follows the named system's write semantics, as its
documentation states them, for ``Simulator(tiers=...)`` or
:func:`inferasim.reuse.replay_tiers`. Capacities are in tokens (per replica,
or in all for a shared tier); the link defaults are public numbers: host
DRAM over PCIe Gen5 x16 at 50 GB/s per direction (5 us), a pool over one
200 Gb/s RDMA NIC at 25 GB/s (10 us), a local NVMe SSD at 5 GB/s read and
2 GB/s write (80 us). PCIe and RDMA NICs are full duplex, so every preset
tier has separate read and write budgets (``duplex=True``).

What the model leaves out, for every preset: chunk sizes other than the
workload's block size (LMCache's 256-token chunks, SGLang's pages), and the
metadata round trips of a lookup.
"""

from __future__ import annotations

from inferasim.sim.tierconfig import Tier

__all__ = ["vllm_offload", "lmcache", "mooncake_store", "dynamo_kvbm", "sglang_hicache"]

_DRAM = dict(read_gbps=50.0, write_gbps=50.0, latency_us=5.0, duplex=True)
_RDMA = dict(read_gbps=25.0, write_gbps=25.0, latency_us=10.0, duplex=True)
_SSD = dict(read_gbps=5.0, write_gbps=2.0, latency_us=80.0, duplex=True)


def _stack(*tiers: Tier | None) -> list[Tier]:
    return [t for t in tiers if t is not None]


def vllm_offload(cpu_tokens: int, **link: float) -> list[Tier]:
    """vLLM's native KV offloading (``OffloadingConnector``, CPU tier).

    Per the vLLM KV offloading guide
    (https://docs.vllm.ai/en/latest/features/kv_offloading_usage/), the
    connector "offloads completed KV blocks" to pinned host memory "as they
    are produced" and promotes hits back to the GPU on demand; its
    ``OffloadingManager`` (https://docs.vllm.ai/en/latest/api/vllm/v1/kv_offload/)
    looks up the leading run of offloaded blocks and evicts LRU. Hence one
    per-replica tier written through: every computed block is stored, and a
    load leaves the CPU copy in place.

    Parameters
    ----------
    cpu_tokens : int
        Host DRAM per replica, in tokens.
    **link
        ``read_gbps``, ``write_gbps``, ``latency_us`` overriding the PCIe
        defaults.

    Examples
    --------
    >>> [(t.name, t.write, t.shared) for t in vllm_offload(3_000_000)]
    [('cpu', 'through', False)]
    """
    return [Tier("cpu", cpu_tokens, write="through", **{**_DRAM, **link})]


def lmcache(
    cpu_tokens: int, disk_tokens: int = 0, remote_tokens: int = 0, **link: float
) -> list[Tier]:
    """LMCache with local CPU, local disk and a remote backend.

    LMCache's configuration (https://docs.lmcache.ai/api_reference/configurations.html:
    ``local_cpu`` / ``max_local_cpu_size``, ``local_disk`` /
    ``max_local_disk_size``, ``remote_url``) enables storage backends, and
    its storage manager stores every KV chunk the engine computes in each of
    them in turn (``StorageManager.batched_put`` in
    ``lmcache/v1/storage_backend/storage_manager.py``), looked up in the
    order local CPU, local disk, remote. Hence every tier written through: CPU and
    disk per replica, the remote backend shared by the fleet (it publishes
    the blocks a replica loads from its local tiers as well, the default of
    a shared tier). Zero capacities leave a tier out.

    Parameters
    ----------
    cpu_tokens, disk_tokens, remote_tokens : int
        Local CPU and local disk per replica, remote in all, in tokens.
    **link
        Overrides of the local CPU tier's link (PCIe defaults).

    Examples
    --------
    >>> [(t.name, t.write, t.shared) for t in lmcache(1_000_000, 10_000_000, 50_000_000)]
    [('cpu', 'through', False), ('disk', 'through', False), ('remote', 'through', True)]
    """
    return _stack(
        Tier("cpu", cpu_tokens, write="through", **{**_DRAM, **link}) if cpu_tokens else None,
        Tier("disk", disk_tokens, write="through", **_SSD) if disk_tokens else None,
        Tier("remote", remote_tokens, shared=True, write="through", **_RDMA)
        if remote_tokens else None,
    )


def mooncake_store(pool_tokens: int, ssd_tokens: int = 0, **link: float) -> list[Tier]:
    """Mooncake Store: a DRAM pool over RDMA shared by the fleet, with SSD below.

    vLLM's ``MooncakeStoreConnector``
    (https://docs.vllm.ai/en/latest/features/mooncake_store_connector_usage/)
    uses the distributed store "as a shared KV cache pool": instances put
    the KV they compute, deduplicated by hash, and every instance reads it
    (prefix caching across instances). Mooncake's architecture
    (https://github.com/kvcache-ai/Mooncake/blob/main/doc/en/architecture.md)
    backs the DRAM segments with SSD. Hence a shared pool written through
    (publishing what a replica loads too) and, with ``ssd_tokens``, a
    shared SSD tier that takes what the pool evicts.

    Parameters
    ----------
    pool_tokens : int
        DRAM pooled over the fleet, in tokens.
    ssd_tokens : int, default 0
        SSD behind the pool, in tokens (0: none).
    **link
        Overrides of the pool link (one 200 Gb/s NIC per replica), and
        ``pool_gbps``: the store cluster's aggregate bandwidth, one budget
        shared by the fleet (default: none).

    Examples
    --------
    >>> [(t.name, t.write, t.shared) for t in mooncake_store(30_000_000, 300_000_000)]
    [('pool', 'through', True), ('ssd', 'evict', True)]
    >>> mooncake_store(30_000_000, pool_gbps=100.0)[0].pool_gbps
    100.0
    """
    return _stack(
        Tier("pool", pool_tokens, shared=True, write="through", **{**_RDMA, **link}),
        Tier("ssd", ssd_tokens, shared=True, write="evict", **_SSD) if ssd_tokens else None,
    )


def dynamo_kvbm(
    host_tokens: int, disk_tokens: int = 0, *, shared_disk: bool = False, **link: float
) -> list[Tier]:
    """NVIDIA Dynamo's KV Block Manager: G2 host memory, G3 disk (local or cluster-shared).

    The KVBM configuration reference
    (https://docs.nvidia.com/dynamo/latest/components/kvbm-configuration)
    says KVBM "offloads KV blocks GPU (G1) -> host/CPU (G2) -> disk (G3)"
    and warns that a CPU cache smaller than the GPU's churns, "offloading
    blocks after every forward pass": every computed block is offloaded, to
    host and disk alike (the KVBM integration guide's "offloading blocks
    from Device to Host & Disk",
    https://docs.nvidia.com/dynamo/latest/kvbm/kvbm_integrations.html).
    Hence G2 per replica written through and G3 written through, per replica
    or (``shared_disk=True``) shared by the cluster.

    Parameters
    ----------
    host_tokens : int
        G2 host memory per replica, in tokens.
    disk_tokens : int, default 0
        G3 disk: per replica, or in all when shared (0: none).
    shared_disk : bool, default False
        One G3 for the whole cluster (reached over the RDMA NIC).
    **link
        Overrides of the G2 link (PCIe defaults).

    Examples
    --------
    >>> [(t.name, t.write, t.shared) for t in dynamo_kvbm(3_000_000, 30_000_000,
    ...                                                  shared_disk=True)]
    [('g2', 'through', False), ('g3', 'through', True)]
    """
    g3 = None
    if disk_tokens:
        g3 = Tier("g3", disk_tokens, shared=shared_disk, write="through",
                  **(_RDMA if shared_disk else _SSD))
    return _stack(Tier("g2", host_tokens, write="through", **{**_DRAM, **link}), g3)


HICACHE_POLICIES = ("write_through", "write_back")


def sglang_hicache(
    host_tokens: int,
    storage_tokens: int = 0,
    *,
    write_policy: str = "write_through",
    **link: float,
) -> list[Tier]:
    """SGLang HiCache: L2 host memory per replica, L3 distributed storage.

    SGLang's HiCache design (https://docs.sglang.io/advanced_features/hicache_design.html)
    organises GPU memory as L1, host memory as L2 and distributed storage
    (Mooncake, 3FS, NIXL, ...) as L3 shared for global reuse;
    ``--hicache-write-policy`` (https://docs.sglang.io/advanced_features/hicache_best_practices.html)
    chooses how L2 is written: ``write_through`` writes the KV to host as
    soon as it is computed, ``write_back`` when the GPU evicts it. Hence L2
    per replica written through or on eviction, and with ``storage_tokens``
    an L3 shared by the fleet, written through.

    Parameters
    ----------
    host_tokens : int
        L2 host memory per replica, in tokens.
    storage_tokens : int, default 0
        L3 storage in all, in tokens (0: none).
    write_policy : {"write_through", "write_back"}, default "write_through"
        HiCache's L2 write policy (``write_through_selective``, which writes
        only hot blocks, is not modelled).
    **link
        Overrides of the L2 link (PCIe defaults).

    Examples
    --------
    >>> [(t.name, t.write) for t in sglang_hicache(3_000_000, 50_000_000, write_policy="write_back")]
    [('l2', 'evict'), ('l3', 'through')]
    """
    if write_policy not in HICACHE_POLICIES:
        raise ValueError(
            f"write_policy must be one of {HICACHE_POLICIES} (write_through_selective is not "
            f"modelled), got {write_policy!r}"
        )
    write = "through" if write_policy == "write_through" else "evict"
    return _stack(
        Tier("l2", host_tokens, write=write, **{**_DRAM, **link}),
        Tier("l3", storage_tokens, shared=True, write="through", **_RDMA)
        if storage_tokens else None,
    )
