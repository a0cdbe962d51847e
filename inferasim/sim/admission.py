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
attainment count it as a miss.

Built-in (``Simulator(admission=...)``): ``None`` admits every request;
``"slo"`` is :class:`SloAdmission`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from inferasim.sim.router import ReplicaView, Request

__all__ = ["SloAdmission", "make_admission"]


class SloAdmission:
    """Reject at arrival what would miss its SLO on the instance chosen for it.

    A request is rejected when its predicted TTFT (the chosen prefill
    instance's :attr:`~inferasim.sim.router.ReplicaView.ttft_estimate_ms`)
    exceeds ``slo_ttft_ms``, or its predicted TPOT on the chosen decode
    instance (:attr:`~inferasim.sim.router.ReplicaView.tpot_estimate_ms`)
    exceeds ``slo_tpot_ms``. An objective left ``None`` is not checked.
    :attr:`last_reason` says why the last request was rejected.

    Parameters
    ----------
    slo_ttft_ms, slo_tpot_ms : float, optional
        The objectives (ms).

    Examples
    --------
    >>> from types import SimpleNamespace as NS
    >>> slo = SloAdmission(slo_ttft_ms=100.0, slo_tpot_ms=20.0)
    >>> slo(None, (NS(ttft_estimate_ms=80.0, tpot_estimate_ms=15.0),), 0.0)
    True
    >>> slo(None, (NS(ttft_estimate_ms=130.0, tpot_estimate_ms=15.0),), 0.0), slo.last_reason
    (False, 'admission: predicted TTFT 130.0 ms > slo_ttft_ms 100.0')
    """

    def __init__(self, slo_ttft_ms: float | None = None, slo_tpot_ms: float | None = None) -> None:
        for name, v in (("slo_ttft_ms", slo_ttft_ms), ("slo_tpot_ms", slo_tpot_ms)):
            if v is not None and not (isinstance(v, int | float) and v > 0 and math.isfinite(v)):
                raise ValueError(f"{name} must be a positive number, got {v!r}")
        self.slo_ttft_ms = slo_ttft_ms
        self.slo_tpot_ms = slo_tpot_ms
        self.last_reason = ""

    def __repr__(self) -> str:
        return f"SloAdmission(slo_ttft_ms={self.slo_ttft_ms}, slo_tpot_ms={self.slo_tpot_ms})"

    def __call__(self, request: Request, views: Sequence[ReplicaView], now: float) -> bool:
        if self.slo_ttft_ms is not None:
            ttft = views[0].ttft_estimate_ms
            if ttft > self.slo_ttft_ms:
                self.last_reason = (
                    f"admission: predicted TTFT {ttft:.1f} ms > slo_ttft_ms {self.slo_ttft_ms}"
                )
                return False
        if self.slo_tpot_ms is not None:
            tpot = views[-1].tpot_estimate_ms
            if tpot > self.slo_tpot_ms:
                self.last_reason = (
                    f"admission: predicted TPOT {tpot:.1f} ms > slo_tpot_ms {self.slo_tpot_ms}"
                )
                return False
        return True


def make_admission(
    admission: str | Callable[..., Any] | None,
    *,
    slo_ttft_ms: float | None = None,
    slo_tpot_ms: float | None = None,
) -> Callable[..., Any] | None:
    """The admission callable for ``Simulator(admission=...)`` (None admits all).

    Examples
    --------
    >>> make_admission(None) is None
    True
    >>> make_admission("slo", slo_ttft_ms=500)
    SloAdmission(slo_ttft_ms=500, slo_tpot_ms=None)
    >>> make_admission("slo")
    Traceback (most recent call last):
    ...
    ValueError: admission='slo' needs slo_ttft_ms= or slo_tpot_ms=
    """
    if admission is None:
        return None
    if isinstance(admission, str):
        if admission != "slo":
            raise ValueError(f"admission must be None, 'slo' or a callable, got {admission!r}")
        if slo_ttft_ms is None and slo_tpot_ms is None:
            raise ValueError("admission='slo' needs slo_ttft_ms= or slo_tpot_ms=")
        return SloAdmission(slo_ttft_ms, slo_tpot_ms)
    if not callable(admission):
        raise TypeError(f"admission must be None, 'slo' or a callable, got {admission!r}")
    return admission
