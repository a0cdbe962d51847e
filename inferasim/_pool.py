"""The process pool behind ``sweep(..., executor="processes")``.

A small pool of worker processes that the sweep drives itself, one task at
a time per worker, so it always knows which task each worker is running.
That is what :class:`concurrent.futures.ProcessPoolExecutor` cannot say:
when one of its workers dies (the out-of-memory killer sends it SIGKILL),
every pending future fails with ``BrokenProcessPool`` and the culprit is
not named. Here a worker's death costs only the task it was running:

- the other workers go on, and a new worker replaces the dead one;
- the task it was running is retried once, **alone** (after every other
  task finished, so nothing else competes for memory);
- a task whose worker dies on the retry too gets an error naming how the
  worker ended (``killed by signal SIGKILL``, ``exited with status 3``).

Workers ignore SIGINT: Ctrl-C stops the sweep in the parent, which then
terminates them (no traceback from every worker).
"""

from __future__ import annotations

import multiprocessing
import signal
from collections import deque
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection, wait
from typing import Any

__all__ = ["run_in_processes", "describe_exit"]

Result = tuple[int, dict[str, Any], "str | None"]


def describe_exit(exitcode: int | None) -> str:
    """How a worker process ended, in words.

    Examples
    --------
    >>> describe_exit(-9)
    'was killed by signal SIGKILL (as the out-of-memory killer does)'
    >>> describe_exit(3)
    'exited with status 3'
    """
    if exitcode is None:
        return "ended without an exit status"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        else:
            name = f"signal {name}"
        oom = " (as the out-of-memory killer does)" if -exitcode == signal.SIGKILL else ""
        return f"was killed by {name}{oom}"
    return f"exited with status {exitcode}"


def _worker_main(conn: Connection, init: Callable[..., None], initargs: tuple, run: Callable) -> None:
    """A worker: ``init(*initargs)``, then run each task received until None."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    init(*initargs)
    while True:
        try:
            task = conn.recv()
        except EOFError:  # the parent went away
            return
        if task is None:
            return
        out = run(task)
        try:
            conn.send(out)
        except Exception as exc:  # a metric value that cannot be pickled
            conn.send((out[0], {}, f"{type(exc).__name__}: the run's result could not be "
                                   f"sent back from the worker process: {exc}"))


class _Worker:
    def __init__(self, ctx: Any, init: Callable, initargs: tuple, run: Callable) -> None:
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(
            target=_worker_main, args=(child, init, initargs, run), daemon=True
        )
        self.process.start()
        child.close()
        self.task: Any = None

    def stop(self, *, force: bool) -> None:
        if not force:
            try:
                self.conn.send(None)
            except OSError:
                pass
            self.process.join(5)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join()
        self.conn.close()


def run_in_processes(
    tasks: list[Any],
    *,
    workers: int,
    init: Callable[..., None],
    initargs: tuple,
    run: Callable[[Any], Result],
    index: Callable[[Any], int],
) -> Iterator[Result]:
    """Results of ``run(task)`` for every task, in completion order.

    ``run`` returns ``(index, metrics, error)`` and must not raise; a task
    whose worker process dies twice (once among the others, once alone)
    yields ``(index(task), {}, "WorkerDied: ...")``.

    Examples
    --------
    Tasks here are already results, and ``tuple`` runs them:

    >>> tasks = [(i, {"x": i}, None) for i in range(3)]
    >>> sorted(run_in_processes(tasks, workers=2, init=int, initargs=(), run=tuple,
    ...                         index=lambda t: t[0]))
    [(0, {'x': 0}, None), (1, {'x': 1}, None), (2, {'x': 2}, None)]
    """
    if not tasks:
        return
    ctx = multiprocessing.get_context()
    pending: deque[Any] = deque(tasks)
    died_once: list[tuple[Any, int | None]] = []
    pool: list[_Worker] = []
    clean = False

    def dispatch(limit: int) -> None:
        busy = sum(w.task is not None for w in pool)
        for w in pool:
            if busy >= limit or not pending:
                return
            if w.task is None:
                _send(w, pending.popleft())
                busy += 1
        while pending and busy < limit:
            w = _Worker(ctx, init, initargs, run)
            pool.append(w)
            _send(w, pending.popleft())
            busy += 1

    def _send(w: _Worker, task: Any) -> None:
        w.task = task
        try:
            w.conn.send(task)
        except OSError:  # the idle worker is gone: its task is not lost, it waits
            pass  # (the death is seen by wait() below and the task goes back)

    def drain() -> Iterator[tuple[Any, Result | None, int | None]]:
        """(task, result or None when its worker died, exit code) as they end."""
        busy = [w for w in pool if w.task is not None]
        ready = set(wait([w.conn for w in busy] + [w.process.sentinel for w in busy]))
        for w in busy:
            if w.conn in ready or w.process.sentinel in ready:
                task = w.task
                result = None
                if w.conn.poll():
                    try:
                        result = w.conn.recv()
                    except (EOFError, OSError):
                        result = None
                if result is not None:
                    w.task = None
                    yield task, result, None
                elif not w.process.is_alive() or w.process.sentinel in ready:
                    w.process.join()
                    code = w.process.exitcode
                    w.stop(force=True)
                    pool.remove(w)
                    yield task, None, code

    try:
        for limit in (max(int(workers), 1), 1):
            if limit == 1:  # the retry round: each task whose worker died, alone
                pending.extend(t for t, _ in died_once)
                first_deaths = {index(t): code for t, code in died_once}
                died_once = []
            while pending or any(w.task is not None for w in pool):
                dispatch(limit)
                for task, result, code in drain():
                    if result is not None:
                        yield result
                    elif limit > 1:
                        died_once.append((task, code))
                    else:
                        first = describe_exit(first_deaths.get(index(task)))
                        second = describe_exit(code)
                        when = (
                            f"{second} twice: among the other runs, then rerun alone"
                            if first == second
                            else f"{second} when rerun alone (among the other runs it {first})"
                        )
                        yield (
                            index(task),
                            {},
                            f"WorkerDied: the worker process running this configuration {when}",
                        )
        clean = True
    finally:
        for w in pool:
            w.stop(force=not clean)
