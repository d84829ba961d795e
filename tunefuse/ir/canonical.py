"""The canonical JSON of a fusion: what its `fusion_id` hashes, and what `serialize` stores.

Writing only; reading (which replays every node through the inference rules) is
`serialize`. Imports nothing of the IR at run time, so the IR can name its own identity.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import TYPE_CHECKING, Any

from tunefuse.ir.dtypes import DataType
from tunefuse.ir.ops import ScalarRef

if TYPE_CHECKING:
    from tunefuse.ir.fusion import Fusion

FORMAT = "tunefuse.fusion"
VERSION = 1


def _encode(value: Any) -> Any:
    if isinstance(value, DataType):
        return value.value
    if isinstance(value, ScalarRef):
        return {"ref": value.index}
    if isinstance(value, tuple):
        return [_encode(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return {"float": repr(value)}
    return value


def encode_attrs(attrs: object) -> dict[str, Any]:
    return {f.name: _encode(getattr(attrs, f.name)) for f in dataclasses.fields(attrs)}  # type: ignore[arg-type]


def fusion_to_dict(fusion: Fusion) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": VERSION,
        "nodes": [
            {"op": n.op.value, "inputs": list(n.inputs), "attrs": encode_attrs(n.attrs)}
            for n in fusion.nodes
        ],
        "outputs": [
            {
                "value": o.value,
                "alias_input": o.alias_input,
                **({"stride_order": list(o.stride_order)} if o.stride_order is not None else {}),
            }
            for o in fusion.outputs
        ],
    }


def fusion_to_json(fusion: Fusion) -> str:
    """Canonical text: sorted keys, no whitespace; equal fusions give equal bytes."""
    return json.dumps(
        fusion_to_dict(fusion), sort_keys=True, separators=(",", ":"), allow_nan=False
    )
