"""Two GPUs (marker gpu; skipped with fewer than two): every path runs on the device it is
given. fd.execute on device-1 arrays, the daemon over both devices, and a measuring worker
that hits a sticky CUDA error on device 1 and comes back."""

import numpy as np
import pytest
from fusion_zoo import ZOO, build, inputs_for

from tunefuse import DataType, FusionDefinition, reference
from tunefuse.errors import InputMismatchError

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def torch():
    torch = pytest.importorskip("torch")
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    return torch


@pytest.mark.parametrize("name", ["softmax", "bias_gelu", "layernorm", "col_sum", "transpose2d"])
def test_execute_on_device_1_tensors(torch, name, rng):
    fd = build(ZOO[name], DataType.Float)
    host = inputs_for(fd, 67, 130, rng)
    before = torch.cuda.current_device()
    inputs = [torch.from_numpy(x).to("cuda:1") for x in host]
    for _ in range(2):  # the checked path, then the cache-hit launcher
        outs = fd.execute(inputs)
        for got, want in zip(outs, reference.run(fd.fusion, host)):
            assert got.device == torch.device("cuda:1")
            np.testing.assert_allclose(got.cpu().numpy(), want, rtol=1e-4, atol=1e-4)
    assert torch.cuda.current_device() == before  # running on cuda:1 does not move the caller


def test_rotary_embedding_on_device_1(torch, rng):
    from fuzz import rotary_embedding

    fd = FusionDefinition()
    with fd:
        rotary_embedding(fd, 64, 8, 128, DataType.Float)
    host = [rng.uniform(-1, 1, s).astype(np.float32) for s in [(64, 8, 128), (64, 128), (64, 128)]]
    (out,) = fd.execute([torch.from_numpy(x).to("cuda:1") for x in host])
    np.testing.assert_allclose(
        out.cpu().numpy(), reference.run(fd.fusion, host)[0], rtol=1e-5, atol=1e-5
    )


def test_cupy_and_host_inputs_on_device_1(torch, rng):
    fd = build(ZOO["softmax"], DataType.Float)
    x = rng.standard_normal((33, 65)).astype(np.float32)
    want = reference.run(fd.fusion, [x])[0]
    (out,) = fd.execute([x], device=1)  # host inputs, run on the GPU asked for
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    cupy = pytest.importorskip("cupy")
    with cupy.cuda.Device(1):
        xc = cupy.asarray(x)
    (out,) = fd.execute([xc])
    assert out.device.id == 1
    np.testing.assert_allclose(cupy.asnumpy(out), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "name,rows,cols,kind",
    [
        ("softmax", 264, 50257, "shared_row"),  # a 201 KB row staged: opts in past 48 KB
        ("softmax", 64, 65536, "cluster"),  # a row held over a thread-block cluster
        ("row_sum", 4, 1000000, "split"),  # a split reduction and its zeroed workspace
    ],
)
def test_kernels_with_launch_attributes_run_on_device_1(torch, name, rows, cols, kind, rng):
    """A kernel's launch attributes (dynamic shared memory past 48 KB, a cluster) are set
    for device 1's context, and a split's workspace is made there: each runs on cuda:1."""
    from tunefuse.device_info import H100
    from tunefuse.schedulers import scheduler_for

    fd = build(ZOO[name], DataType.Float)
    host = inputs_for(fd, rows, cols, rng)
    (seg,) = fd.plan(host, device=H100).segments
    p = scheduler_for(seg.scheduler).default_params(seg, H100)
    chosen = getattr(p, kind)  # the shape still takes the kernel this test is about
    assert chosen if kind == "shared_row" else chosen > 1, p
    inputs = [torch.from_numpy(x).to("cuda:1") for x in host]
    for _ in range(2):
        (out,) = fd.execute(inputs)
        assert out.device == torch.device("cuda:1")
        np.testing.assert_allclose(
            out.cpu().numpy(), reference.run(fd.fusion, host)[0], rtol=1e-4, atol=1e-4
        )


