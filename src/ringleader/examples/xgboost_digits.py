"""Distributed XGBoost on scikit-learn's 8x8 digits: each rank holds its share of the
training rows; the master runs XGBoost's tracker and every rank joins it
(``runtime.xgboost_collective()``), so the histograms are summed across ranks.

Run it as ``python -m ringleader.examples.xgboost_digits`` alone, or as a gang:
``ringleader launch -n 2 --framework xgboost -- python -m
ringleader.examples.xgboost_digits`` (or ``submit-dist xgboost``).

Invariant the tests rely on: with ``tree_method=hist`` the ranks build the same
trees from the summed histograms as one process does from all rows, except where
the merged quantile sketch places a bin edge differently: the tests accept test
accuracies within 0.02 of one process's.

Output (rank 0 only)::

    rank 0 of 2: 718 training rows here
    final test accuracy: 0.9611
"""

from __future__ import annotations

from ringleader.examples import digits_data


def _first_round() -> type:
    """A callback class that prints the time the first boosting round ended (``--bench``)."""
    import xgboost

    class FirstRound(xgboost.callback.TrainingCallback):
        def after_iteration(self, model: object, epoch: int, evals_log: object) -> bool:
            if epoch == 0:
                digits_data.first_step_done()
            return False

    return FirstRound


def main(argv: list[str] | None = None) -> int:
    args = digits_data.arguments(__doc__.splitlines()[0], argv, rounds=30)

    import numpy as np
    import xgboost

    from ringleader import runtime

    x_train, x_test, y_train, y_test = digits_data.split(scaled=False)
    params = {"objective": "multi:softmax", "num_class": 10, "tree_method": "hist",
              "max_depth": 4, "eta": 0.3, "nthread": 1, "seed": 0}  # fmt: skip
    with runtime.xgboost_collective() as rank:
        world = max(1, xgboost.collective.get_world_size())
        mine = slice(rank, None, world)  # every world-th row from this rank's own
        dtrain = xgboost.DMatrix(x_train[mine], label=y_train[mine])
        if rank == 0:
            print(f"rank {rank} of {world}: {dtrain.num_row()} training rows here", flush=True)
        told = [_first_round()()] if args.bench and rank == 0 else []
        booster = xgboost.train(params, dtrain, num_boost_round=args.rounds, callbacks=told)
    predicted = booster.predict(xgboost.DMatrix(x_test))
    accuracy = float(np.mean(predicted == y_test))
    if rank == 0:
        print(f"final test accuracy: {accuracy:.4f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
