"""Train/test split of a generated data set by sample index."""

from __future__ import annotations

from .._checks import check_positive_int
from ._dataset import Dataset


def train_test_split(
    data: Dataset, n_train: int, n_test: int | None = None
) -> tuple[Dataset, Dataset]:
    """Splits by the samples' index in the file: training samples are those
    with index `< n_train`, test samples those with index in
    `[n_train, n_train + n_test)` (all indices `>= n_train` when `n_test` is
    `None`).

    Splitting by index, not by position among the finished samples, keeps the
    split fixed while a resumable generator fills the file in: a test sample
    never becomes a training sample when an earlier one finishes. Unfinished
    samples are simply absent from both parts.

    **Arguments:**

    - `data`: a [`Dataset`][sciml.data.Dataset].
    - `n_train`: the first test index (a positive integer).
    - `n_test`: how many indices the test part spans (a positive integer or `None`).

    **Returns:** `(train, test)`, each a `Dataset` in file order.

    Raises `ValueError` when either part would be empty.
    """
    check_positive_int("n_train", n_train)
    check_positive_int("n_test", n_test, allow_none=True)
    stop = None if n_test is None else n_train + n_test
    train = [int(i) for i in data.indices if i < n_train]
    test = [int(i) for i in data.indices if i >= n_train and (stop is None or i < stop)]
    if not train or not test:
        raise ValueError(
            f"`n_train` = {n_train}, `n_test` = {n_test} leave an empty "
            f"{'training' if not train else 'test'} part; the data set holds the sample "
            f"indices {int(data.indices.min()) if len(data) else None}.."
            f"{int(data.indices.max()) if len(data) else None} ({len(data)} finished)."
        )
    return data.select(train), data.select(test)
