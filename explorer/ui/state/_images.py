"""Image data of the factor-analysis pages: the data sets, the train / evaluation split and the masks.

Pure functions (NumPy, no param, no Panel) used by :class:`explorer.ui.state.fa_model.FAModel`.
"""

from __future__ import annotations

import functools

import numpy as np

from explorer.core.missingness import mechanisms
from explorer.core.validation import BadInputError
from explorer.datasets import image_shape, load_dataset

DATASETS = ("digits_8x8", "mnist", "photo_patches")
#: Side of the photograph patches (16 x 16 = 256 pixels: the larger inpainting demo).
PATCH = 16
#: Patches cut from the two photographs (training and evaluation rows are drawn from these).
N_PATCHES = 3000
CLASSES = ("all", "1,7", "4,9", "3,8", "5,6")
QUARTERS = ("random", "top-left", "top-right", "bottom-left", "bottom-right")


@functools.lru_cache(maxsize=8)
def _load(dataset: str, classes: str):
    """All images of a data set as read-only ``(X in [0, 1], labels, (h, w))`` (cached read-only data).

    ``classes`` selects digits; it does not apply to ``photo_patches`` (labels: source photograph).
    """
    digits = None if classes == "all" or dataset == "photo_patches" else tuple(int(c) for c in classes.split(","))
    kwargs = {"digits": digits} if dataset == "mnist" and digits else {}  # MNIST filters itself
    if dataset == "photo_patches":
        kwargs = {"patch": PATCH, "n_samples": N_PATCHES, "random_state": 0}
    data, labels = load_dataset(dataset, return_labels=True, **kwargs)
    X, shape = np.asarray(data.values, dtype=float), tuple(image_shape(dataset, **({"patch": PATCH} if dataset == "photo_patches" else {})))
    labels = np.asarray(labels) if labels is not None else np.full(X.shape[0], -1)
    if digits is not None:
        keep = np.isin(labels, digits)
        X, labels = X[keep], labels[keep]
    X, labels = np.ascontiguousarray(X), np.ascontiguousarray(labels)
    X.setflags(write=False)
    labels.setflags(write=False)
    return X, labels, shape


def load_images(dataset: str, classes: str = "all", n_train: int = 1000, n_eval: int = 100, seed: int = 0):
    """Split the images of ``dataset`` into training and evaluation rows (seeded shuffle).

    Returns
    -------
    dict with ``train`` (min(n_train, n_images - n_eval), D), ``eval`` (n_eval, D), ``train_labels``, ``eval_labels`` and
    ``shape`` (h, w); pixel values in [0, 1].
    """
    if dataset not in DATASETS or classes not in CLASSES:
        raise BadInputError(f"dataset must be one of {DATASETS} and classes one of {CLASSES}.")
    X, labels, shape = _load(dataset, classes)
    if n_eval + 20 > X.shape[0]:
        raise BadInputError(f"{dataset!r} ({classes}) has {X.shape[0]} images; n_eval = {n_eval} leaves fewer "
                            "than 20 for training. Use fewer evaluation images.")
    n_train = min(n_train, X.shape[0] - n_eval)  # all the rest when fewer images than asked for
    order = np.random.default_rng(seed).permutation(X.shape[0])
    tr, ev = order[:n_train], order[n_train:n_train + n_eval]
    return {"train": X[tr], "eval": X[ev], "train_labels": labels[tr], "eval_labels": labels[ev], "shape": shape}


def _mask(kind: str, X: np.ndarray, shape, rng, *, rate, quarter, side, size) -> np.ndarray:
    if kind == "random_pixels":
        return mechanisms.random_pixels(X, rate, rng=rng, image_shape=shape)
    if kind == "quarter":
        q = None if quarter == "random" else QUARTERS.index(quarter) - 1
        return mechanisms.image_quarter(X, rng=rng, image_shape=shape, quarter=q)
    if kind == "half":
        return mechanisms.image_half(X, rng=rng, image_shape=shape, side=side)
    return mechanisms.image_square(X, rng=rng, image_shape=shape, size=min(size, *shape))


def _row_mse(R: np.ndarray, X: np.ndarray, missing: np.ndarray) -> np.ndarray:
    """Per-row mean squared error over the missing pixels (NaN for rows with none), shape (n,)."""
    k = missing.sum(axis=1)
    sse = np.where(missing, (R - X) ** 2, 0.0).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):  # rows with no missing pixel: NaN on purpose
        return sse / k


def _nanmean(a) -> float:
    a = np.asarray(a, dtype=float)
    return float(np.nan) if np.all(np.isnan(a)) else float(np.nanmean(a))
