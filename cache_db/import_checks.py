"""What `cache import` accepts: every field of every line checked for type, range and
length before anything is written (SQLite stores an oversized value that PostgreSQL then
refuses; a record's params must be what its scheduler can read), and every binary bound to
its key: the key must be the hash of the binary's own source, arch, NVRTC version and
options, and the bytes are compiled again from that source here (a file could carry a
planted binary under an honest key). A binary made by another NVRTC than this machine's
cannot be compiled again identically: it is imported quarantined, never served.

Pure checks that raise `ImportRefused` naming the field; the store does the writing."""

from __future__ import annotations

import math
import re
from typing import Any

from cache_db.models import BinaryRow, FusionRow, RecordRow

HEX64 = re.compile(r"[0-9a-f]{64}")
ARCH = re.compile(r"sm_[0-9]{2,3}a?")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SHAPE_KEY = re.compile(r"[0-9]+(x[0-9]+)*")
MAX_SOURCE = 4 * 1024 * 1024
MAX_BINARY = 64 * 1024 * 1024
MAX_TRIALS = 10**9


class ImportRefused(ValueError):
    """A line of an export that cannot be imported; the message names the field."""


def _length(model: type, column: str) -> int:
    return model.__table__.c[column].type.length  # type: ignore[attr-defined]


def text(
    item: dict,
    key: str,
    *,
    limit: int | None = None,
    pattern: re.Pattern | None = None,
    optional: bool = False,
) -> str | None:
    value = item.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise ImportRefused(f"{key} must be text, not {type(value).__name__}")
    if limit is not None and len(value) > limit:
        raise ImportRefused(f"{key} is {len(value)} characters long (at most {limit})")
    if pattern is not None and not pattern.fullmatch(value):
        raise ImportRefused(f"{key} {value[:40]!r} is not well formed")
    return value


def number(item: dict, key: str, *, optional: bool = True) -> float | None:
    value = item.get(key)
    if value is None and optional:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        raise ImportRefused(f"{key} must be a finite number, 0 or more, not {value!r}")
    return float(value)


def count(item: dict, key: str) -> int:
    value = item.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TRIALS:
        raise ImportRefused(f"{key} must be a whole number from 0 to {MAX_TRIALS}, not {value!r}")
    return value


def check_fusion(item: dict) -> None:
    text(item, "fusion_id", pattern=HEX64)
    text(item, "name", limit=_length(FusionRow, "name"), optional=True)
    text(item, "canonical_json", limit=MAX_SOURCE)


def check_binary(item: dict) -> None:
    """The binary line's fields, and its key: the hash of its source, arch, NVRTC version
    and this tunefuse's compile options."""
    from tunefuse.compiler import COMPILE_OPTIONS, source_key

    code_key = text(item, "code_key", pattern=HEX64)
    text(item, "sha256", pattern=HEX64)
    text(item, "kernel_name", limit=_length(BinaryRow, "kernel_name"), pattern=NAME)
    arch = text(item, "arch", limit=_length(BinaryRow, "arch"), pattern=ARCH)
    nvrtc = text(
        item,
        "nvrtc_version",
        limit=_length(BinaryRow, "nvrtc_version"),
        pattern=re.compile(r"[0-9.]+"),
    )
    source = item.get("source")
    if not isinstance(source, str) or not source:
        raise ImportRefused(f"binary {code_key[:12]} has no source: its key cannot be checked")  # type: ignore[index]
    if len(source) > MAX_SOURCE:
        raise ImportRefused(
            f"binary {code_key[:12]}'s source is {len(source)} characters (at most {MAX_SOURCE})"
        )  # type: ignore[index]
    if len(item.get("cubin") or "") > MAX_BINARY * 4 // 3 + 4:
        raise ImportRefused(f"binary {code_key[:12]} is larger than {MAX_BINARY} bytes")  # type: ignore[index]
    if source_key(source, arch, COMPILE_OPTIONS, nvrtc=nvrtc) != code_key:  # type: ignore[arg-type]
        raise ImportRefused(
            f"binary {code_key[:12]}: its code key is not the hash of its source, arch, "  # type: ignore[index]
            "NVRTC version and options"
        )


def check_record(item: dict, binaries: set[str], fusions: set[str]) -> Any:
    """The record line's fields; returns its Env. Params are read by their scheduler."""
    from cache_db.env import Env
    from tunefuse.planning.kernel_ir import SchedulerKind
    from tunefuse.schedulers import params_from_dict

    text(item, "kernel_key", pattern=HEX64)
    text(item, "shape_key", limit=_length(RecordRow, "shape_key"), pattern=SHAPE_KEY)
    env = item.get("env")
    if not isinstance(env, dict) or set(env) != {
        "compute_capability",
        "device_name",
        "nvrtc_version",
        "driver_version",
        "codegen_version",
    }:
        raise ImportRefused(
            "env must be an object of compute_capability, device_name, nvrtc_version, "
            "driver_version and codegen_version"
        )
    for key in env:
        text(env, key, limit=_length(RecordRow, key))
    kinds = {k.value: k for k in SchedulerKind}
    scheduler = text(item, "scheduler", limit=_length(RecordRow, "scheduler"))
    if scheduler not in kinds:
        raise ImportRefused(f"scheduler {scheduler!r} is none of {sorted(kinds)}")
    if params_from_dict(kinds[scheduler], item.get("params")) is None:  # type: ignore[arg-type]
        raise ImportRefused(
            f"params {str(item.get('params'))[:200]} do not fit the {scheduler} scheduler"
        )
    for key in ("median_us", "spread_us", "default_us"):
        number(item, key)
    count(item, "trials")
    code_key = text(item, "code_key", pattern=HEX64)
    if code_key not in binaries:
        raise ImportRefused(f"record refers to binary {code_key[:12]} not in the file")  # type: ignore[index]
    fusion_id = text(item, "fusion_id", pattern=HEX64, optional=True)
    if fusion_id is not None and fusion_id not in fusions:
        raise ImportRefused("record refers to a fusion not in the file")
    history = item.get("history") or []
    if not isinstance(history, list) or len(history) > 100_000:
        raise ImportRefused("history must be a list of [trial, µs or null, state]")
    for entry in history:
        if (
            not isinstance(entry, list)
            or len(entry) != 3
            or isinstance(entry[0], bool)
            or not isinstance(entry[0], int)
            or not (
                entry[1] is None
                or (
                    isinstance(entry[1], (int, float))
                    and not isinstance(entry[1], bool)
                    and math.isfinite(entry[1])
                )
            )
            or not isinstance(entry[2], str)
            or len(entry[2]) > 16
        ):
            raise ImportRefused(
                f"history entry {str(entry)[:80]} is not [trial, µs or null, state]"
            )
    return Env(**env)
