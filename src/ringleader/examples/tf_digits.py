"""Data-parallel training in TensorFlow on scikit-learn's 8x8 digits, across workers
with ``MultiWorkerMirroredStrategy``, which reads the ``TF_CONFIG`` ringleader gives
each rank (``--framework tf``, ``submit-dist tf``).

Run it as ``python -m ringleader.examples.tf_digits`` alone (no ``TF_CONFIG``: one
worker), or ``ringleader launch -n 2 --framework tf -- python -m
ringleader.examples.tf_digits``.  Each worker holds its share of the training rows;
a custom step (``strategy.run``, the gradient and row count summed across workers
with the replica context's ``all_reduce``) keeps the weights identical everywhere.
(Keras 3's ``model.fit`` under this strategy fails on a ``Dataset`` with TensorFlow
2.21: "Attempt to convert a value (PerReplica...)".)

Invariant the tests rely on: full-batch gradient descent on the same 1436 rows takes
the same steps in any number of workers, so the final test accuracy is one worker's
(up to float rounding).

Output (the chief, rank 0, only)::

    workers: 2
    step 100/300: loss 0.4022
    ...
    final test accuracy: 0.9444
"""

from __future__ import annotations

import json
import os

from ringleader.examples import digits_data

TRAIN_ROWS = digits_data.TRAIN_ROWS


def _rank() -> int:
    """The chief is rank 0, worker ``i`` rank ``i + 1`` (as ringleader numbers them)."""
    task = json.loads(os.environ.get("TF_CONFIG") or "{}").get("task") or {}
    return 0 if task.get("type", "chief") == "chief" else int(task["index"]) + 1


def main(argv: list[str] | None = None) -> int:
    args = digits_data.arguments(__doc__.splitlines()[0], argv, steps=300, lr=0.5)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's start-up notes

    import numpy as np
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    count, rank = strategy.num_replicas_in_sync, _rank()
    x_train, x_test, y_train, y_test = digits_data.split()
    share = TRAIN_ROWS // count
    mine = slice(rank * share, (rank + 1) * share)
    xs = tf.constant(x_train[:TRAIN_ROWS][mine], tf.float32)
    ys = tf.constant(y_train[:TRAIN_ROWS][mine], tf.int32)
    with strategy.scope():
        mean = tf.VariableAggregation.MEAN  # every worker applies the same summed update
        w = tf.Variable(tf.zeros((64, 10)), aggregation=mean)
        b = tf.Variable(tf.zeros((10,)), aggregation=mean)

    def replica_step(xb: tf.Tensor, yb: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            logits = tf.matmul(xb, w) + b
            total = tf.reduce_sum(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=yb, logits=logits)
            )
        grads = tape.gradient(total, [w, b])
        context = tf.distribute.get_replica_context()
        rows = context.all_reduce("sum", tf.cast(tf.shape(xb)[0], tf.float32))
        grads = context.all_reduce("sum", grads)
        for variable, grad in zip((w, b), grads, strict=True):
            variable.assign_sub(args.lr * grad / rows)
        return context.all_reduce("sum", total) / rows

    @tf.function
    def step(xb: tf.Tensor, yb: tf.Tensor) -> tf.Tensor:
        return strategy.run(replica_step, args=(xb, yb))

    if rank == 0:
        print(f"workers: {count}", flush=True)
    for number in range(1, args.steps + 1):
        loss = step(xs, ys)
        if number == 1 and args.bench and rank == 0:
            strategy.experimental_local_results(loss)[0].numpy()  # the step has ended
            digits_data.first_step_done()
        if rank == 0 and number % 100 == 0:
            # Already summed across workers: this worker's copy, no collective (a
            # reduce here, on the chief alone, would wait for the others for ever).
            value = float(strategy.experimental_local_results(loss)[0])
            print(f"step {number}/{args.steps}: loss {value:.4f}", flush=True)
    accuracy = float(np.mean(np.argmax(x_test @ w.numpy() + b.numpy(), axis=1) == y_test))
    if rank == 0:
        print(f"final test accuracy: {accuracy:.4f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
