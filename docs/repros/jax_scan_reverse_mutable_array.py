"""jax#32438 probe: lax.scan(reverse=True) writing x_t into a mutable array ref by the index it is
handed; the scan's discharge rule once ignored reverse, so the writes landed in forward order."""
import jax, jax.numpy as jnp
print(jax.__version__, "new_ref" in dir(jax))
xs = jnp.arange(4.0)
def f(xs):
    ref = jax.new_ref(jnp.zeros(4))
    def body(_, ix):
        i, x = ix
        ref[i] = x + ref[(i + 1) % 4]   # reads the value written at the previous (later-index) step
        return None, None
    jax.lax.scan(body, None, (jnp.arange(4), xs), reverse=True)
    return ref[...]
print("eager", f(xs)); print("jit", jax.jit(f)(xs))
# reference: reverse order i = 3, 2, 1, 0
r = [0.0]*4
for i in (3, 2, 1, 0): r[i] = float(xs[i]) + r[(i+1) % 4]
print("want", r)
