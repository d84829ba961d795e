"""What the schedulers need to know of a GPU. Pure data: read from the driver at runtime,
or one of the known profiles when compiling without a GPU."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    name: str
    compute_capability: tuple[int, int]
    sm_count: int
    max_threads_per_block: int = 1024
    max_threads_per_sm: int = 2048
    max_blocks_per_sm: int = 32
    regs_per_sm: int = 65536
    shared_per_block: int = 48 * 1024
    shared_optin_per_block: int = 227 * 1024  # what a kernel may ask for beyond 48 KB (opt-in)
    shared_per_sm: int = 228 * 1024
    l2_bytes: int = 50 * 1024 * 1024
    warp_size: int = 32

    @property
    def arch(self) -> str:
        return f"sm_{self.compute_capability[0]}{self.compute_capability[1]}"


H100 = DeviceInfo("NVIDIA H100 80GB HBM3", (9, 0), 132, l2_bytes=50 * 1024 * 1024)
A100 = DeviceInfo(
    "NVIDIA A100-SXM4-80GB",
    (8, 0),
    108,
    shared_optin_per_block=163 * 1024,
    shared_per_sm=164 * 1024,
    l2_bytes=40 * 1024 * 1024,
)
PROFILES = {"sm_90": H100, "sm_80": A100}
