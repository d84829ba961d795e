"""Canonical JSON: exact round trips, stable fusion_id, and hostile input refused."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from strategies import fusions

from tunefuse import DataType, FusionDefinition, SerializationError
from tunefuse.ir.fusion import Fusion
from tunefuse.ir.serialize import fusion_from_json


def small_fusion() -> Fusion:
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, 4], contiguity=[True, True], dtype=DataType.Half)
        n = fd.define_scalar(dtype=DataType.Int)
        y = fd.ops.reshape(fd.ops.mul(x, float("inf")), new_shape=[n, -1])
        fd.add_output(fd.ops.sum(y, dims=[1]))
        fd.add_output(fd.ops.neg(x), alias_input=x)
    return fd.fusion


def test_round_trip_is_exact_and_canonical():
    f = small_fusion()
    text = f.to_json()
    g = fusion_from_json(text)
    assert g == f and g.to_json() == text and g.fusion_id == f.fusion_id
    assert json.loads(text)["version"] == 1
    assert small_fusion().fusion_id == f.fusion_id  # same definition, same id


def test_different_definitions_have_different_ids():
    def build(c):
        with FusionDefinition() as fd:
            fd.add_output(fd.ops.mul(fd.define_tensor(shape=[-1]), c))
        return fd.fusion.fusion_id

    assert build(0.5) != build(0.25)


@given(fusions())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_random_fusions_round_trip_with_the_same_id(case):
    fd, _ = case
    f = fd.fusion
    g = fusion_from_json(f.to_json())
    assert g == f and g.fusion_id == f.fusion_id


def mutate(path, value):
    doc = json.loads(small_fusion().to_json())
    target = doc
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return json.dumps(doc)


@pytest.mark.parametrize(
    "text, message",
    [
        ("{not json", "does not parse"),
        ("[]", "must be an object"),
        (mutate(["format"], "pickle"), "not a tunefuse fusion"),
        (mutate(["version"], 99), "unsupported fusion JSON version 99"),
        (mutate(["nodes", 0, "op"], "__import__"), "unknown op '__import__'"),
        (mutate(["nodes", 0, "attrs", "dtype"], "float8"), "unknown dtype 'float8'"),
        (mutate(["nodes", 0, "attrs", "shape"], "rm -rf"), "expected a list"),
        (mutate(["nodes", 0, "attrs", "evil"], 1), "unknown attrs \\['evil'\\]"),
        (mutate(["nodes", 0, "attrs", "shape"], KeyError), "missing attrs \\['shape'\\]"),
        (mutate(["nodes", 3, "inputs"], [0, 99]), "undefined value 99"),
        (mutate(["nodes", 3, "inputs"], [0, "1"]), "list of value ids"),
        (mutate(["outputs", 0, "value"], 1), "S1 is a scalar"),
        (mutate(["outputs"], []), "at least one output"),
        (mutate(["nodes", 4, "attrs", "shape"], [{"ref": 7}, -1]), "missing operand"),
        (mutate(["nodes", 5, "attrs", "dims"], [3]), "out of range"),
        (mutate(["extra"], 1), "unknown top-level keys"),
        (mutate(["nodes", 0, "attrs", "shape"], [2**63, -1]), "does not fit in int64"),
        (mutate(["nodes", 0, "attrs", "shape"], [-(2**70), -1]), "does not fit in int64"),
        (mutate(["nodes", 0, "attrs", "shape"], [2] * 100), "100 entries; the limit is 64"),
    ],
)
def test_malformed_or_hostile_json_is_refused_clearly(text, message):
    with pytest.raises(SerializationError, match=message):
        fusion_from_json(text)


def test_rank_and_extents_are_capped_in_definitions_and_json():
    from tunefuse.errors import ShapeError
    from tunefuse.ir.infer import MAX_RANK

    with pytest.raises(ShapeError, match=f"limit of {MAX_RANK} dims"):
        with FusionDefinition() as fd:
            fd.add_output(
                fd.ops.relu(fd.define_tensor(shape=[2] * (MAX_RANK + 1), dtype=DataType.Float))
            )
    with FusionDefinition() as fd:  # the limit itself is fine
        fd.add_output(fd.ops.relu(fd.define_tensor(shape=[-1] * MAX_RANK, dtype=DataType.Float)))
    doc = json.loads(fd.fusion.to_json())
    doc["nodes"][0]["attrs"]["shape"] = [1] * (MAX_RANK + 1)
    doc["nodes"][0]["attrs"]["contiguity"] = [True] * (MAX_RANK + 1)
    with pytest.raises(SerializationError, match=f"limit of {MAX_RANK} dims"):
        fusion_from_json(json.dumps(doc))
