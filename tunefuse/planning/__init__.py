"""The planning half, one pass a module, in the order a call meets them: the input
signature (`signature`), concretization (`concretize`), the alias pass (`alias`: which
buffer each output is), index maps (`indexing`), the kernel IR (`kernel_ir`), segmentation
(`segment`: which kernels), and the plan that ties them (`plan`); `plan_interpreter` runs a
plan on the CPU, the oracle the tests hold kernels to."""
