"""Device, streams, arrays and the executor: everything that touches the GPU."""
