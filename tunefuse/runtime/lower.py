"""Lowering: a Plan -> a LaunchPlan and the binaries of its kernels, one named pass a line.

    choose params -> generate -> compile or fetch -> launch geometry

The executor and the tuner both lower through `lower`; they differ only in how params are
chosen (the cache's records and the default heuristic; a candidate for one kernel) and where
binaries come from before NVRTC is asked (the cache; cubins compiled ahead in a pool).
Nothing here touches a GPU: the result is data, loaded onto a device by the runtime.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from tunefuse.codegen import KernelSource, generate
from tunefuse.compiler import COMPILE_OPTIONS, compile_kernel, nvrtc_version, source_key
from tunefuse.planning.plan import Plan
from tunefuse.planning.segment import Segment
from tunefuse.runtime.launch_plan import LaunchPlan, kernel_launch
from tunefuse.schedulers import scheduler_for

# (params, how they were chosen: one of launch_plan.CHOSEN)
Chooser = Callable[[Segment], tuple[object, str]]
# code keys (with the sources they stand for) -> {code key: (cubin, kernel name)} found
Fetcher = Callable[[Sequence[str], Sequence[KernelSource]], Mapping[str, tuple[bytes, str]]]


def nothing_fetched(code_keys: Sequence[str], sources: Sequence[KernelSource]) -> dict:
    """The fetcher of a caller without a cache: every binary is compiled."""
    return {}


def by_kernel_name(cubins: Mapping[str, bytes]) -> Fetcher:
    """The fetcher of binaries compiled elsewhere (a process pool), by kernel name: a
    kernel's name is a digest of its code (`codegen.kernel_name`), so on one device the
    name identifies the binary."""

    def fetch(code_keys: Sequence[str], sources: Sequence[KernelSource]) -> dict:
        return {
            key: (cubins[src.name], src.name)
            for key, src in zip(code_keys, sources)
            if src.name in cubins
        }

    return fetch


@dataclass(frozen=True)
class Binary:
    """A kernel's binary, and whether this lowering compiled it (then it is new to the cache,
    and `source` and `nvrtc_version` go with it)."""

    cubin: bytes
    kernel_name: str
    compiled: bool
    compile_ms: float
    source: str
    nvrtc_version: str


@dataclass(frozen=True)
class Lowered:
    launch: LaunchPlan
    binaries: tuple[Binary, ...]  # one per kernel of `launch`, in its order

    @property
    def compiled(self) -> tuple[tuple[str, Binary], ...]:
        """(code key, binary) of each binary NVRTC made here: what the cache does not hold."""
        return tuple(
            (k.code_key, b) for k, b in zip(self.launch.kernels, self.binaries) if b.compiled
        )


def code_key(source: KernelSource, arch: str) -> str:
    """The key a generated kernel's binary is stored and fetched under."""
    return source_key(source.source, arch, COMPILE_OPTIONS)


def lower(plan: Plan, device: object, choose: Chooser, fetch: Fetcher = nothing_fetched) -> Lowered:
    """`plan` for `device` (a DeviceInfo): params chosen per kernel, code generated, each
    binary fetched or else compiled (NVRTC: the one side effect), and each kernel's launch
    geometry and argument slots. Raises CompileError when NVRTC rejects a kernel."""
    sources, launch = generate_launches(plan, device, choose)
    code_keys = [k.code_key for k in launch.kernels]
    binaries = compile_or_fetch(sources, code_keys, device.arch, fetch(code_keys, sources))  # type: ignore[attr-defined]
    return Lowered(launch, tuple(binaries))


def generate_launches(
    plan: Plan, device: object, choose: Chooser
) -> tuple[list[KernelSource], LaunchPlan]:
    """The first passes of `lower`, pure: params chosen, code generated, launch geometry (the
    code keys included); no binary. `tunefuse explain --arch` shows these."""
    dtypes = {b.id: b.dtype for b in plan.buffers}
    chosen = [choose(seg) for seg in plan.segments]
    sources = [generate(seg, p, device, dtypes) for seg, (p, _) in zip(plan.segments, chosen)]
    kernels = [
        kernel_launch(seg, src, params, how, code_key(src, device.arch))  # type: ignore[attr-defined]
        for seg, (params, how), src in zip(plan.segments, chosen, sources)
    ]
    return sources, LaunchPlan.of(plan, kernels)


def default_chooser(device: object) -> Chooser:
    """Each scheduler's default heuristic on `device`: the choice without a cache."""
    return lambda seg: (scheduler_for(seg.scheduler).default_params(seg, device), "default")


def compile_or_fetch(
    sources: Sequence[KernelSource],
    code_keys: Sequence[str],
    arch: str,
    fetched: Mapping[str, tuple[bytes, str]],
) -> list[Binary]:
    """Each source's binary: the fetched one where it is there under the same kernel name,
    else NVRTC's."""
    binaries = []
    for src, key in zip(sources, code_keys):
        found = fetched.get(key)
        if found is not None and found[1] == src.name:
            binaries.append(Binary(found[0], src.name, False, 0.0, src.source, nvrtc_version()))
            continue
        compiled = compile_kernel(src.source, src.name, arch)
        binaries.append(
            Binary(
                compiled.cubin,
                src.name,
                True,
                compiled.compile_ms,
                src.source,
                compiled.nvrtc_version,
            )
        )
    return binaries
