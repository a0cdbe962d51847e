"""A request's state on its replica (:class:`Seq`) and the run's per-request columns
(:class:`RequestLog`). Internal, compiled with mypyc (see :mod:`inferasim.sim.native`).
"""

from __future__ import annotations

from array import array

__all__: list[str] = []

#: Where a sequence is. WAITING: queued (or preempted); PREFILL: admitted, chunks
#: still to compute; DECODE: in the decode group; DONE: finished; LOADING: admitted,
#: waiting for KV loads from lower tiers. Disaggregated fleets: HANDOFF (prefill
#: instance: prefill done, KV held until the decode instance has it) and READY
#: (decode instance: KV delivered, waiting to join the decode batch).
WAITING, PREFILL, DECODE, DONE, LOADING, HANDOFF, READY = 0, 1, 2, 3, 4, 5, 6


class Seq:
    """Scheduler state of one request on its replica.

    ``ids`` are the prompt's hashable full blocks; ``hashed`` the ones this
    sequence holds in the prefix cache (pinned), in prompt order. A
    sequence in the decode group joined it at decode step ``d_join`` with
    ``c_join`` computed tokens and ``g_join`` generated ones; ``epoch``
    counts its admissions (a preemption makes the older heap entries stale).
    """

    __slots__ = (
        "rid",
        "prompt",
        "output",
        "ids",
        "pblocks",
        "gen",
        "tokens",
        "computed",
        "hashed",
        "cpages",
        "hit",
        "fresh",
        "state",
        "d_join",
        "c_join",
        "g_join",
        "epoch",
        "first",
        "tok",
        "loads",
        "loads_left",
        "load_start",
        "load_end",
        "lower",
        "mixed",
        "dload",
        "dheld",
    )

    def __init__(self, rid: int, prompt: int, output: int, ids: list[int], block_size: int):
        self.rid = rid
        self.prompt = prompt
        self.output = output if output > 0 else 1
        self.ids = ids
        self.pblocks = -(-prompt // block_size)
        self.gen = 0
        self.tokens = prompt
        self.computed = 0
        self.hashed: list[int] = []
        self.cpages = 0  # pages it holds that are cache pages (the rest are private)
        self.hit = 0  # entries of its admission hit (the last may be partial)
        self.fresh = 0  # entries it cached when its running chunk was scheduled
        self.state = WAITING
        self.d_join = self.c_join = self.g_join = 0
        self.epoch = 0
        self.first = True
        self.tok = 0.0  # time of the last token produced before the current decode episode
        # lower-tier loads of the current admission (tiers only)
        self.loads: list[tuple[int, int]] = []
        self.loads_left = 0
        self.load_start = self.load_end = 0.0
        self.lower: list[int] = []  # ids being loaded, in prompt order
        self.mixed = False  # HBM blocks after the first loaded one
        # (decode instance with tiers) a handoff's blocks loaded from the decode
        # instance's own tiers: 0 none; 1 loading, not delivered; 2 loading,
        # delivered (waits in the queue); 3 loaded, not delivered. ``dheld``: the
        # leading blocks it pinned in HBM at placement
        self.dload = 0
        self.dheld = 0


class RequestLog:
    """Per-request result columns written by every replica (compact arrays)."""

    def __init__(self, n: int, tiers: int = 0) -> None:
        nan = array("d", [float("nan")])
        zero = array("q", [0])
        # blocks hit in each lower tier at the first admission; time waiting for loads
        self.tier_hits = [zero * n for _ in range(tiers)]
        self.load_ms = array("d", [0.0]) * n if tiers else array("d")
        self.replica = array("q", [-1]) * n
        self.scheduled = nan * n
        self.first_token = nan * n
        self.finish = nan * n
        self.cached_blocks = zero * n
        self.cached_tokens = zero * n
        self.computed = zero * n
        self.preemptions = zero * n
        # largest gap between consecutive tokens outside decode episodes (a token
        # sampled by a recompute after preemption); episodes are added at the end
        self.max_gap = nan * n
        # disaggregation
        self.decode_replica = array("q", [-1]) * n
        self.xfer_start = nan * n
        self.delivered = nan * n
        self.decode_start = nan * n
        self.decode_hit = zero * n  # prompt tokens the decode instance held (decode_cache)
