"""torch_xla's drivers: its framework layer (_framework: TORCH_XLA, over torch's and jax's layers) and its
mechanisms: loop, scan (torch_xla.experimental.scan)."""
