"""The ``inferasim`` command's entry point (console script and ``python -m inferasim``).

Its first instruction makes Ctrl-C during the imports that follow one line
and exit status 130 (:mod:`inferasim._interrupt`). Before it run only the
interpreter's start-up and ``import inferasim``, which imports nothing but
:mod:`inferasim.errors`.
"""

from __future__ import annotations

import sys

from inferasim._interrupt import MESSAGE, starting, work_begins

__all__ = ["main"]


def main() -> int:
    """Run ``inferasim`` with ``sys.argv``; the exit status (130 after Ctrl-C).

    Examples
    --------
    >>> import signal, sys
    >>> before = signal.getsignal(signal.SIGINT)
    >>> saved, sys.argv = sys.argv, ["inferasim", "--version"]
    >>> try:
    ...     main()
    ... finally:
    ...     sys.argv = saved
    inferasim 0.1.0
    0
    >>> signal.getsignal(signal.SIGINT) is before
    True
    """
    starting()  # the first instruction
    try:
        from inferasim.cli import main as run

        return run()
    except KeyboardInterrupt:
        try:
            print(MESSAGE, file=sys.stderr)
        except (KeyboardInterrupt, OSError):  # a second Ctrl-C, or stderr closed
            pass
        return 130
    finally:
        work_begins()
