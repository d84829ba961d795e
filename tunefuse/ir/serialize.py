"""Canonical, versioned JSON for a fusion. JSON is data: it is never eval'd or unpickled.

Only what the user wrote is stored: each node's op, operand ids and attrs, and the outputs.
Loading replays every node through the same inference rules as the frontend, so a
malformed or hostile document fails with a clear error instead of building a bad fusion.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from types import NoneType, UnionType
from typing import Any, Union

from tunefuse.errors import DefinitionError, SerializationError
from tunefuse.ir.canonical import FORMAT, VERSION, encode_attrs, fusion_to_dict, fusion_to_json  # noqa: F401 - serialize's API
from tunefuse.ir.dtypes import DataType
from tunefuse.ir.fusion import Fusion
from tunefuse.ir.infer import FusionBuilder
from tunefuse.ir.ops import OpKind, ScalarRef, attrs_class

MAX_NODES = 100_000
MAX_LIST = 64  # any list attr (a shape, dims, pad widths): 4x the rank a fusion may have


def _decode(value: Any, hint: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    if origin in (Union, UnionType):
        errors = []
        for option in typing.get_args(hint):
            try:
                return _decode(value, option, where)
            except SerializationError as e:
                errors.append(str(e))
        raise SerializationError(f"{where}: {value!r} matches none of {hint}")
    if hint is NoneType:
        if value is None:
            return None
        raise SerializationError(f"{where}: expected null, got {value!r}")
    if origin is tuple:
        if not isinstance(value, list):
            raise SerializationError(f"{where}: expected a list, got {value!r}")
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            if len(value) > MAX_LIST:
                raise SerializationError(f"{where}: {len(value)} entries; the limit is {MAX_LIST}")
            return tuple(_decode(v, args[0], f"{where}[{i}]") for i, v in enumerate(value))
        if len(args) != len(value):
            raise SerializationError(f"{where}: expected {len(args)} entries, got {len(value)}")
        return tuple(_decode(v, a, f"{where}[{i}]") for i, (v, a) in enumerate(zip(value, args)))
    if hint is DataType:
        if not isinstance(value, str):
            raise SerializationError(f"{where}: expected a dtype name, got {value!r}")
        try:
            return DataType(value)
        except ValueError:
            raise SerializationError(f"{where}: unknown dtype {value!r}") from None
    if hint is ScalarRef:
        if not (isinstance(value, dict) and set(value) == {"ref"} and type(value["ref"]) is int):
            raise SerializationError(f"{where}: expected {{'ref': int}}, got {value!r}")
        return ScalarRef(value["ref"])
    if hint is bool:
        if type(value) is not bool:
            raise SerializationError(f"{where}: expected a bool, got {value!r}")
        return value
    if hint is int:
        if type(value) is not int:
            raise SerializationError(f"{where}: expected an int, got {value!r}")
        if not -(2**63) <= value < 2**63:
            raise SerializationError(f"{where}: {value} does not fit in int64")
        return value
    if hint is float:
        if (
            isinstance(value, dict)
            and set(value) == {"float"}
            and value["float"] in ("inf", "-inf", "nan")
        ):
            return float(value["float"])
        if type(value) is not float:
            raise SerializationError(f"{where}: expected a float, got {value!r}")
        return value
    raise SerializationError(f"{where}: cannot decode a {hint}")  # pragma: no cover


def decode_attrs(op: OpKind, raw: Any, where: str) -> object:
    cls = attrs_class(op)
    if not isinstance(raw, dict):
        raise SerializationError(f"{where}: attrs must be an object, got {raw!r}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = set(raw) - set(fields)
    if unknown:
        raise SerializationError(f"{where}: unknown attrs {sorted(unknown)} for {op.value}")
    missing = [n for n, f in fields.items() if n not in raw and f.default is dataclasses.MISSING]
    if missing:
        raise SerializationError(f"{where}: missing attrs {missing} for {op.value}")
    hints = typing.get_type_hints(cls)
    kwargs = {name: _decode(value, hints[name], f"{where}.{name}") for name, value in raw.items()}
    return cls(**kwargs)


def fusion_from_dict(doc: Any) -> Fusion:
    if not isinstance(doc, dict):
        raise SerializationError("fusion JSON must be an object")
    if doc.get("format") != FORMAT:
        raise SerializationError(
            f"not a tunefuse fusion: format is {doc.get('format')!r}, expected {FORMAT!r}"
        )
    if doc.get("version") != VERSION:
        raise SerializationError(
            f"unsupported fusion JSON version {doc.get('version')!r}; this tunefuse reads {VERSION}"
        )
    extra = set(doc) - {"format", "version", "nodes", "outputs"}
    if extra:
        raise SerializationError(f"unknown top-level keys {sorted(extra)}")
    nodes, outputs = doc.get("nodes"), doc.get("outputs")
    if not isinstance(nodes, list) or not isinstance(outputs, list):
        raise SerializationError("fusion JSON needs lists 'nodes' and 'outputs'")
    if len(nodes) > MAX_NODES:
        raise SerializationError(f"fusion JSON has {len(nodes)} nodes; the limit is {MAX_NODES}")
    builder = FusionBuilder()
    for i, raw in enumerate(nodes):
        where = f"nodes[{i}]"
        if not isinstance(raw, dict) or set(raw) != {"op", "inputs", "attrs"}:
            raise SerializationError(f"{where}: a node is an object with keys op, inputs, attrs")
        try:
            op = OpKind(raw["op"])
        except ValueError:
            raise SerializationError(f"{where}: unknown op {raw['op']!r}") from None
        inputs = raw["inputs"]
        if not isinstance(inputs, list) or any(type(v) is not int for v in inputs):
            raise SerializationError(f"{where}: inputs must be a list of value ids")
        attrs = decode_attrs(op, raw["attrs"], where)
        try:
            builder.add(op, inputs, attrs)
        except DefinitionError as e:
            raise SerializationError(f"{where}: {e}") from e
    for i, raw in enumerate(outputs):
        where = f"outputs[{i}]"
        if not isinstance(raw, dict) or set(raw) - {"stride_order"} != {"value", "alias_input"}:
            raise SerializationError(
                f"{where}: an output is an object with keys value, alias_input (and stride_order)"
            )
        value, alias, order = raw["value"], raw["alias_input"], raw.get("stride_order")
        if type(value) is not int or not (alias is None or type(alias) is int):
            raise SerializationError(f"{where}: value and alias_input must be value ids")
        if "stride_order" in raw and not (
            isinstance(order, list) and all(type(o) is int for o in order)
        ):
            raise SerializationError(f"{where}: stride_order must be a list of ints")
        try:
            builder.add_output(value, alias, tuple(order) if order is not None else None)
        except DefinitionError as e:
            raise SerializationError(f"{where}: {e}") from e
    try:
        return builder.finish()
    except DefinitionError as e:
        raise SerializationError(str(e)) from e


def fusion_from_json(text: str | bytes) -> Fusion:
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
        raise SerializationError(f"fusion JSON does not parse: {e}") from None
    return fusion_from_dict(doc)
