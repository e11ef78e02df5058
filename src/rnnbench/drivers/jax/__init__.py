"""jax's and flax's drivers: their framework layer (_framework: JAX, and FLAX, which shares its plumbing) and
the mechanisms of jax (loop, lax_scan, fori_loop, associative_scan) and of flax (flax_scan, flax_vendor,
flax_nnx_scan, flax_nnx_vendor)."""
