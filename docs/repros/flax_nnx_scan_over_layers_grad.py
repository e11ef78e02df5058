#!/usr/bin/env python
"""flax#4771: jax.grad (or jax.jacrev) with respect to the input of a function that closes over an
NNX module whose forward runs nnx.scan over a stack of layers (made by nnx.vmap) raises "ValueError:
Cannot extract graph node from different trace level". nnx.grad with the module passed as an
argument works and agrees with the layers unrolled by hand; so do rnnbench's NNX drivers, which
split the module once and merge it inside the differentiated function (the functional API the
maintainers point to).

Needs jax and flax. Exits 1 while jax.grad raises (or disagrees), 0 once it agrees with the unrolled
reference. Run: python docs/repros/flax_nnx_scan_over_layers_grad.py
"""
import sys

import flax
import jax
import jax.numpy as jnp
from flax import nnx

LAYERS, D = 3, 4


class Block(nnx.Module):
    def __init__(self, rngs):
        self.linear = nnx.Linear(D, D, rngs=rngs)

    def __call__(self, x):
        return jnp.tanh(self.linear(x))


class Stack(nnx.Module):
    def __init__(self, rngs):
        @nnx.split_rngs(splits=LAYERS)
        @nnx.vmap(in_axes=(0,), out_axes=0)
        def create(rngs):
            return Block(rngs)

        self.blocks = create(rngs)

    def __call__(self, x):
        @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
        def forward(x, block):
            return block(x)

        return forward(x, self.blocks)


model = Stack(nnx.Rngs(0))
x = jnp.linspace(-1.0, 1.0, 2 * D).reshape(2, D)
W, b = model.blocks.linear.kernel[...], model.blocks.linear.bias[...]


def unrolled(x):
    for i in range(LAYERS):
        x = jnp.tanh(x @ W[i] + b[i])
    return x.sum()


want = jax.grad(unrolled)(x)
passed = nnx.grad(lambda m, x: m(x).sum(), argnums=1)(model, x)
print(f"flax {flax.__version__}, jax {jax.__version__}: nnx.grad agrees: {bool(jnp.allclose(passed, want))}")
try:
    got = jax.grad(lambda x: model(x).sum())(x)
except ValueError as exc:
    print(f"jax.grad wrt the input raises ValueError: {str(exc).splitlines()[0][:120]}")
    sys.exit(1)
print(f"jax.grad wrt the input agrees: {bool(jnp.allclose(got, want))}")
sys.exit(0 if jnp.allclose(got, want) else 1)
