"""Data-parallel training with Horovod (TensorFlow/Keras) on scikit-learn's 8x8 digits:
``hvd.init``, rank 0's weights broadcast to every rank, ``hvd.DistributedOptimizer``
averaging the gradients, each rank on its share of the rows.

It needs Horovod, which builds against TensorFlow 2.12 (``make horovod``: the
``.horovod`` environment).  Run it alone (one rank), or as a gang::

    . .horovod/bin/activate                 # its python has Horovod
    python -m ringleader.examples.horovod_digits
    ringleader launch -n 2 --framework horovod -- python -m ringleader.examples.horovod_digits
    horovodrun -np 2 python -m ringleader.examples.horovod_digits

Invariant the tests rely on: full-batch gradient descent on the same 1436 rows
takes the same steps in any number of ranks (each rank's mean gradient over an
equal share, averaged), and every rank starts from rank 0's weights, so the final
test accuracy is one rank's (up to float rounding).  Each rank initialises its
weights with its own seed: without the broadcast they would differ.

Output (rank 0 only)::

    ranks: 2
    step 100/300: loss 0.4022
    ...
    final test accuracy: 0.9444
"""

from __future__ import annotations

import os
from typing import Any

from ringleader.examples import digits_data

TRAIN_ROWS = digits_data.TRAIN_ROWS


def main(argv: list[str] | None = None) -> int:
    args = digits_data.arguments(__doc__.splitlines()[0], argv, steps=300, lr=0.5)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's start-up notes

    import horovod.tensorflow as hvd
    import horovod.tensorflow.keras as hvd_keras
    import numpy as np
    import tensorflow as tf

    hvd.init()
    count, rank = hvd.size(), hvd.rank()
    x_train, x_test, y_train, y_test = digits_data.split()
    share = TRAIN_ROWS // count
    mine = slice(rank * share, (rank + 1) * share)
    tf.keras.utils.set_random_seed(rank)  # different starting weights on each rank...
    model = tf.keras.Sequential([tf.keras.Input((64,)), tf.keras.layers.Dense(10)])
    hvd.broadcast_variables(model.variables, root_rank=0)  # ...until rank 0's are everyone's
    optimizer = hvd_keras.DistributedOptimizer(tf.keras.optimizers.legacy.SGD(args.lr))
    loss = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(optimizer=optimizer, loss=loss)

    class Progress(tf.keras.callbacks.Callback):
        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            if args.bench and rank == 0 and batch == 0 and not self.params.get("done"):
                self.params["done"] = True
                digits_data.first_step_done()

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            if rank == 0 and (epoch + 1) % 100 == 0:
                print(f"step {epoch + 1}/{args.steps}: loss {logs['loss']:.4f}", flush=True)

    if rank == 0:
        print(f"ranks: {count}", flush=True)
    model.fit(
        x_train[:TRAIN_ROWS][mine],
        y_train[:TRAIN_ROWS][mine],
        batch_size=share,
        epochs=args.steps,
        shuffle=False,
        verbose=0,
        callbacks=[hvd_keras.callbacks.MetricAverageCallback(), Progress()],
    )
    predicted = np.argmax(model.predict(x_test, verbose=0), axis=1)
    if rank == 0:
        print(f"final test accuracy: {float(np.mean(predicted == y_test)):.4f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
