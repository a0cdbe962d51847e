"""Prefill-to-decode KV handoffs of a disaggregated fleet: :class:`Handoffs`
(internal, compiled).

A prefill instance computes the prompt, samples the first token and hands
the sequence off:

1. a decode instance with room for the KV (``ceil((input_len + 1) /
   block_size)`` free or evictable blocks) is chosen, the one with the
   fewest active blocks (ties to the lowest index), and the blocks are
   reserved there; if none has room the KV stays pinned on the prefill
   instance and the handoff waits (vLLM's source-first order: the source
   holds the KV until the destination has taken it), retried, first come
   first served, whenever the fleet's state may have changed;
2. the prompt's KV (``input_len * kv_bytes_per_token`` bytes) moves over the
   prefill instance's link (:class:`~inferasim.sim.transfer.Link`, shared by
   its transfers in flight, plus latency);
3. on delivery the prefill instance frees the KV and the sequence joins the
   decode instance's next step (its second token).

With ``layerwise`` steps 1-2 happen when the prefill starts (the KV streams
out layer by layer as it is computed) and the sequence is delivered at the
later of the transfer's end and the prefill's end; a preempted layerwise
prefill calls its handoff off (transfer stopped, decode reservation freed).

With ``decode_cache`` each decode instance keeps the prompts' full hash
blocks as a prefix cache (registered on delivery, pinned while the sequence
runs, evictable after): step 1 breaks ties between the instances with the
fewest active blocks by the longest leading run of the prompt's blocks they
hold (then the lowest index), pins that run and reserves only the missing
pages, and step 2 moves only the rest, ``(input_len - held_tokens) *
kv_bytes_per_token`` bytes. (The room check still asks for the whole
prompt's pages. Preferring the holder over the balance, tried on the
conversation trace, held a little less and raised the mean TPOT by 9%: it
piles the sessions' turns onto fewer decode instances.)

With KV tiers on the decode instances too (``decode_cache`` with
``decode_tiers``, not layerwise) the held run goes on in the decode
instance's own tiers (:meth:`KVManager.held_run`: per-replica tiers and the
shared stores): the ties count those blocks as held, and at placement they
start loading from their tiers over the tier's links (into pages reserved
with the handoff) when that is worth it (``load_policy="always"``, or the
loads and the handoff of the rest would both end sooner than a handoff of
the whole remainder); the handoff moves the rest and the sequence joins the
decode batch once both are delivered. ``decode_hit_tokens`` counts the HBM
and the tier blocks.
"""

from __future__ import annotations

from inferasim.sim.replica import Replica
from inferasim.sim.sequence import HANDOFF, RequestLog, Seq
from inferasim.sim.transfer import Link, SharedLink

__all__: list[str] = []


class Flight:
    """One handoff's transfer: the sequence, its prefill and decode instances, the
    transfer's id on the prefill instance's link, and what is done."""

    __slots__ = ("seq", "p", "d", "prefilled", "delivered", "tid", "held")

    def __init__(
        self, seq: Seq, p: int, d: int, prefilled: bool, tid: int, held: int = -1
    ) -> None:
        self.seq = seq
        self.p = p
        self.d = d
        self.prefilled = prefilled
        self.delivered = False
        self.tid = tid
        # (decode_cache) leading prompt blocks the decode instance held, pinned; -1: no cache
        self.held = held


#: A handoff event of a prefill instance: (prefill done? (None: preempted), seq,
#: time, prefill instance).
Event = tuple[bool | None, Seq, float, int]


