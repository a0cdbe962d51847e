"""Ctrl-C while the ``inferasim`` command starts: one line, exit status 130.

While the command is still importing its dependencies (most of a second:
numpy, pandas, the simulator), catching KeyboardInterrupt is not enough:
an interrupt raised inside a C extension's import comes out as an
``ImportError`` (numpy turns it into "Importing the numpy C-extensions
failed"), and one raised before the command's ``try`` is a traceback. So
:func:`starting`, the first instruction of the entry point
(:mod:`inferasim._entry`), installs a SIGINT handler that prints
``inferasim: interrupted`` and ends the process at once (``os._exit(130)``:
nothing has been written yet). :func:`work_begins` puts the previous
handler (Python's: a KeyboardInterrupt) back when the command's work
starts, so code that cleans up on KeyboardInterrupt still can.
"""

from __future__ import annotations

import os
import signal
from types import FrameType

__all__ = ["starting", "work_begins", "MESSAGE"]

MESSAGE = "inferasim: interrupted"
_previous: list = [signal.default_int_handler]  # the handler starting() replaced


def _interrupted_while_starting(signum: int, frame: FrameType | None) -> None:
    try:
        os.write(2, (MESSAGE + "\n").encode())
    finally:
        os._exit(130)


def starting() -> None:
    """Until :func:`work_begins`, Ctrl-C ends the process: one line, status 130.

    Examples
    --------
    >>> import signal
    >>> before = signal.getsignal(signal.SIGINT)
    >>> starting(); signal.getsignal(signal.SIGINT) is before
    False
    >>> work_begins(); signal.getsignal(signal.SIGINT) is before
    True
    """
    _previous[0] = signal.signal(signal.SIGINT, _interrupted_while_starting)


def work_begins() -> None:
    """Give Ctrl-C back to the handler :func:`starting` replaced.

    Does nothing unless :func:`starting` ran (so calling
    :func:`inferasim.cli.main` from Python changes no handler).

    Examples
    --------
    >>> import signal
    >>> before = signal.getsignal(signal.SIGINT)
    >>> work_begins()
    >>> signal.getsignal(signal.SIGINT) is before
    True
    """
    if signal.getsignal(signal.SIGINT) is _interrupted_while_starting:
        signal.signal(signal.SIGINT, _previous[0])
