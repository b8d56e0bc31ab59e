"""Data-parallel training in JAX on scikit-learn's 8x8 digits, across processes.

Run it as ``python -m ringleader.examples.jax_digits`` alone, or as a gang:
``ringleader launch -n 2 --framework jax -- python -m ringleader.examples.jax_digits``
(or ``submit-dist jax``).  ``runtime.init()`` joins JAX's world from the launcher's
names; each process then holds its share of the training rows, the parameters are
replicated, and ``jax.jit`` of the mean loss's gradient over the global batch makes
XLA all-reduce the per-process sums (gloo on CPUs).

Invariant the tests rely on: full-batch gradient descent on the same 1436 rows (a
multiple of 1, 2 and 4 processes) takes the same steps in any world size, so the
final test accuracy is the same as one process's (up to float rounding).  Before
training, an explicit cross-process ``psum`` of each process's id is printed.

Output (process 0 only)::

    psum of process ids: 1 (2 processes)
    step 100/300: loss 0.4321
    ...
    final test accuracy: 0.9611
"""

from __future__ import annotations

from ringleader.examples import digits_data

TRAIN_ROWS = digits_data.TRAIN_ROWS


def main(argv: list[str] | None = None) -> int:
    args = digits_data.arguments(__doc__.splitlines()[0], argv, steps=300, lr=0.5)

    import jax  # before runtime.init(): it initialises JAX's world for a JAX program
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    from ringleader import runtime

    ctx = runtime.init()
    count, index = jax.process_count(), jax.process_index()
    x_train, x_test, y_train, y_test = digits_data.split()
    x_train, y_train = x_train[:TRAIN_ROWS], y_train[:TRAIN_ROWS]
    mesh = Mesh(np.array(jax.devices()), ("data",))
    rows = NamedSharding(mesh, PartitionSpec("data"))
    share = TRAIN_ROWS // count  # this process's rows, in process order
    mine = slice(index * share, (index + 1) * share)
    xs = jax.make_array_from_process_local_data(rows, x_train[mine].astype(np.float32))
    ys = jax.make_array_from_process_local_data(rows, y_train[mine].astype(np.int32))

    ids = jax.make_array_from_process_local_data(rows, np.array([index], dtype=np.int32))
    total = jax.jit(lambda a: a.sum(), out_shardings=NamedSharding(mesh, PartitionSpec()))(ids)
    if ctx.is_main:
        print(f"psum of process ids: {int(total)} ({count} processes)", flush=True)

    def loss(params: tuple, xb: jax.Array, yb: jax.Array) -> jax.Array:
        w, b = params
        logits = xb @ w + b
        return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(yb.shape[0]), yb])

    @jax.jit
    def step(params: tuple, xb: jax.Array, yb: jax.Array) -> tuple[tuple, jax.Array]:
        value, grads = jax.value_and_grad(loss)(params, xb, yb)
        return tuple(p - args.lr * g for p, g in zip(params, grads, strict=True)), value

    params = (jnp.zeros((64, 10), jnp.float32), jnp.zeros((10,), jnp.float32))
    for number in range(1, args.steps + 1):
        params, value = step(params, xs, ys)
        if number == 1 and args.bench and ctx.is_main:
            value.block_until_ready()
            digits_data.first_step_done()
        if ctx.is_main and number % 100 == 0:
            print(f"step {number}/{args.steps}: loss {float(value):.4f}", flush=True)
    w, b = (np.asarray(jax.device_get(p)) for p in params)
    accuracy = float(np.mean(np.argmax(x_test @ w + b, axis=1) == y_test))
    if ctx.is_main:
        print(f"final test accuracy: {accuracy:.4f}", flush=True)
    runtime.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
