import torch
from torch._C._nvfuser import Fusion, FusionDefinition, DataType
def nvfuser_fusion_id0(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(symbolic_sizes=[-1, -1], contiguous=[True, True], dtype=DataType.Float)
    T1 = fd.ops.view(T0, original_shape=[8192, 3072], new_shape=[64, 128, 3072])
    S2 = fd.define_constant(0.500000)
    T3 = fd.ops.mul(T1, S2)
    S4 = fd.define_constant(0.707107)
    T5 = fd.ops.mul(T1, S4)
    T6 = fd.ops.erf(T5)
    S7 = fd.define_constant(1.00000)
    T8 = fd.ops.add(T6, S7)
    T9 = fd.ops.mul(T3, T8)
    T10 = fd.ops.view(T9, original_shape=[64, 128, 3072], new_shape=[8192, 3072])
    fd.add_output(T10)
fs = Fusion()
with FusionDefinition(fs) as fd :
    nvfuser_fusion_id0(fd)
inputs = [
    torch.randn(8192, 3072, device='cuda')
]
for _ in range(5):
    out = fs.execute(inputs)
