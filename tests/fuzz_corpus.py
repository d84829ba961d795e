"""Run the fuzzed corpus on a GPU: every fusion at the default params and at a random valid
point of each kernel's search space, through the executor on torch tensors, against the
NumPy reference. Run it under compute-sanitizer for the memory-safety gate:

    PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool memcheck --padding 512 --error-exitcode 9 \\
        python3 tests/fuzz_corpus.py --seed 0 --count 500

Every input is its own allocation, sized to the bytes it spans (an offset view starts one
element into its allocation, so it stays misaligned), so a read past a buffer's end is a
read past an allocation; `--padding` puts unallocated bytes between allocations, without
which memcheck misses a read that lands in a neighbouring allocation (with the guard pass
switched off, the rotary embedding reads 16 bytes past its row: reported only with padding).
Kernels are compiled up front in parallel processes. Prints one line a failure and a summary;
exit 1 when any result differs or any case fails. `--large` adds the fusions of more than 2**31
elements (checked at samples). `--host` needs no GPU: the same corpus at the same params runs
on the host under AddressSanitizer (tests/host_kernels.py; sm_90's plan, no clusters).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from fuzz import agree, corpus, large_cases, named_cases, random_params  # noqa: E402

from tunefuse.ir.dtypes import DataType  # noqa: E402


def _compile(job: tuple[str, str, str]) -> tuple[str, bytes | None]:
    from tunefuse.compiler import compile_kernel

    source, name, arch = job
    try:
        return name, compile_kernel(source, name, arch).cubin
    except Exception:  # noqa: BLE001 - the executor compiles it again and reports why
        return name, None


def _sources(case, device, variant: str):  # noqa: ANN001, ANN202
    from tunefuse.codegen import generate
    from tunefuse.planning.plan import make_plan
    from tunefuse.schedulers import scheduler_for

    plan = make_plan(case.fd.fusion, case.inputs, device=device)  # as the executor plans
    dtypes = {b.id: b.dtype for b in plan.buffers}
    for seg in plan.segments:
        params = scheduler_for(seg.scheduler).default_params(seg, device)
        if variant == "random":
            params = random_params(seg, device, case.seed) or params
        src = generate(seg, params, device, dtypes)
        yield src.source, src.name


def torch_input(torch, array: np.ndarray, layout: str, device: int):  # noqa: ANN001, ANN201
    """`array` on the GPU in its own allocation of exactly the elements its strides span
    (one more, before it, for an offset view)."""
    from tunefuse.arrays import describe_array
    from tunefuse.runtime.allocators import torch_dtype

    if layout == "scalar":  # a scalar input, passed as the number it is
        return array
    info = describe_array(array)
    span = 1 + sum((e - 1) * s for e, s in zip(info.shape, info.strides)) if array.size else 0
    lead = 1 if layout == "offset" else 0
    flat = np.zeros(span + lead, dtype=array.dtype)
    if array.size:
        view = np.lib.stride_tricks.as_strided(
            flat[lead:], array.shape, tuple(s * array.itemsize for s in info.strides)
        )
        view[...] = array
    bits = (
        flat.view(np.int16) if info.dtype is DataType.BFloat16 else flat
    )  # torch reads no ml_dtypes
    base = torch.from_numpy(bits).to(f"cuda:{device}").view(torch_dtype(info.dtype))
    return torch.as_strided(base, info.shape, info.strides, lead)


def to_host(t) -> np.ndarray:  # noqa: ANN001
    import torch

    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).cpu().numpy().view(DataType.BFloat16.numpy)
    return t.cpu().numpy()


def run_corpus(
    seed: int,
    count: int,
    variants: tuple[str, ...] = ("default", "random"),
    device: int = 0,
    verbose: bool = True,
) -> dict:
    import torch

    from tunefuse import reference
    from tunefuse.runtime.device import runtime
    from tunefuse.runtime.executor import Executor
    from tunefuse.runtime.lower import by_kernel_name

    rt = runtime(device)
    cases = list(corpus(seed, count)) + named_cases()
    start = time.monotonic()
    jobs = {}
    for case in cases:
        for variant in variants:
            for source, name in _sources(case, rt.info, variant):
                jobs[name] = (source, name, rt.info.arch)
    with concurrent.futures.ProcessPoolExecutor(max_workers=os.cpu_count() or 4) as pool:
        precompiled = {
            name: cubin for name, cubin in pool.map(_compile, jobs.values(), chunksize=8) if cubin
        }
    compile_s = time.monotonic() - start
    summary = {
        "fusions": len(cases),
        "runs": 0,
        "kernel_launches": 0,
        "distinct_kernels": set(),
        "mismatches": 0,
        "errors": 0,
        "compile_s": round(compile_s, 1),
    }
    for case in cases:
        fusion = case.fd.fusion
        want = reference.run(fusion, case.inputs, include_aliased=True)
        # (the returned outputs, then each in-place one and the position of the input it writes)
        returned = [w for w, o in zip(want, fusion.outputs) if o.alias_input is None]
        in_place = [
            (w, fusion.inputs.index(o.alias_input))
            for w, o in zip(want, fusion.outputs)
            if o.alias_input is not None
        ]
        for variant in variants:
            chooser = None
            if variant == "random":
                chooser = lambda seg, dev, s=case.seed: random_params(seg, dev, s)  # noqa: E731
            try:
                inputs = [
                    torch_input(torch, x, layout, device)
                    for x, layout in zip(case.inputs, case.layouts)
                ]
                executor = Executor(
                    case.fd.fusion,
                    params_source=chooser,
                    fetch=by_kernel_name(precompiled),
                    device=device,
                )
                got = executor.run(inputs)
                if not in_place:  # again: the plan cache's fast path, then the generated one
                    got_again = [executor.run(inputs) for _ in range(2)][-1]
                torch.cuda.synchronize(device)
            except Exception as e:  # noqa: BLE001 - counted and reported, the corpus goes on
                summary["errors"] += 1
                if verbose:
                    print(f"ERROR {variant} {case}: {type(e).__name__}: {str(e)[:300]}", flush=True)
                if "CUDA_ERROR" in str(e):
                    raise  # a sticky error: the rest of the process would fail with it
                continue
            summary["runs"] += 1
            for exe in executor.plans.values():
                launched = [r for r in exe.recipes if r.launch.numel > 0]
                summary["kernel_launches"] += len(launched)
                summary["distinct_kernels"].update(r.launch.kernel_name for r in launched)
            loosest = _loosest_tolerance(fusion)
            pairs = list(zip(got, returned)) + [(inputs[k], w) for w, k in in_place]
            if not in_place:
                pairs += list(zip(got_again, returned))
            for g, w in pairs:
                g = to_host(g) if hasattr(g, "cpu") else np.asarray(g)
                if not agree(g, w, loosest):
                    summary["mismatches"] += 1
                    if verbose:
                        print(f"MISMATCH {variant} {case}", flush=True)
                    break
    summary["distinct_kernels"] = len(summary["distinct_kernels"])
    summary["seconds"] = round(time.monotonic() - start, 1)
    return summary


def _loosest_tolerance(fusion) -> tuple[float, float]:  # noqa: ANN001
    """The tolerance of the least precise floating type any value of the fusion has: a double
    output computed from a float intermediate (a float sigmoid, one ulp apart between CUDA's
    expf and NumPy's) carries that float's rounding, not a double's."""
    from tunefuse.ir.fusion import TensorType

    tolerances = [
        v.dtype.tolerance
        for v in fusion.values
        if isinstance(v, TensorType) and v.dtype.is_floating
    ]
    return max(tolerances, default=(0.0, 0.0))


def run_large(device: int = 0, samples: int = 2000, verbose: bool = True) -> dict:
    """The fusions of more than 2**31 elements, each output checked at random positions."""
    import torch

    from tunefuse.runtime.executor import Executor

    rng = np.random.default_rng(0)
    summary = {"large_fusions": 0, "large_mismatches": 0}
    for case in large_cases():
        inputs = case.make_inputs(torch, device)
        (out,) = Executor(case.fd.fusion, cache=None, device=device).run(inputs)
        torch.cuda.synchronize(device)
        assert tuple(out.shape) == case.out_shape, (out.shape, case.out_shape)
        index = [tuple(int(rng.integers(e)) for e in case.out_shape) for _ in range(samples)]
        index += [tuple(e - 1 for e in case.out_shape), tuple(0 for _ in case.out_shape)]
        host_out = out.cpu()
        host_in = [x.cpu() for x in inputs]  # half: torch reads it back without a copy to NumPy
        bad = [i for i in index if float(host_out[i]) != case.expect(host_in, i)]
        summary["large_fusions"] += 1
        if bad:
            summary["large_mismatches"] += 1
            if verbose:
                print(f"MISMATCH {case.name} at {bad[:5]}", flush=True)
        del out, inputs, host_out, host_in
        torch.cuda.empty_cache()
    return summary


def host_random_params(seed: int):  # noqa: ANN201
    """The corpus's random point of each kernel's search space, but never a cluster of
    blocks (the host does not emulate one): the defaults there."""

    def choose(seg, device):  # noqa: ANN001, ANN202
        p = random_params(seg, device, seed)
        return None if p is None or getattr(p, "cluster", 1) > 1 else p

    return choose


def host_corpus_failures(cases) -> list[str]:  # noqa: ANN001
    """Each case at its default params and at a random valid point, planned as on the GPU
    (strided, offset, expanded and in-place inputs) for sm_90, run by tests/host_kernels.py
    (a fiber a GPU thread, buffers under AddressSanitizer), every output against the
    reference: one line a failure."""
    from fuzz import device_plan
    from host_kernels import HostKernelError, run_plan_on_host

    from tunefuse import reference
    from tunefuse.device_info import PROFILES

    failures = []
    for case in cases:
        plan = device_plan(case, device=PROFILES["sm_90"])
        try:
            runs = run_plan_on_host(
                plan, case.inputs, case.layouts, [None, host_random_params(case.seed)]
            )
        except HostKernelError as e:
            failures.append(f"{case}: {str(e)[:2000]}")
            continue
        want = reference.run(case.fd.fusion, case.inputs, include_aliased=True)
        loosest = _loosest_tolerance(case.fd.fusion)
        for variant, run in zip(("default", "random"), runs, strict=True):
            for o, got in zip(plan.outputs, run.outputs, strict=True):
                if not agree(got, want[o.position], loosest):
                    failures.append(f"{variant} {case}: output {o.position} differs")
                    break
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--count", type=int, default=500)
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--variants", default="default,random")
    parser.add_argument(
        "--large", action="store_true", help="also the fusions of more than 2**31 elements"
    )
    parser.add_argument(
        "--host",
        action="store_true",
        help="no GPU: run the corpus on the host under AddressSanitizer (tests/host_kernels.py)",
    )
    args = parser.parse_args()
    if args.host:
        cases = list(corpus(args.seed, args.count)) + named_cases()
        failures = host_corpus_failures(cases)
        for line in failures:
            print("FAILURE", line, flush=True)
        print("SUMMARY", {"fusions": len(cases), "failures": len(failures)}, flush=True)
        return 1 if failures else 0
    summary = run_corpus(args.seed, args.count, tuple(args.variants.split(",")), args.device)
    if args.large:
        summary.update(run_large(args.device))
    print("SUMMARY", summary, flush=True)
    failed = summary["mismatches"] or summary["errors"] or summary.get("large_mismatches")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
