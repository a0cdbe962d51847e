"""Admission: which arriving requests the fleet serves (Mooncake's early rejection).

An admission policy is any callable ``admit(request, views, now) -> bool``,
consulted once per request at its arrival, *after* routing:

``request``
    The :class:`~inferasim.sim.router.Request` being placed.
``views``
    The :class:`~inferasim.sim.router.ReplicaView` of each replica the
    request was routed to, brought up to ``now``: ``(view,)`` on an
    aggregated fleet (prefill and decode on one instance). The views'
    estimates (``ttft_estimate_ms``, ``tpot_estimate_ms``, ``queue_ms``,
    ``free_kv_blocks``) refer to this request.
``now``
    The arrival time (ms).

``True`` admits. ``False`` rejects: the request keeps its row in
``SimResult.requests`` with ``status="rejected"``, ``replica`` -1 and a
``reason``, and consumes no KV memory and no GPU time. Goodput and SLO
attainment count it as a miss. Any other answer (None included) is an error
naming the request, as a router's bad answer is.

Built-in (``Simulator(admission=...)``): ``None`` admits every request;
:class:`SloAdmission` rejects what would miss its objectives. Any object
following the :class:`Admission` protocol (a callable) works the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from inferasim._validate import slo_ms
from inferasim.sim.router import ReplicaView, Request

__all__ = ["Admission", "SloAdmission", "make_admission"]


@runtime_checkable
class Admission(Protocol):
    """The interface of an admission policy: ``admit(request, views, now) -> bool``.

    Called once per request at its arrival, after routing, with the views
    of the instances the request was routed to (see the module docstring).
    An optional ``last_reason`` attribute (a str) becomes the rejected
    request's ``reason``.

    Examples
    --------
    Admit only prompts of at most 4,096 tokens:

    >>> class ShortPrompts:
    ...     last_reason = "prompt over 4096 tokens"
    ...     def __call__(self, request, views, now):
    ...         return request.input_len <= 4096
    >>> isinstance(ShortPrompts(), Admission)
    True
    """

    def __call__(self, request: Request, views: Sequence[ReplicaView], now: float) -> bool:
        """True admits ``request`` at ``now``; False rejects it."""
        ...


class SloAdmission:
    """Reject at arrival what would miss its SLO on the instance chosen for it.

    A request is rejected when its predicted TTFT (the chosen prefill
    instance's :attr:`~inferasim.sim.router.ReplicaView.ttft_estimate_ms`)
    exceeds ``ttft_ms``, or its predicted TPOT on the chosen decode
    instance (:attr:`~inferasim.sim.router.ReplicaView.tpot_estimate_ms`)
    exceeds ``tpot_ms``. An objective left ``None`` is not checked.
    :attr:`last_reason` says why the last request was rejected.

    Parameters
    ----------
    ttft_ms, tpot_ms : float, optional
        The objectives (ms); at least one. Each is None or a finite number
        with ``0 < v <= 2**43``, checked here and again at the run, by the
        rule of every objective (``summary``, ``sweep``, ``plan``, the CLI).

    Examples
    --------
    >>> from types import SimpleNamespace as NS
    >>> slo = SloAdmission(ttft_ms=100.0, tpot_ms=20.0)
    >>> slo(None, (NS(ttft_estimate_ms=80.0, tpot_estimate_ms=15.0),), 0.0)
    True
    >>> slo(None, (NS(ttft_estimate_ms=130.0, tpot_estimate_ms=15.0),), 0.0), slo.last_reason
    (False, 'admission: predicted TTFT 130.0 ms > ttft_ms 100.0')
    """

    def __init__(self, ttft_ms: float | None = None, tpot_ms: float | None = None) -> None:
        # (checked here too, by the rule of every objective: an SLO is never ignored)
        self.ttft_ms = slo_ms(ttft_ms, "admission.ttft_ms")
        self.tpot_ms = slo_ms(tpot_ms, "admission.tpot_ms")
        self.last_reason = ""

    def __repr__(self) -> str:
        return f"SloAdmission(ttft_ms={self.ttft_ms}, tpot_ms={self.tpot_ms})"

    def checked(self) -> SloAdmission:
        """This policy after checking its objectives (raises ValueError).

        Examples
        --------
        >>> SloAdmission().checked()
        Traceback (most recent call last):
        ...
        ValueError: SloAdmission needs ttft_ms= or tpot_ms=
        """
        if self.ttft_ms is None and self.tpot_ms is None:
            raise ValueError("SloAdmission needs ttft_ms= or tpot_ms=")
        for name in ("ttft_ms", "tpot_ms"):
            slo_ms(getattr(self, name), f"admission.{name}")
        return self

    def __call__(self, request: Request, views: Sequence[ReplicaView], now: float) -> bool:
        if self.ttft_ms is not None:
            ttft = views[0].ttft_estimate_ms
            if ttft > self.ttft_ms:
                self.last_reason = f"admission: predicted TTFT {ttft:.1f} ms > ttft_ms {self.ttft_ms}"
                return False
        if self.tpot_ms is not None:
            tpot = views[-1].tpot_estimate_ms
            if tpot > self.tpot_ms:
                self.last_reason = f"admission: predicted TPOT {tpot:.1f} ms > tpot_ms {self.tpot_ms}"
                return False
        return True


def make_admission(admission: Any) -> Any:
    """The admission callable for ``Simulator(admission=...)`` (None admits all), checked.

    Examples
    --------
    >>> make_admission(None) is None
    True
    >>> make_admission(SloAdmission(ttft_ms=500))
    SloAdmission(ttft_ms=500.0, tpot_ms=None)
    >>> make_admission("slo")
    Traceback (most recent call last):
    ...
    TypeError: admission must be None or a callable admit(request, views, now) -> bool such as SloAdmission(ttft_ms=2000), got 'slo'
    """
    if admission is None:
        return None
    if isinstance(admission, str) or not callable(admission):
        raise TypeError(
            "admission must be None or a callable admit(request, views, now) -> bool such as "
            f"SloAdmission(ttft_ms=2000), got {admission!r}"
        )
    check = getattr(admission, "checked", None)
    return check() if callable(check) else admission
