"""scikit-learn's bundled 8x8 digits, split the one way every framework example uses
(``tf_digits``, ``jax_digits``, ``xgboost_digits``): 80 % to train, stratified, seed 0,
so a gang and one process, or two frameworks, see the very same rows."""

from __future__ import annotations

import argparse
import time
from typing import Any

#: The training rows the full-batch examples use: a multiple of 1, 2 and 4 processes.
TRAIN_ROWS = 1436


def split(scaled: bool = True) -> tuple[Any, Any, Any, Any]:
    """(x_train, x_test, y_train, y_test); pixels in [0, 1] when ``scaled``."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    x, y = load_digits(return_X_y=True)
    x = x / 16.0 if scaled else x
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=0.2, random_state=0, stratify=y
    )
    return x_train, x_test, y_train, y_test


def arguments(description: str, argv: list[str] | None, **numbers: int | float) -> Any:
    """An example's options: each of ``numbers`` (``steps=300`` is ``--steps``, its type
    the default's), and ``--bench``."""
    parser = argparse.ArgumentParser(description=description)
    for name, default in numbers.items():
        parser.add_argument(f"--{name}", type=type(default), default=default)
    said = "print RINGLEADER_BENCH first_step_unix=T (bench/frameworks.py)"
    parser.add_argument("--bench", action="store_true", help=said)
    return parser.parse_args(argv)


def first_step_done() -> None:
    """The ``--bench`` line: the wall clock as rank 0's first step has ended."""
    print(f"RINGLEADER_BENCH first_step_unix={time.time():.6f}", flush=True)