class Handoffs:
    """The prefill instances' sequences on their way to a decode instance.

    ``waiting_room`` holds the handoffs waiting for decode room (first come
    first served), ``flight`` the transfers in flight by (link, transfer id),
    ``by_seq`` every placed handoff by request id until it is delivered (a
    layerwise one is placed when its prefill starts).
    """

    def __init__(
        self,
        pre: list[Replica],
        dec: list[Replica],
        links: list[Link],
        out: RequestLog,
        block_size: int,
        kv_bytes_per_token: float,
        layerwise: bool,
        nics: list[SharedLink] | None = None,
        handoff_gbps: float = 50.0,
        decode_cache: bool = False,
    ) -> None:
        self.pre = pre
        self.dec = dec
        self.links = links
        self.out = out
        self.bs = block_size
        self.kvb = kv_bytes_per_token
        self.layerwise = layerwise
        # handoffs on the prefill instances' NICs to a KV tier (``links`` are
        # those), each moving at ``handoff_gbps``; None: links of their own
        self.nics = nics
        self.gbps = handoff_gbps
        self.decode_cache = decode_cache
        # (decode_cache with tiers on the decode instances) a held run goes on in
        # the decode instance's tiers: not with layerwise handoffs (the loads of a
        # prefill under way own the sequence's load fields)
        self.tiered = decode_cache and not layerwise and any(r.kv.tiers is not None for r in dec)
        # the decode instances' changes are always events (they share a tier
        # store with the prefill instances)
        self.eager = False
        self.waiting_room: list[tuple[Seq, int]] = []
        self.flight: dict[tuple[int, int], Flight] = {}
        self.by_seq: dict[int, Flight] = {}
        # closed loop: requests with a waiting next turn, routed and not finished
        # (while there are any, the decode instances' changes are events)
        self.inflight = 0

    @property
    def busy(self) -> bool:
        """Whether the decode instances' state changes are events now (handoffs
        wait for room, or a closed loop waits for finishes)."""
        return bool(self.waiting_room) or self.inflight > 0 or self.eager

    def pending(self) -> bool:
        """Whether any handoff is not delivered yet."""
        return bool(self.waiting_room or self.flight or self.by_seq)

    def next_delivery(self) -> float:
        """The earliest delivery on any link."""
        best = float("inf")
        for link in self.links:
            d = link.next_done()
            if d < best:
                best = d
        return best

    # -------------------------------------------------------------- events
    def collect(self, T: float) -> list[Event]:
        """The handoff events the prefill instances produced up to ``T``, in time
        order; at one instant by prefill instance, then in the order the instance
        produced them (its step's admission order): a stable sort of the lists
        built instance by instance, each already in time order. (Not by request
        id: an id says nothing about who came first once closed-loop turns
        arrive at simulated times.)"""
        events: list[Event] = []
        for p in range(len(self.pre)):
            sched = self.pre[p].sched
            if sched.handoffs:
                for done, seq, te in sched.handoffs:
                    events.append((done, seq, te, p))
                sched.handoffs.clear()
        if len(events) > 1:
            events.sort(key=_event_time)
        return events

    def deliver_due(self, T: float) -> None:
        """Take the transfers delivered by ``T``; hand over the prefilled ones."""
        for p in range(len(self.links)):
            # (advance a link only when something is delivered: its float state
            # then depends on the event times alone, the same in both loops)
            link = self.links[p]
            if link.next_done() <= T:
                for tid in link.pop_done(T):
                    rec = self.flight.pop((p, tid))
                    self.out.delivered[rec.seq.rid] = T
                    rec.delivered = True
                    if rec.prefilled:
                        self.hand_over(rec, T)

    def retry_waiting(self, T: float) -> None:
        """Place the handoffs waiting for room, first come first served, at ``T``."""
        if self.waiting_room:
            still: list[tuple[Seq, int]] = []
            for seq, p in self.waiting_room:
                if not self.place(seq, p, T, seq.state == HANDOFF):
                    still.append((seq, p))
            self.waiting_room = still

    def handle(self, done: bool | None, seq: Seq, te: float, p: int) -> None:
        """One handoff event of prefill instance ``p`` at ``te``: ``done`` None
        (preempted), False (its prefill starts) or True (its first token)."""
        if done is None:  # preempted
            if self.layerwise:
                self.call_off(seq, te)
            return
        if not done:  # the prefill starts: with layerwise, the KV streams out
            if self.layerwise and not self.place(seq, p, te, False):
                self.waiting_room.append((seq, p))
            return
        rec = self.by_seq.get(seq.rid)
        if rec is not None:  # layerwise, transfer under way or delivered
            rec.prefilled = True
            if rec.delivered:
                self.out.delivered[seq.rid] = te
                self.hand_over(rec, te)
        elif self.layerwise and _waits(self.waiting_room, seq):
            pass  # still waiting for room; placed as a whole when it comes
        elif not self.place(seq, p, te, True):
            self.waiting_room.append((seq, p))

    # ------------------------------------------------------------- placing
    def decode_with_room(self, need: int, t: float, seq: Seq | None = None) -> int:
        """The decode instance with room for ``need`` blocks and the fewest active
        ones (ties to the lowest index), brought up to ``t``; -1 if none has room.
        With ``seq`` (a decode prefix cache), ties go first to the one holding
        the longest leading run of its prompt's blocks.

        Memory and queue only change where a replica wakes, so only the ones
        waking by ``t`` are advanced to read them (and then the chosen one);
        inside a decode stretch not even those, the memory at ``t`` is read off
        the stretch's plan (:meth:`Replica.kv_at`), as long as the decode
        instances' changes are no events (:attr:`busy`: the loop then needs
        every decode wake after ``t``, so a placement that fails advances the
        instances read off too).
        """
        dec = self.dec
        best = -1
        best_active = 0
        best_hit = 0
        readoff = not self.busy
        skipped: list[Replica] = []
        for j in range(len(dec)):
            rep = dec[j]
            kv = rep.kv_at(t) if readoff else -1
            if kv < 0:
                if rep.wake() <= t:
                    rep.advance(t)
                kv = rep.kv.running
            elif rep.wake() <= t:
                skipped.append(rep)
            if rep.kv.capacity - kv < need:
                continue
            act = kv + rep.sched.queued_blocks
            # (the cache's entries stay put until an allocation evicts, which no
            # step of a stretch read off does: looked up as they are now)
            hit = 0
            if seq is not None:
                kv_ = rep.kv
                hit = (kv_.held_run(seq.ids, seq.prompt)[1] if self.tiered
                       else kv_.held_prefix(seq.ids, seq.prompt))
            if best < 0 or act < best_active or (act == best_active and hit > best_hit):
                best = j
                best_active = act
                best_hit = hit
        if best >= 0:
            dec[best].advance(t)
        else:  # the handoff waits: the loop then wakes on decode changes
            for rep in skipped:
                rep.advance(t)
        return best

    def place(self, seq: Seq, p: int, t: float, done: bool) -> bool:
        """Reserve decode room for ``seq`` (from prefill instance ``p``) and start its
        transfer at ``t``; False (nothing done) when no decode instance has room."""
        need = -(-(seq.prompt + 1) // self.bs)
        cached = self.decode_cache
        d = self.decode_with_room(need, t, seq if cached else None)
        if d < 0:
            return False
        dec = self.dec[d]
        held = -1
        size = seq.prompt * self.kvb
        if cached:  # the held leading run is pinned, neither reserved nor sent
            held = dec.pin_prefix(seq.ids, seq.prompt)
            need -= held * dec.kv.ppb
            r = self.load_held(seq, p, t, dec) if self.tiered else held
            size = (seq.prompt - r * dec.kv.bs) * self.kvb
            self.out.decode_hit[seq.rid] = r * dec.kv.bs
        dec.reserve(need, t)
        nics = self.nics
        if nics is not None:
            tid = nics[p].start_handoff(t, size, self.gbps)
        else:
            tid = self.links[p].start(t, size)
        self.out.xfer_start[seq.rid] = t
        rec = Flight(seq, p, d, done, tid, held)
        self.flight[(p, tid)] = rec
        self.by_seq[seq.rid] = rec
        return True

    def load_held(self, seq: Seq, p: int, t: float, dec: Replica) -> int:
        """The end of the run of ``seq``'s prompt blocks decode instance ``dec``
        holds (hash blocks; its HBM run pinned already), for a handoff from
        prefill instance ``p`` placed at ``t``; the blocks its tiers hold after
        the HBM run start loading from there.

        They are loaded when that is worth it: with ``load_policy="always"``,
        else when the loads and the handoff of the rest (on the links as they
        are) would both be delivered sooner than a handoff of the whole
        remainder (a pool slower than the handoff link is left alone)."""
        kv = dec.kv
        m, r, counts = kv.held_run(seq.ids, seq.prompt)
        if r == m:
            return m
        if not kv.load_always:
            tiers = kv.tiers
            assert tiers is not None
            bs = kv.bs
            nics = self.nics
            link: Link = nics[p] if nics is not None else self.links[p]
            gbps = self.gbps if nics is not None else None
            whole = link.estimate_ms(t, (seq.prompt - m * bs) * self.kvb, gbps)
            rest = link.estimate_ms(t, (seq.prompt - r * bs) * self.kvb, gbps)
            load = tiers.load_estimate_ms(t, counts)
            if not (load if load > rest else rest) < whole:
                return m
        dec.load_held(seq, t, m, r, counts)
        return r

    def hand_over(self, rec: Flight, t: float) -> None:
        """Deliver ``rec``'s sequence at ``t`` (prefill done and transfer delivered)."""
        seq = rec.seq
        rep = self.pre[rec.p]
        rep.advance(t)
        rep.release_kv(seq, t)
        dec = self.dec[rec.d]
        dec.advance(t)
        dec.deliver(seq, t, rec.held)
        del self.by_seq[seq.rid]

    def call_off(self, seq: Seq, t: float) -> None:
        """A layerwise handoff whose prefill was preempted at ``t`` (its KV is gone).

        The transfer stops and the decode reservation is freed, so the room goes
        to others (a sequence that can't recompute while it holds room the one
        pinning its prefill instance's memory waits for would deadlock); the
        handoff starts again with the recompute.
        """
        rec = self.by_seq.pop(seq.rid, None)
        if rec is None:
            self.waiting_room = [(s, p) for s, p in self.waiting_room if s is not seq]
            return
        p = rec.p
        if not rec.delivered:
            self.links[p].cancel(t, rec.tid)
            del self.flight[(p, rec.tid)]
        dec = self.dec[rec.d]
        dec.advance(t)
        held = rec.held if rec.held > 0 else 0
        need = -(-(seq.prompt + 1) // self.bs) - held * dec.kv.ppb
        dec.unreserve(need, t, seq.ids[:held] if held else None)


def _event_time(event: Event) -> float:
    """The time of a handoff event (the sort key of :meth:`Handoffs.collect`)."""
    return event[2]


def _waits(waiting_room: list[tuple[Seq, int]], seq: Seq) -> bool:
    """Whether ``seq`` is in ``waiting_room``."""
    for s, _ in waiting_room:
        if s is seq:
            return True
    return False
