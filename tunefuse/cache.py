"""The library's side of the persistent cache: `tunefuse.Cache(url)`, the process default,
and a guard that turns any cache failure into one warning and a run without the cache."""

from __future__ import annotations

import functools
import json
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

from tunefuse.errors import TunefuseError

T = TypeVar("T")


class Cache:
    """A persistent cache of tuned params and compiled kernels.

        cache = tunefuse.Cache("sqlite:///kernels.sqlite")   # or postgresql+psycopg://...
        fd.execute(inputs, cache=cache)

    Any failure of the database (unreachable, locked, corrupt) costs one warning; execution
    then goes on without the cache."""

    RETRY_FIRST_S = 30.0  # a cache that failed is tried again after this, then twice as long...
    RETRY_MAX_S = 600.0  # ...up to this

    def __init__(self, url: str | None = None) -> None:
        self.url = url
        self._store = None
        self._lock = threading.Lock()
        self._retry_at = 0.0  # monotonic time before which the cache is left alone
        self._retry_s = self.RETRY_FIRST_S
        self._warned = False

    @property
    def disabled(self) -> bool:
        """True while a failed cache waits for its next try (it is never given up for good:
        a database that was locked or down for a moment serves again later)."""
        return self._retry_at > 0.0 and time.monotonic() < self._retry_at

    @property
    def store(self):  # noqa: ANN201 - cache_db.CacheStore
        if self._store is None and not self.disabled:
            with self._lock:
                if self._store is None and not self.disabled:
                    from cache_db.store import CacheStore

                    self._store = self.guard(lambda: CacheStore.open(self.url), None)
        return self._store

    def guard(self, action: Callable[[], T], fallback: T) -> T:
        """Run a cache action; on a failure warn (once), leave the cache alone for a while
        (30 s, doubling to 10 min), return `fallback`: the call goes on without it."""
        if self.disabled:
            return fallback
        try:
            result = action()
        except Exception as e:  # noqa: BLE001 - the cache must never break execution
            self._retry_at = time.monotonic() + self._retry_s
            self._retry_s = min(2 * self._retry_s, self.RETRY_MAX_S)
            if not self._warned:
                self._warned = True
                warnings.warn(
                    f"tunefuse cache {self.url or '(default)'} is unusable, running without it "
                    f"(tried again in {self._retry_s / 2:.0f} s): {e}",
                    RuntimeWarning,
                    stacklevel=3,
                )
            return fallback
        if self._retry_at:
            self._retry_at, self._retry_s = 0.0, self.RETRY_FIRST_S  # working again
        return result

    def __repr__(self) -> str:
        return f"Cache({self.url!r})"


@functools.cache
def default_cache() -> Cache:
    return Cache(None)


def resolve(cache: Any) -> Cache | None:
    """execute()'s `cache` argument: the default, None (no cache), a Cache, or a URL."""
    if cache is None:
        return None
    if cache is DEFAULT:
        return default_cache()
    if isinstance(cache, Cache):
        return cache
    if isinstance(cache, str):
        return _cache_for_url(cache)
    raise TunefuseError(f"cache must be a tunefuse.Cache, a database URL or None, got {cache!r}")


@functools.cache
def _cache_for_url(url: str) -> Cache:
    return Cache(url)


class _Default:
    def __repr__(self) -> str:
        return "DEFAULT"


DEFAULT = _Default()


def signature_json(signature: tuple) -> str:
    """An input signature as data, for a tuning job to rebuild inputs from."""
    items = []
    for sig in signature:
        if hasattr(sig, "shape"):
            items.append(
                {
                    "kind": "tensor",
                    "dtype": sig.dtype.value,
                    "shape": list(sig.shape),
                    "strides": list(sig.strides),
                }
            )
        else:
            items.append({"kind": "scalar", "dtype": sig.dtype.value, "value": sig.value})
    return json.dumps(items)
