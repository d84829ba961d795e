import torch
from torch._C._nvfuser import Fusion, FusionDefinition, DataType
def nvfuser_fusion_id0(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(symbolic_sizes=[-1, -1, -1], contiguous=[True, True, True], dtype=DataType.Float)
    T1 = fd.ops.view(T0, original_shape=[768, 128, 64], new_shape=[64, 12, 128, 64])
    T2 = fd.ops.permute(T1, dims=[0, 2, 1, 3])
    T3 = fd.ops.set(T2)
    T4 = fd.ops.view(T3, original_shape=[64, 128, 12, 64], new_shape=[64, 128, 768])
    T5 = fd.ops.view(T4, original_shape=[64, 128, 768], new_shape=[8192, 768])
    fd.add_output(T5)
fs = Fusion()
with FusionDefinition(fs) as fd :
    nvfuser_fusion_id0(fd)
inputs = [
    torch.randn(768, 128, 64, device='cuda')
]
for _ in range(5):
    out = fs.execute(inputs)
