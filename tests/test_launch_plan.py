"""Launch plans as data: built from real plans (no GPU), kept as JSON, read back exactly;
anything else stored under their key is refused by name, never misread."""

import dataclasses
import json

import numpy as np
import pytest
import sqlalchemy as sa
from fusion_zoo import ZOO, build, inputs_for
from hypothesis import HealthCheck, given, settings
from strategies import fusions
from test_cache_store import ENV, OTHER_ENV, fusion_row, store  # noqa: F401 - the store fixture
from test_frontend import ROOT

from cache_db.models import BinaryRow
from tunefuse import DataType
from tunefuse.arrays import Device
from tunefuse.device_info import H100
from tunefuse.fusion_file import load_fusion_file
from tunefuse.planning.plan import make_plan
from tunefuse.planning.signature import FusionInputs, bind_inputs
from tunefuse.runtime.launch_plan import LaunchPlan, LaunchPlanError, launch_plan_key
from tunefuse.runtime.lower import default_chooser, generate_launches


def launch_plan_for(fd, inputs):
    """The plan and its launch plan as an H100 lowers it by default (no binaries)."""
    plan = make_plan(fd.fusion, inputs)
    return plan, generate_launches(plan, H100, default_chooser(H100))[1]


def cases():
    rng = np.random.default_rng(0)
    for name, define in ZOO.items():
        for dtype in (DataType.Float, DataType.BFloat16):
            fd = build(define, dtype)
            yield f"{name}-{dtype.value}", fd, inputs_for(fd, 96, 160, rng)
    for case in load_fusion_file(ROOT / "examples" / "seed_fusions.py"):
        yield case.name, case.build(), case.example_inputs(rng)


CASES = list(cases())


@pytest.mark.parametrize("name,fd,inputs", CASES, ids=[c[0] for c in CASES])
def test_a_launch_plan_reads_back_exactly(name, fd, inputs):
    plan, lp = launch_plan_for(fd, inputs)
    text = lp.to_json()
    back = LaunchPlan.from_json(text, len(fd.fusion.nodes))
    assert back == lp
    assert back.to_json() == text
    assert [k.kernel_key for k in back.kernels] == [s.kernel_key for s in plan.segments]
    for k in back.kernels:  # every argument is static or filled per call, exactly once
        assert sorted([p for p, _ in k.pointer_slots] + [p for p, _, _ in k.scalar_slots]) == [
            p for p, a in enumerate(k.static_args) if a is None
        ]
        template = k.arg_template()
        assert all(a is None or type(a) in (np.int32, np.int64) for a in template)


def tampered(text, edit):
    doc = json.loads(text)
    edit(doc)
    return json.dumps(doc)


def _set_first_kernel(doc, **fields):
    doc["kernels"][0].update(fields)


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda d: d.update(format=0), "format"),
        (lambda d: d["buffers"][0].__setitem__(0, 5), "buffer ids"),
        (lambda d: d["buffers"][0].__setitem__(1, "scratch"), "not a launch plan"),
        (lambda d: d["outputs"][0].__setitem__(2, 99), "buffer 99 out of range"),
        (lambda d: d.update(host_nodes=[10_000]), "host node index"),
        (lambda d: _set_first_kernel(d, chosen="source"), "chosen by 'source'"),
        (
            lambda d: _set_first_kernel(
                d, static_args=[["i32", 1]] * len(d["kernels"][0]["static_args"])
            ),
            "argument slots",
        ),
        (
            lambda d: _set_first_kernel(
                d, static_args=[["i16", 1] if a else a for a in d["kernels"][0]["static_args"]]
            ),
            "index type",
        ),
        (lambda d: _set_first_kernel(d, grid=[1, 1]), "launch dimensions"),
        (lambda d: _set_first_kernel(d, params=[1, 2]), "params must be an object"),
        (lambda d: _set_first_kernel(d, numel="many"), "expected an integer"),
        (lambda d: d.update(fixed_scalars=[[1, ["complex", "1j"]]]), "host scalar"),
        (lambda d: d.pop("kernels"), "not a launch plan"),
    ],
)
def test_a_damaged_launch_plan_is_refused_by_name(edit, message):
    name, fd, inputs = next(c for c in CASES if c[0] == "layernorm-float")
    _, lp = launch_plan_for(fd, inputs)
    with pytest.raises(LaunchPlanError, match=message):
        LaunchPlan.from_json(tampered(lp.to_json(), edit), len(fd.fusion.nodes))


def test_not_json_is_refused():
    with pytest.raises(LaunchPlanError, match="not a launch plan"):
        LaunchPlan.from_json("{not json", 3)
    with pytest.raises(LaunchPlanError, match="format"):
        LaunchPlan.from_json("[]", 3)


def test_the_key_is_everything_that_decides_the_plan():
    fd = build(ZOO["bias_gelu"], DataType.Float)
    fi = FusionInputs(fd.fusion)
    rng = np.random.default_rng(0)
    x = inputs_for(fd, 64, 128, rng)

    def key(inputs, out=(), env=ENV, fid=fd.fusion.fusion_id):
        return launch_plan_key(fid, bind_inputs(fd.fusion, inputs, fi).signature, out, env.key)

    base = key(x)
    assert key([a.copy() for a in x]) == base  # other data, same signature
    assert key(inputs_for(fd, 64, 256, rng)) != base  # shape
    sig = bind_inputs(fd.fusion, x, fi).signature
    for change in (
        dict(alignment=4),
        dict(strides=(1, 64)),
        dict(device=Device.CUDA),
        dict(dtype=DataType.Half),
    ):
        other = (dataclasses.replace(sig[0], **change),) + sig[1:]
        assert launch_plan_key(fd.fusion.fusion_id, other, (), ENV.key) != base, change
    assert key(x, env=OTHER_ENV) != base
    assert key(x, fid="0" * 64) != base
    assert key(x, out=(sig[0],)) != base and key(x, out=(None,)) != base


