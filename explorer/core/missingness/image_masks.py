"""Image masks (ghahramani1994, delalleau2012, antypas2023, marlin2008): random pixels, quarters, halves, squares.

Each row of ``X`` is a flattened image of ``image_shape=(height, width)`` in row-major order; the
masks are bool arrays of the same shape as ``X``, True = missing. Registered in
:mod:`explorer.core.missingness.mechanisms` (keys ``random_pixels``, ``quarter``, ``half``, ``square``).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from explorer.core.missingness.mask_helpers import (
    _check_choice,
    _check_rng,
    _complete,
    _image_shape,
)
from explorer.core.missingness.tabular_mechanisms import mcar
from explorer.core.validation import BadInputError

__all__ = ["random_pixels", "image_quarter", "image_half", "image_square"]


def random_pixels(X, rate=0.5, *, rng, image_shape=None) -> np.ndarray:
    """MCAR pixels (antypas2023 "Random", ghahramani1994 Fig. 2): each pixel missing w.p. ``rate``.

    ``image_shape=(height, width)`` with height * width = n_features is required (checked).
    Returns a bool ndarray of shape (n_samples, n_features).
    """
    X = _complete(X, "random_pixels")
    _image_shape(image_shape, X.shape[1], "random_pixels")
    return mcar(X, rate, rng=rng)


def _block_masks(h: int, w: int) -> dict[str, np.ndarray]:
    """Flattened (h*w,) masks of the halves (h//2 rows / w//2 columns each) and quarters."""
    rows, cols = np.arange(h)[:, None], np.arange(w)[None, :]
    top, bottom = rows < h // 2, rows >= h - h // 2
    left, right = cols < w // 2, cols >= w - w // 2
    grid = {"top": top & (cols >= 0), "bottom": bottom & (cols >= 0),
            "left": left & (rows >= 0), "right": right & (rows >= 0),
            0: top & left, 1: top & right, 2: bottom & left, 3: bottom & right}
    return {key: m.ravel() for key, m in grid.items()}


def image_quarter(X, *, rng, image_shape=None, quarter=None) -> np.ndarray:
    """MCAR quarter mask (antypas2023 "Quarters", marlin2008 MNIST): one quarter of each image missing.

    ``quarter`` = 0 top-left, 1 top-right, 2 bottom-left, 3 bottom-right, or None to draw one
    uniformly per image. A quarter is an (height//2) x (width//2) corner block; for an odd
    dimension the middle row/column is never removed. Needs height, width >= 2.

    Returns a bool ndarray of shape (n_samples, height * width).
    """
    X = _complete(X, "quarter")
    _check_rng(rng, "quarter")
    h, w = _image_shape(image_shape, X.shape[1], "quarter")
    if quarter is not None:
        _check_choice(quarter, (0, 1, 2, 3), "quarter", "quarter")
    if h < 2 or w < 2:
        raise BadInputError(
            f"quarter: images of shape {(h, w)} have no quarters; height and width must be >= 2."
        )
    masks = _block_masks(h, w)
    stack = np.stack([masks[q] for q in range(4)])
    which = rng.integers(0, 4, size=X.shape[0]) if quarter is None else np.full(X.shape[0], quarter)
    return stack[which]


def image_half(
    X, *, rng, image_shape=None, side: Literal["top", "bottom", "left", "right"] = "top"
) -> np.ndarray:
    """MCAR half mask (antypas2023 "Halves": the top half of every image is removed).

    The half is height//2 rows (top/bottom) or width//2 columns (left/right); for an odd
    dimension the middle row/column stays observed. Deterministic; ``rng`` is unused.

    Returns a bool ndarray of shape (n_samples, height * width).
    """
    X = _complete(X, "half")
    _check_rng(rng, "half")
    h, w = _image_shape(image_shape, X.shape[1], "half")
    _check_choice(side, ("top", "bottom", "left", "right"), "half", "side")
    if (h if side in ("top", "bottom") else w) < 2:
        raise BadInputError(f"half: images of shape {(h, w)} cannot be split on side={side!r}.")
    return np.broadcast_to(_block_masks(h, w)[side], X.shape).copy()


def image_square(X, *, rng, image_shape=None, size=5) -> np.ndarray:
    """MCAR square mask (delalleau2012 Sec. 3.1): a size x size square per image, fully inside it.

    The top-left corner is uniform over the (height - size + 1) x (width - size + 1) positions
    (576 positions for 5 x 5 squares on 28 x 28 MNIST).

    Returns a bool ndarray of shape (n_samples, height * width).
    """
    X = _complete(X, "square")
    _check_rng(rng, "square")
    h, w = _image_shape(image_shape, X.shape[1], "square")
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or not 1 <= size <= min(h, w):
        raise BadInputError(
            f"square: size={size!r} must be an integer in [1, {min(h, w)}] for images of shape {(h, w)}."
        )
    n = X.shape[0]
    r0 = rng.integers(0, h - size + 1, size=n)[:, None]
    c0 = rng.integers(0, w - size + 1, size=n)[:, None]
    in_r = (np.arange(h) >= r0) & (np.arange(h) < r0 + size)
    in_c = (np.arange(w) >= c0) & (np.arange(w) < c0 + size)
    return (in_r[:, :, None] & in_c[:, None, :]).reshape(n, h * w)
