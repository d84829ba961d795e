"""Every cache key tunefuse builds, in one place: what each one covers, and the one hash.

A key names everything that decides what it keys, and nothing else:

- `fusion_key`: the definition (its canonical JSON): equal definitions share it.
- `concretization_key`: a fusion as concretized for one input signature: the fusion, each
  symbolic reshape's transforms, each symbolic extent's class (0, 1 or n).
- `kernel_key`: a segment's structure (ops, dtypes, load and store patterns, index type,
  alignments): the code, whatever the sizes; `shape_key` adds the sizes, for the tuned
  params of one shape.
- `kernel_name`: one emitted kernel: its kernel key, its params and, for a kernel of static
  sizes, the constants it declares.
- `source_key`: a binary: everything that decides its bytes (the source, the target, the
  NVRTC version and options).
- `env_key`: the device and toolchain a record was measured on.
- `launch_plan_key`: one signature's launch plan: the launch plan format, the default
  heuristics' version, the fusion, the input and output signatures and the env.
- `binary_digest`: a binary's checksum (what the cache checks a cubin against when it reads it).

Each is sha256 over a text spelled here; the spellings are what stored caches hold, so they
change only with a format or version bump of the keyed thing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence


def digest(text: str) -> str:
    """The one hash: sha256 of the UTF-8 text, hex."""
    return hashlib.sha256(text.encode()).hexdigest()


def binary_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fusion_key(canonical_json: str) -> str:
    return digest(canonical_json)


def concretization_key(fusion_id: str, reshapes: Sequence, extents: Sequence) -> str:
    doc = {"fusion": fusion_id, "reshapes": reshapes, "extents": extents}
    return digest(json.dumps(doc, separators=(",", ":")))


def kernel_key(structure: str) -> str:
    return digest(structure)


def shape_key(extents: Sequence[int]) -> str:
    return "x".join(str(e) for e in extents)


def kernel_name(scheduler: str, code: str) -> str:
    """A kernel's name: a digest of its code (with its own name left out)."""
    return f"tf_{scheduler}_{digest(code)[:16]}"


def source_key(source: str, arch: str, nvrtc: str, options: Sequence[str] = ()) -> str:
    return digest("\0".join([source, arch, nvrtc, *options]))


def env_key(env: dict) -> str:
    return digest(json.dumps(env, sort_keys=True))


def launch_plan_key(parts: list) -> str:
    return digest(json.dumps(parts, sort_keys=True))
