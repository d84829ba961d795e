"""Every cache key comes from tunefuse.keys, and its spelling is what stored caches hold: the
keys of a known definition are pinned (a change here orphans every stored record, binary and
launch plan, so it must come with a format or version bump)."""

from __future__ import annotations

import ast
import pathlib

import numpy as np

from cache_db.env import Env
from tunefuse import DataType, FusionDefinition, keys
from tunefuse.compiler import source_key

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _pinned_fusion() -> FusionDefinition:
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        fd.add_output(fd.ops.sum(fd.ops.exp(x), dims=[1]))
    return fd


def test_the_keys_of_a_known_definition_are_unchanged():
    fd = _pinned_fusion()
    plan = fd.plan([np.zeros((4, 8), np.float32)])
    (seg,) = plan.segments
    got = {
        "fusion": fd.fusion.fusion_id[:16],
        "concretization": plan.info.conc_key[:16],
        "kernel": seg.kernel_key[:16],
        "shape": seg.shape_key,
        "source": source_key("__global__ void k() {}", "sm_90", ("-O3",), nvrtc="13.0")[:16],
        "env": Env("9.0", "NVIDIA H100", "13.0", "580.1", "v9").key[:16],
    }
    assert got == {
        "fusion": "c2cfe18394d01155",
        "concretization": "ed09e0f5e98c5511",
        "kernel": "50944fa8ab16460e",  # EReduce names its fusion value (codegen 11)
        "shape": "4x8",
        "source": "96454ef402b9694e",
        "env": "3d2ef91154204a94",
    }
    assert keys.digest("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert keys.source_key("s", "sm_90", "13.0", ("-O3",)) == keys.digest("s\0sm_90\x0013.0\0-O3")


def test_no_module_hashes_a_key_of_its_own():
    """hashlib appears in tunefuse.keys alone."""
    users = []
    for package in ("tunefuse", "cache_db", "cli"):
        for path in (ROOT / package).rglob("*.py"):
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module:
                    names = [node.module]
                if "hashlib" in names:
                    users.append(str(path.relative_to(ROOT)))
    assert users == ["tunefuse/keys.py"]
