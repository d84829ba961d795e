"""Job runners the daemon tests plug in (the CPU stands in for the GPU's tuning step): they
rebuild the job's fusion and inputs, plan, and compile the kernel with NVRTC for real."""

import os
import time

from cache_db.store import Env, TunedRecord

ENV = Env("9.0", "test GPU", "13.5", "13000", "1")


def compile_runner(job, ctx):
    from tunefuse.codegen import generate
    from tunefuse.compiler import COMPILE_OPTIONS, compile_kernel, nvrtc_version, source_key
    from tunefuse.device_info import H100
    from tunefuse.ir.serialize import fusion_from_json
    from tunefuse.planning.plan import make_plan
    from tunefuse.schedulers import params_to_dict, scheduler_for
    from tunefuse.tuning.inputs import make_inputs

    fusion = fusion_from_json(ctx.store.get_fusion_json(job.fusion_id))
    plan = make_plan(fusion, make_inputs(job.signature_json, fusion=fusion))
    seg = plan.segments[job.segment_index]
    params = scheduler_for(seg.scheduler).default_params(seg, H100)
    src = generate(seg, params, H100, {b.id: b.dtype for b in plan.buffers})
    cubin = compile_kernel(src.source, src.name, "sm_90").cubin
    log = os.environ.get("DAEMON_TEST_LOG")
    if log:
        with open(log, "a") as f:
            f.write(f"{job.id} {os.getpid()}\n")
    record = TunedRecord(
        job.kernel_key,
        job.shape_key,
        ENV,
        seg.scheduler.value,
        params_to_dict(params),
        source_key(src.source, "sm_90", COMPILE_OPTIONS),
        src.name,
        1.0,
        0.0,
        1.0,
        1,
        job.fusion_id,
    )
    return record, cubin, "sm_90", nvrtc_version()


def slow_runner(job, ctx):
    """Works for DAEMON_TEST_SECONDS, checking for shutdown, then compiles."""
    deadline = time.monotonic() + float(os.environ.get("DAEMON_TEST_SECONDS", "5"))
    while time.monotonic() < deadline:
        ctx.check_stop()
        time.sleep(0.05)
    return compile_runner(job, ctx)


def failing_runner(job, ctx):
    raise ValueError("this kernel cannot be tuned")