def test_rows_peeled_and_not_run_their_own_kernels_on_each_device(torch, rng):
    """Softmax rows of 4100 (read by vectors of 4 unpeeled) and of 4099 (peeled): one
    structure, the same default params, two codes. Run alternately on cuda:1 and cuda:0,
    each device loads each kernel by its own name (a digest of its code)."""
    from tunefuse.codegen import generate
    from tunefuse.device_info import H100
    from tunefuse.schedulers import scheduler_for

    fd = build(ZOO["softmax"], DataType.Float)
    names = set()
    for cols in (4100, 4099):
        plan = fd.plan(inputs_for(fd, 8, cols, rng), device=H100)
        (seg,) = plan.segments
        params = scheduler_for(seg.scheduler).default_params(seg, H100)
        assert params.vector == 4, params
        names.add(generate(seg, params, H100, {b.id: b.dtype for b in plan.buffers}).name)
    assert len(names) == 2  # the case still runs two kernels of one structure
    for cols in (4100, 4099, 4100, 4099):
        host = inputs_for(fd, 8, cols, rng)
        want = reference.run(fd.fusion, host)[0]
        for device in ("cuda:1", "cuda:0"):
            (out,) = fd.execute([torch.from_numpy(x).to(device) for x in host])
            assert out.device == torch.device(device)
            np.testing.assert_allclose(out.cpu().numpy(), want, rtol=1e-5, atol=1e-6)


def test_draws_and_scalar_outputs_stay_on_device_1(torch):
    """An unseeded draw on device-1 inputs takes its seed from the process stream and
    writes on cuda:1; a fusion whose only output is a full reduction returns it there."""
    import tunefuse

    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        u = fd.ops.uniform(0.0, 1.0, x.shape(), dtype=DataType.Float)
        fd.add_output(fd.ops.add(x, u))
    x = torch.zeros(64, 1000, device="cuda:1")
    tunefuse.manual_seed(7)
    (first,) = fd.execute([x])
    tunefuse.manual_seed(7)
    (again,) = fd.execute([x])
    assert first.device == torch.device("cuda:1")
    assert torch.equal(first, again) and 0 <= first.min().item() and first.max().item() < 1
    with FusionDefinition() as total:
        y = total.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        total.add_output(total.ops.sum(y, dims=[0, 1]))
    (out,) = total.execute([torch.ones(300, 70, device="cuda:1")])
    assert out.device == torch.device("cuda:1") and out.item() == 300 * 70


def test_arrays_on_two_devices_are_refused_by_name(torch, rng):
    fd = build(ZOO["bias_gelu"], DataType.Float)
    x, b = inputs_for(fd, 8, 16, rng)
    with pytest.raises(InputMismatchError, match="more than one GPU"):
        fd.execute([torch.from_numpy(x).to("cuda:0"), torch.from_numpy(b).to("cuda:1")])
    with pytest.raises(InputMismatchError, match="device=0 was asked for"):
        fd.execute([torch.from_numpy(x).to("cuda:1"), torch.from_numpy(b).to("cuda:1")], device=0)


def test_a_sticky_error_on_device_1_costs_one_worker(torch):
    from tunefuse.tuning.worker import Worker, WorkerDied

    with Worker("worker_handlers.illegal_address", setup={"device": 1}, timeout_s=120) as worker:
        assert worker.request("where") == 1
        died = worker.request("crash")
        assert isinstance(died, WorkerDied) and "sticky CUDA error" in died.reason
        assert worker.request("where") == 1  # a fresh worker, on device 1 again
        assert worker.restarts == 1


def test_daemon_drains_the_queue_on_both_gpus(torch, tmp_path):
    from test_gpu_daemon import drain_with_daemon, queue_seed_jobs

    _, env, store = queue_seed_jobs(tmp_path)
    assert len(store.jobs()) >= 2
    jobs, events = drain_with_daemon(env, store, "0,1", 4)
    done = [e["job"] for e in events if e["event"] == "done"]
    assert sorted(done) == sorted(j.id for j in jobs)  # each job done exactly once
    claimed_on = {e["owner"].rsplit(":", 1)[1] for e in events if e["event"] == "claimed"}
    assert claimed_on == {"0", "1"}, claimed_on  # both devices did work
    assert not [e for e in events if e["event"] == "failed"]