def test_new_default_heuristics_plan_again(monkeypatch):
    """A stored plan may hold kernels the default heuristics chose: when those change
    (HEURISTICS_VERSION), the key changes and the next process plans with the new ones."""
    import tunefuse.schedulers

    fd = build(ZOO["row_sum"], DataType.Float)
    sig = bind_inputs(
        fd.fusion, inputs_for(fd, 64, 128, np.random.default_rng(0)), FusionInputs(fd.fusion)
    ).signature
    base = launch_plan_key(fd.fusion.fusion_id, sig, (), ENV.key)
    monkeypatch.setattr(
        tunefuse.schedulers, "HEURISTICS_VERSION", tunefuse.schedulers.HEURISTICS_VERSION + 1
    )
    assert launch_plan_key(fd.fusion.fusion_id, sig, (), ENV.key) != base


def test_the_store_keeps_one_launch_plan_a_key_and_prunes_them(store):
    fid = fusion_row(store)
    store.note_plan(ENV, launch_plan=("p" * 64, fid, '{"v": 1}'))
    store.note_plan(ENV, launch_plan=("p" * 64, fid, '{"v": 2}'))  # a re-plan replaces it
    store.note_plan(OTHER_ENV, launch_plan=("q" * 64, fid, '{"v": 3}'))
    assert store.get_launch_plan("p" * 64) == '{"v": 2}'
    assert store.get_launch_plan("missing") is None
    assert store.stats().launch_plans == 2
    assert store.prune(stale_env=ENV, dry_run=True)["launch_plans"] == 1
    assert store.get_launch_plan("q" * 64) is not None  # a dry run deletes nothing
    assert store.prune(stale_env=ENV)["launch_plans"] == 1
    assert store.get_launch_plan("q" * 64) is None and store.get_launch_plan("p" * 64) == '{"v": 2}'


def test_a_launch_plan_goes_with_a_binary_it_names(store):
    fid = fusion_row(store)
    store.note_plan(
        ENV,
        binaries=[("c" * 64, b"\x7fELF-c", "tf_c", "sm_90", "13.5", None)],
        launch_plan=("p" * 64, fid, json.dumps({"code_key": "c" * 64})),
    )
    store.note_plan(ENV, launch_plan=("r" * 64, fid, json.dumps({"code_key": "d" * 64})))
    done = store.prune(max_bytes=0)
    assert done["binaries"] == ["c" * 64] and done["launch_plans"] == 1
    assert store.get_launch_plan("p" * 64) is None and store.get_launch_plan("r" * 64) is not None


def test_a_kept_plan_and_its_checks_are_read_on_one_connection(store):
    from test_cache_store import record

    fid = fusion_row(store)
    rec, cubin = record(shape="64x64")
    store.put_record(rec, cubin, "sm_90", "13.5")
    other, other_cubin = record(shape="64x64", env=OTHER_ENV, cubin=b"\x7fELF-other")
    store.put_record(other, other_cubin, "sm_90", "13.5")
    store.note_plan(
        ENV, jobs=[(fid, 0, "j" * 64, "4", "[]")], launch_plan=("p" * 64, fid, "the plan")
    )

    def keys_of(text):
        assert text == "the plan"
        return ["k" * 64, "j" * 64, "z" * 64], [rec.code_key, "missing"]

    text, records, queued, binaries = store.launch_plan_reads("p" * 64, ENV, keys_of)
    assert text == "the plan"
    assert records == {("k" * 64, "64x64"): rec.params}  # this env's record only
    assert queued == {("j" * 64, "4")}
    assert binaries == {rec.code_key: (cubin, "tf_pointwise_x")}
    assert store.launch_plan_reads("missing", ENV, keys_of) is None
    assert (
        store.launch_plan_reads("p" * 64, ENV, lambda text: None) is None
    )  # unreadable: re-planned
    assert store.launch_plan_reads("p" * 64, ENV, lambda text: ([], []))[1:] == ({}, set(), {})
    with store.engine.begin() as c:
        c.execute(
            sa.update(BinaryRow).where(BinaryRow.code_key == rec.code_key).values(cubin=b"bad")
        )
    assert (
        store.launch_plan_reads("p" * 64, ENV, keys_of)[3] == {}
    )  # a corrupt binary is never handed out
    assert store.lookup(rec.kernel_key, rec.shape_key, ENV) is None  # and its record is quarantined


@given(fusions(max_ops=8, dtypes=(DataType.Float, DataType.BFloat16, DataType.Half)))
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
def test_any_fusions_launch_plan_reads_back_exactly(case):
    fd, inputs = case
    _, lp = launch_plan_for(fd, inputs)
    assert LaunchPlan.from_json(lp.to_json(), len(fd.fusion.nodes)) == lp
