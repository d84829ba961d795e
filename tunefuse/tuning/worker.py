"""Crash isolation: candidates run in a worker process that may die without harm.

The parent sends a request (a picklable dict) and waits with a timeout. A worker that
segfaults, exits, or hangs past the timeout is killed and replaced; the request's answer is
a `WorkerDied` with what happened, and the next request goes to a fresh worker. A handler
that fails with a sticky CUDA error (the context is poisoned: every later call would fail)
ends its worker the same way.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import traceback
from dataclasses import dataclass
from typing import Any

from tunefuse.errors import TunefuseError

# A worker imports its handler (and, under spawn, the calling script again) before its first
# request: it has this long at least to say it is ready (the requests' timeout if longer).
START_TIMEOUT_S = 120.0
# What a worker that ends before it is ready most likely met: spawn runs the calling script's
# top level again in the child, and a script that tunes at its top level starts a worker there.
SPAWN_HINT = (
    "Python's multiprocessing starts the worker with 'spawn', which imports the calling script "
    "again: a script that calls tunefuse.tune() must do so under "
    '`if __name__ == "__main__":`'
)


class WorkerStartError(TunefuseError, RuntimeError):
    """The worker process could not start: it ended, or failed to load its handler, before
    it was ready for a request. Not a candidate's fault: no request is tried."""


@dataclass(frozen=True)
class WorkerDied:
    """The worker did not answer: it crashed (exit code / signal) or hung (timeout)."""

    reason: str


def _serve(conn, handler_path: str, setup: Any) -> None:  # noqa: ANN001
    module, _, name = handler_path.rpartition(".")
    try:
        handler = getattr(importlib.import_module(module), name)
    except Exception as e:  # noqa: BLE001 - reported to the parent, which raises it
        conn.send(("unstartable", f"{type(e).__name__}: {e}"))
        return
    conn.send(("ready", None))
    state: dict = {"setup": setup}
    while True:
        try:
            request = conn.recv()
        except EOFError:
            return
        if request is None:
            return
        try:
            conn.send(("ok", handler(request, state)))
        except Exception as e:  # noqa: BLE001 - a Python error is an answer, not a crash
            if _cuda_context_poisoned():
                # A sticky CUDA error (an illegal address): every later call in this process
                # would fail with it. Die, so that the parent starts a fresh worker.
                conn.send(("died", f"sticky CUDA error: {type(e).__name__}: {str(e)[:300]}"))
                os._exit(3)
            conn.send(("error", f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=4)}"))


def _cuda_context_poisoned() -> bool:
    """True when this process's current CUDA context holds a sticky error."""
    try:
        from cuda.bindings import driver

        from tunefuse.runtime.device import _address

        _, ctx = driver.cuCtxGetCurrent()
        if not _address(ctx):
            return False
        (err,) = driver.cuCtxSynchronize()
    except Exception:  # noqa: BLE001 - no driver, no CUDA context to poison
        return False
    return int(err) != 0


class Worker:
    """One worker process running `handler_path(request, state)` for each request."""

    def __init__(self, handler_path: str, setup: Any = None, *, timeout_s: float = 60.0) -> None:
        self.handler_path = handler_path
        self.setup = setup
        self.timeout_s = timeout_s
        self.restarts = 0
        self._ctx = multiprocessing.get_context("spawn")
        self._process = None
        self._conn = None

    def _start(self) -> None:
        """A fresh worker process, ready for requests; WorkerStartError naming why not."""
        parent, child = self._ctx.Pipe()
        self._process = self._ctx.Process(
            target=_serve, args=(child, self.handler_path, self.setup), daemon=True
        )
        self._process.start()
        child.close()
        self._conn = parent
        wait = max(START_TIMEOUT_S, self.timeout_s)
        try:
            if not parent.poll(wait):
                self._kill()
                raise WorkerStartError(f"the worker process was not ready within {wait:.0f} s")
            status, value = parent.recv()
        except (EOFError, BrokenPipeError, ConnectionResetError, OSError):
            self._process.join(timeout=5)
            code = self._process.exitcode
            self._kill()
            raise WorkerStartError(
                f"the worker process ended before it was ready (exit code {code}). {SPAWN_HINT}"
            ) from None
        if status == "unstartable":
            self._kill()
            raise WorkerStartError(f"the worker could not load {self.handler_path}: {value}")

    def request(self, payload: Any, timeout_s: float | None = None) -> Any:
        """The handler's result; raises RuntimeError for a Python error in the handler and
        WorkerStartError when no worker can start; returns WorkerDied when the process
        crashed or hung (it is then replaced)."""
        if self._process is None or not self._process.is_alive():
            self._start()
        assert self._conn is not None and self._process is not None
        try:
            self._conn.send(payload)
            if not self._conn.poll(timeout_s if timeout_s is not None else self.timeout_s):
                self._kill()
                return WorkerDied(f"no answer within {timeout_s or self.timeout_s:.0f} s (hung)")
            status, value = self._conn.recv()
        except (EOFError, BrokenPipeError, ConnectionResetError, OSError):
            self._process.join(timeout=5)
            code = self._process.exitcode
            self._kill()
            return WorkerDied(f"worker died (exit code {code})")
        if status == "died":
            self._kill()
            return WorkerDied(value)
        if status == "error":
            raise RuntimeError(value)
        return value

    def _kill(self) -> None:
        if self._process is not None:
            if self._process.is_alive():
                self._process.kill()
            self._process.join(timeout=5)
        self._process = None
        self._conn = None
        self.restarts += 1

    def close(self) -> None:
        if self._process is not None and self._process.is_alive():
            try:
                self._conn.send(None)  # type: ignore[union-attr]
                self._process.join(timeout=5)
            except OSError:
                pass  # the pipe is already gone: the kill below ends it
            if self._process.is_alive():
                self._process.kill()
        self._process = None

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
