"""The persistent cache: tuned params and compiled binaries keyed by kernel, shape and env,
and the queue of tuning jobs. SQLite by default, PostgreSQL for a fleet."""

from cache_db.store import CacheStore, Env, TunedRecord, default_cache_url

__all__ = ["CacheStore", "Env", "TunedRecord", "default_cache_url"]
