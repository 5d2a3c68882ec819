"""Built-in data sets: synthetic teaching examples and small real tables from ``assets/``.

>>> from explorer.datasets import list_datasets, load_dataset
>>> [info.name for info in list_datasets()][:3]
['ghahramani_bivariate', 'three_blobs', 'anisotropic']
>>> load_dataset("iris").shape
(150, 4)

Every data set loads complete (no missing entry, ``truth`` set) except ``hepatitis``, which keeps
its real missing values (``truth=None``). Synthetic sets take ``n_samples`` / ``random_state``
(an int seed or a ``numpy.random.Generator``; default seed 0, so a name always gives the same
data); their generating mixture is available from :func:`dataset_parameters`. Class labels or
targets come with ``load_dataset(name, return_labels=True)``. Real tables are read once from
``assets/`` (see ``assets/README.md`` for sources and licences) and cached; nothing reads
outside the repository at run time. ``EXPLORER_ASSETS`` overrides the assets folder.

Image sets (``digits_5x7``, ``mnist``, ``digits_8x8``, ``photo_patches``) have rows that are
images flattened row-major; :func:`image_shape` gives their (height, width), and pixel values
are in [0, 1] (``digits_5x7``: templates plus Gaussian noise).

Mixed-type tables (numbers and categories, most with real missing values: ``penguins``, ``msleep``,
``auto_mpg``, ``abalone``) are a separate catalogue, because :class:`IncompleteData` holds numbers only:
:func:`load_mixed` returns a pandas DataFrame (numeric columns float64 with NaN = missing, categorical
columns of ``category`` dtype with NaN = missing), the input of
:class:`explorer.impute.mixed.MixedMixtureImputer`; :func:`list_mixed` lists them. They are not in
:func:`list_datasets`.

>>> from explorer.datasets import list_mixed, load_mixed
>>> [info.name for info in list_mixed()]
['penguins', 'msleep', 'auto_mpg', 'abalone']
>>> df = load_mixed("penguins")
>>> df.shape, int(df.isna().sum().sum()), str(df["sex"].dtype)
((344, 8), 19, 'category')
"""

from __future__ import annotations

import csv
import functools
import gzip
import inspect
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from explorer.core.data import IncompleteData
from explorer.core.validation import BadInputError

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "ASSETS_DIR",
    "DIGIT_SHAPE",
    "DatasetInfo",
    "MixedDatasetInfo",
    "dataset_parameters",
    "digit_templates",
    "image_shape",
    "list_datasets",
    "list_mixed",
    "load_dataset",
    "load_mixed",
]

ASSETS_DIR = Path(os.environ.get("EXPLORER_ASSETS", Path(__file__).resolve().parent.parent / "assets"))
#: Image shape of the digits_5x7 rows: 7 pixel rows x 5 pixel columns, flattened row-major.
DIGIT_SHAPE = (7, 5)
DEFAULT_DIGIT_NOISE = 0.2

_BIVARIATE_MEAN = np.array([5.0, 5.0])
_BIVARIATE_FACTOR = np.array([[1.0, 0.5], [2.0, 0.5]])  # A A^T = [[5/4, 9/4], [9/4, 17/4]]


@dataclass(frozen=True)
class DatasetInfo:
    """Catalogue entry of a built-in data set (``n_samples`` is the default size)."""

    name: str
    title: str
    n_samples: int
    n_features: int
    description: str
    source: str
    licence: str
    synthetic: bool
    has_missing: bool = False
    labels: str = ""  # what return_labels gives

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class _Entry:
    info: DatasetInfo
    load: Callable[..., tuple[IncompleteData, np.ndarray | None]]
    params: Callable[..., dict] | None = None


_REGISTRY: dict[str, _Entry] = {}
_ALIASES = {"two_moons_like": "two_moons", "digits": "digits_5x7", "boston_housing": "boston"}


def _register(info: DatasetInfo, params=None):
    def deco(fn):
        _REGISTRY[info.name] = _Entry(info, fn, params)
        return fn

    return deco


def _ro(a: np.ndarray) -> np.ndarray:
    a = np.array(a, copy=True)
    a.setflags(write=False)
    return a


def _rng(random_state) -> np.random.Generator:
    if isinstance(random_state, np.random.Generator):
        return random_state
    if random_state is None or isinstance(random_state, (int, np.integer)):
        return np.random.default_rng(random_state)
    raise BadInputError(f"random_state must be an int, None or a numpy.random.Generator; got {random_state!r}.")


def _n(n_samples, minimum: int = 2) -> int:
    if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)) or n_samples < minimum:
        raise BadInputError(f"n_samples must be an integer >= {minimum}; got {n_samples!r}.")
    return int(n_samples)


def _sample_mixture(weights, means, covariances, n: int, rng: np.random.Generator):
    labels = rng.choice(len(weights), size=n, p=np.asarray(weights))
    chol = np.linalg.cholesky(np.asarray(covariances))
    z = rng.standard_normal((n, means.shape[1]))
    X = means[labels] + np.einsum("nij,nj->ni", chol[labels], z)
    return X, labels


# ---------------------------------------------------------------------------- synthetic
def _bivariate_params() -> dict:
    return {
        "weights": np.array([1.0]),
        "means": _BIVARIATE_MEAN[None, :],
        "covariances": (_BIVARIATE_FACTOR @ _BIVARIATE_FACTOR.T)[None],
    }


@_register(
    DatasetInfo(
        "ghahramani_bivariate", "Bivariate Gaussian (Ghahramani & Jordan Fig. 1)", 200, 2,
        "Gaussian with mean (5, 5) and covariance [[5/4, 9/4], [9/4, 17/4]] (correlation 0.976).",
        "ghahramani1994 (Ghahramani & Jordan 1994), Fig. 1; generated", "n/a (synthetic)", True, labels="zeros",
    ),
    params=_bivariate_params,
)
def _bivariate(n_samples=200, random_state=0):
    rng = _rng(random_state)
    n = _n(n_samples)
    X = _BIVARIATE_MEAN + rng.standard_normal((n, 2)) @ _BIVARIATE_FACTOR.T
    data = IncompleteData.from_complete(
        X, columns=("x", "y"), name="ghahramani_bivariate",
        description=f"{n} draws from N((5, 5), [[5/4, 9/4], [9/4, 17/4]]) (ghahramani1994 Fig. 1)",
    )
    return data, np.zeros(n, dtype=np.intp)


def _rotated(angle_deg: float, long_var: float, short_var: float) -> np.ndarray:
    a = np.deg2rad(angle_deg)
    R = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
    return R @ np.diag([long_var, short_var]) @ R.T


_MIXTURES = {
    "three_blobs": {
        "weights": np.array([0.3, 0.3, 0.4]),
        "means": np.array([[-4.0, -2.0], [4.0, -2.0], [0.0, 4.0]]),
        "covariances": np.array([[[1.2, 0.5], [0.5, 0.6]], [[0.6, -0.4], [-0.4, 1.0]], [[1.5, 0.3], [0.3, 0.5]]]),
    },
    "anisotropic": {
        "weights": np.full(3, 1.0 / 3.0),
        "means": np.array([[-3.0, 0.0], [0.0, 0.0], [3.0, 0.0]]),
        "covariances": np.stack([_rotated(60.0, 4.0, 0.1)] * 3),
    },
}


def _mixture_loader(name: str, description: str):
    def load(n_samples=300, random_state=0):
        p = _MIXTURES[name]
        X, labels = _sample_mixture(p["weights"], p["means"], p["covariances"], _n(n_samples), _rng(random_state))
        return IncompleteData.from_complete(X, columns=("x", "y"), name=name, description=description), labels

    return load


for _name, _title, _desc in [
    ("three_blobs", "Three blobs", "3 well separated full-covariance Gaussian clusters in 2-D."),
    ("anisotropic", "Anisotropic clusters",
     "3 parallel elongated clusters (60 degrees, variances 4 and 0.1): easy for a GMM, hard for k-means."),
]:  # fmt: skip
    _register(
        DatasetInfo(_name, _title, 300, 2, _desc, "generated (Gaussian mixture)", "n/a (synthetic)", True,
                    labels="mixture component"),
        params=functools.partial(lambda n: _MIXTURES[n], _name),
    )(_mixture_loader(_name, _desc))


@_register(
    DatasetInfo(
        "two_moons", "Two moons", 300, 2,
        "Two interleaving half circles with Gaussian noise (0.1): a non-Gaussian shape a mixture must tile.",
        "generated (as sklearn.datasets.make_moons, random angles)", "n/a (synthetic)", True, labels="moon",
    )
)
def _two_moons(n_samples=300, random_state=0, noise=0.1):
    rng, n = _rng(random_state), _n(n_samples)
    labels = (np.arange(n) >= (n + 1) // 2).astype(np.intp)
    t = rng.uniform(0.0, np.pi, size=n)
    X = np.where(labels[:, None] == 0, np.c_[np.cos(t), np.sin(t)], np.c_[1.0 - np.cos(t), 0.5 - np.sin(t)])
    X = X + float(noise) * rng.standard_normal((n, 2))
    return IncompleteData.from_complete(X, columns=("x", "y"), name="two_moons",
                                        description=f"two moons, {n} points, noise {noise}"), labels


@_register(
    DatasetInfo(
        "ring", "Ring", 300, 2, "Points on a circle of radius 3 with radial Gaussian noise (0.25).",
        "generated", "n/a (synthetic)", True,
    )
)
def _ring(n_samples=300, random_state=0, radius=3.0, noise=0.25):
    rng, n = _rng(random_state), _n(n_samples)
    t = rng.uniform(0.0, 2.0 * np.pi, size=n)
    r = float(radius) + float(noise) * rng.standard_normal(n)
    X = np.c_[r * np.cos(t), r * np.sin(t)]
    return IncompleteData.from_complete(X, columns=("x", "y"), name="ring",
                                        description=f"ring, {n} points, radius {radius}, noise {noise}"), None


# ---------------------------------------------------------------------------- digits
@functools.lru_cache(maxsize=1)
def _templates() -> np.ndarray:
    path = ASSETS_DIR / "digits_5x7.txt"
    blocks: dict[int, list[str]] = {}
    current = None
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("digit"):
            current = int(line.split()[1])
            blocks[current] = []
        else:
            blocks[current].append(line)
    out = np.zeros((10, *DIGIT_SHAPE))
    for d in range(10):
        rows = blocks[d]
        if len(rows) != DIGIT_SHAPE[0] or any(len(r) != DIGIT_SHAPE[1] for r in rows):
            raise RuntimeError(f"{path}: digit {d} is not a {DIGIT_SHAPE[0]}x{DIGIT_SHAPE[1]} bitmap.")
        out[d] = [[1.0 if c == "X" else 0.0 for c in r] for r in rows]
    return _ro(out)


def digit_templates(flat: bool = False) -> np.ndarray:
    """The ten clean binary 5x7 digit templates (read-only).

    Returns
    -------
    ndarray of shape (10, 7, 5), or (10, 35) when ``flat`` (row-major, as the data set's rows).
    """
    t = _templates()
    return _ro(t.reshape(10, -1)) if flat else t


def _digits_params(noise=DEFAULT_DIGIT_NOISE) -> dict:
    d = DIGIT_SHAPE[0] * DIGIT_SHAPE[1]
    return {
        "weights": np.full(10, 0.1),
        "means": digit_templates(flat=True),
        "covariances": np.broadcast_to(float(noise) ** 2 * np.eye(d), (10, d, d)),
    }


@_register(
    DatasetInfo(
        "digits_5x7", "Noisy 5x7 digits (Ghahramani & Jordan Fig. 2)", 100, 35,
        "10 noisy copies of each 5x7 digit template (Gaussian noise sd 0.2); rows are 7x5 images flattened row-major.",
        "ghahramani1994 (Ghahramani & Jordan 1994), Fig. 2; templates designed for this project", "CC0 (synthetic)",
        True, labels="digit",
    ),
    params=_digits_params,
)
def _digits(n_per_digit=10, noise=DEFAULT_DIGIT_NOISE, random_state=0):
    rng, k = _rng(random_state), _n(n_per_digit, minimum=1)
    if not float(noise) >= 0.0:
        raise BadInputError(f"noise must be a standard deviation >= 0; got {noise!r}.")
    labels = np.repeat(np.arange(10), k)
    X = digit_templates(flat=True)[labels] + float(noise) * rng.standard_normal((10 * k, 35))
    cols = tuple(f"r{i}c{j}" for i in range(DIGIT_SHAPE[0]) for j in range(DIGIT_SHAPE[1]))
    desc = f"digits 0-9 x {k} copies, template (7x5, 0/1) + N(0, {float(noise)}^2) noise; image shape (7, 5)"
    return IncompleteData.from_complete(X, columns=cols, name="digits_5x7", description=desc), labels


# ---------------------------------------------------------------------------- real tables
@functools.lru_cache(maxsize=None)
def _read_asset(filename: str) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
    path = ASSETS_DIR / filename
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing; run scripts/prepare_assets.py to build the assets.")
    with open(path, newline="") as fh:
        rows = [tuple(r) for r in csv.reader(fh) if r]
    return rows[0], tuple(rows[1:])


def _numeric(rows, idx, na=("?",)) -> np.ndarray:
    return np.array([[np.nan if r[j] in na else float(r[j]) for j in idx] for r in rows])


def _table_loader(name, filename, drop, label_col, description, *, label_type=int, binary_cols=(), recode12=()):
    @functools.lru_cache(maxsize=1)
    def load():
        header, rows = _read_asset(filename)
        keep = [j for j, c in enumerate(header) if c not in drop and c != label_col]
        X = _numeric(rows, keep)
        cols = tuple(header[j] for j in keep)
        for c in recode12:  # 1/2 coding -> 0/1
            X[:, cols.index(c)] -= 1.0
        binary = tuple(c in binary_cols or c in recode12 for c in cols)
        labels = None
        if label_col is not None:
            j = header.index(label_col)
            labels = _ro(np.array([label_type(r[j]) for r in rows]))
        if np.isnan(X).any():
            data = IncompleteData.from_array(X, columns=cols, binary=binary, name=name, description=description)
        else:
            data = IncompleteData.from_complete(X, columns=cols, binary=binary, name=name, description=description)
        return data, labels

    return lambda: load()


_HEP_BINARY = ("SEX", "STEROID", "ANTIVIRAL", "FATIGUE", "MALAISE", "ANOREXIA", "LIVER_BIG", "LIVER_FIRM",
               "SPLEEN_PALPABLE", "SPIDERS", "ASCITES", "VARICES", "HISTOLOGY")  # fmt: skip
_TABLES = [
    (DatasetInfo("iris", "Iris", 150, 4, "Fisher's iris: 4 flower measurements (cm), 3 species.",
                 "scikit-learn bundled copy (Fisher 1936; UCI)", "CC BY 4.0 (UCI)", False, labels="species 0-2"),
     dict(filename="iris.csv", drop=(), label_col="target")),
    (DatasetInfo("wine", "Wine", 178, 13, "13 chemical measurements of wines from 3 cultivars.",
                 "scikit-learn bundled copy (UCI Wine)", "CC BY 4.0 (UCI)", False, labels="cultivar 0-2"),
     dict(filename="wine.csv", drop=(), label_col="target")),
    (DatasetInfo("boston", "Boston housing", 506, 13,
                 "1970 Boston census tracts, 12 numeric + CHAS (0/1), MEDV dropped (garriga2017). Caveat: column B "
                 "encodes a racial statistic; kept only for faithful reproduction of garriga2017.",
                 "Harrison & Rubinfeld (1978) via UCI/StatLib", "public domain (StatLib)", False, labels="MEDV"),
     dict(filename="boston.csv", drop=(), label_col="MEDV", label_type=float, binary_cols=("CHAS",))),
    (DatasetInfo("ionosphere", "Ionosphere", 351, 33,
                 "Radar returns: V1 binary, V3-V34 numeric; constant V2 and the class dropped (garriga2017).",
                 "UCI Machine Learning Repository (Sigillito et al. 1989)", "CC BY 4.0", False,
                 labels="class 'g'/'b'"),
     dict(filename="ionosphere.csv", drop=("V2",), label_col="Class", label_type=str, binary_cols=("V1",))),
    (DatasetInfo("hepatitis", "Hepatitis (real missing values)", 155, 19,
                 "155 patients, 19 attributes with their real missing values (5.7%, 21 patterns); 1/2-coded "
                 "attributes recoded to 0/1 (1 = yes / female); class DIE_LIVE dropped (labels).",
                 "UCI Machine Learning Repository (Hepatitis)", "CC BY 4.0", False, has_missing=True,
                 labels="DIE_LIVE (1 = die, 2 = live)"),
     dict(filename="hepatitis.csv", drop=(), label_col="DIE_LIVE", recode12=_HEP_BINARY)),
]
for _info, _kw in _TABLES:
    _register(_info)(_table_loader(_info.name, description=_info.description, **_kw))


# ---------------------------------------------------------------------------- images
MNIST_SHAPE = (28, 28)
DIGITS_8X8_SHAPE = (8, 8)
_MNIST_FILES = {"images": ("t10k-images-idx3-ubyte.gz", 2051), "labels": ("t10k-labels-idx1-ubyte.gz", 2049)}
_PHOTOS = ("china", "flower")


def _asset_path(filename: str) -> Path:
    path = ASSETS_DIR / filename
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing; run scripts/prepare_assets.py to build the assets.")
    return path


def _read_idx(filename: str, magic: int) -> np.ndarray:
    """An IDX file (big-endian int32 magic and sizes, then uint8 data) as a uint8 array."""
    body = gzip.decompress(_asset_path(filename).read_bytes())
    ndim = magic & 0xFF
    header = np.frombuffer(body[: 4 * (1 + ndim)], dtype=">i4")
    if header[0] != magic:
        raise RuntimeError(f"{filename}: IDX magic number {header[0]} (expected {magic}); the file is corrupt.")
    shape = tuple(int(v) for v in header[1:])
    data = np.frombuffer(body, dtype=np.uint8, offset=4 * (1 + ndim))
    if data.size != int(np.prod(shape)):
        raise RuntimeError(f"{filename}: {data.size} bytes of data for shape {shape}; the file is truncated.")
    return data.reshape(shape)


@functools.lru_cache(maxsize=1)
def _mnist_raw() -> tuple[np.ndarray, np.ndarray]:
    """MNIST test images (10000, 784) and labels (10000,), uint8, read-only."""
    images = _read_idx(*_MNIST_FILES["images"]).reshape(-1, MNIST_SHAPE[0] * MNIST_SHAPE[1])
    labels = _read_idx(*_MNIST_FILES["labels"])
    return _ro(images), _ro(labels)


@functools.lru_cache(maxsize=2)
def _npz(filename: str) -> dict[str, np.ndarray]:
    with np.load(_asset_path(filename)) as z:
        return {k: _ro(z[k]) for k in z.files}


def _pixel_columns(shape: tuple[int, int]) -> tuple[str, ...]:
    return tuple(f"r{i}c{j}" for i in range(shape[0]) for j in range(shape[1]))


def _image_data(X: np.ndarray, shape, name: str, description: str) -> IncompleteData:
    return IncompleteData.from_complete(X, columns=_pixel_columns(shape), binary=(False,) * X.shape[1], name=name,
                                        description=description)


def _subsample(n_available: int, n_samples, random_state, who: str) -> np.ndarray:
    """Sorted row indices: all rows (``n_samples=None``) or a uniform draw without replacement."""
    if n_samples is None:
        return np.arange(n_available)
    n = _n(n_samples, minimum=1)
    if n > n_available:
        raise BadInputError(f"{who}: n_samples={n} exceeds the {n_available} available images; use n_samples <= "
                            f"{n_available} or None for all of them.")
    return np.sort(_rng(random_state).choice(n_available, size=n, replace=False))


def _check_digits(digits) -> tuple[int, ...] | None:
    if digits is None:
        return None
    try:
        ds = tuple(digits)
    except TypeError:
        ds = (digits,)
    ok = len(ds) > 0 and all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and 0 <= d <= 9 for d in ds)
    if not ok or len(set(ds)) != len(ds):
        raise BadInputError(f"digits must be None or distinct integers 0-9, e.g. (1, 7); got {digits!r}.")
    return tuple(sorted(int(d) for d in ds))


@_register(
    DatasetInfo(
        "mnist", "MNIST test digits (28x28)", 10000, 784,
        "The 10,000 MNIST test images, 28x28 grey, pixels / 255 in [0, 1], flattened row-major. Options: "
        "digits=(1, 7) keeps those classes (2163 images: 1135 ones, 1028 sevens), n_samples draws a subset.",
        "Y. LeCun, C. Cortes, C. Burges, MNIST test set (t10k IDX files, copied unchanged)", "CC BY-SA 3.0",
        False, labels="digit 0-9",
    )
)
def _mnist(digits=None, n_samples=None, random_state=0):
    images, labels = _mnist_raw()
    keep = _check_digits(digits)
    rows = np.arange(labels.size) if keep is None else np.flatnonzero(np.isin(labels, keep))
    rows = rows[_subsample(rows.size, n_samples, random_state, "mnist")]
    which = "all digits" if keep is None else "digits " + ", ".join(map(str, keep))
    desc = f"MNIST test set, {which}, {rows.size} images 28x28, pixel / 255; image shape (28, 28)"
    return _image_data(images[rows] / 255.0, MNIST_SHAPE, "mnist", desc), _ro(labels[rows].astype(np.intp))


@_register(
    DatasetInfo(
        "digits_8x8", "Handwritten digits 8x8 (scikit-learn)", 1797, 64,
        "scikit-learn's 1797 8x8 digit images (UCI optical recognition of handwritten digits), grey levels "
        "0-16 divided by 16, flattened row-major. n_samples draws a subset.",
        "scikit-learn load_digits (UCI Optical Recognition of Handwritten Digits, Alpaydin & Kaynak 1998)",
        "CC BY 4.0 (UCI); scikit-learn BSD-3", False, labels="digit 0-9",
    )
)
def _digits_8x8(n_samples=None, random_state=0):
    z = _npz("digits_8x8.npz")
    rows = _subsample(z["images"].shape[0], n_samples, random_state, "digits_8x8")
    desc = f"scikit-learn digits, {rows.size} images 8x8, grey level / 16; image shape (8, 8)"
    return _image_data(z["images"][rows] / 16.0, DIGITS_8X8_SHAPE, "digits_8x8", desc), \
        _ro(z["target"][rows].astype(np.intp))


def _check_patch(patch) -> int:
    if isinstance(patch, bool) or not isinstance(patch, (int, np.integer)) or not 2 <= patch <= 64:
        raise BadInputError(f"patch must be an integer side length in [2, 64] pixels; got {patch!r}.")
    return int(patch)


@_register(
    DatasetInfo(
        "photo_patches", "Photograph patches (grey)", 2000, 256,
        "Square grey patches (default 16x16) cut at uniformly random positions from scikit-learn's two sample "
        "photographs (china, flower; 427x640, luma 0.299R + 0.587G + 0.114B), pixels / 255. Options: patch "
        "(side), n_samples, random_state.",
        "scikit-learn load_sample_images: china.jpg (Flickr, danielbuechele) and flower.jpg (Flickr, vultilion), "
        "converted to grey by scripts/prepare_assets.py", "CC BY 2.0", False, labels="source photo (0 china, 1 flower)",
    )
)
def _photo_patches(patch=16, n_samples=2000, random_state=0):
    k, n, rng = _check_patch(patch), _n(n_samples, minimum=1), _rng(random_state)
    photos = [_npz("sample_photos_gray.npz")[name] for name in _PHOTOS]
    src = rng.integers(0, len(photos), size=n)
    out = np.empty((n, k * k))
    for i, img in enumerate(photos):
        rows = np.flatnonzero(src == i)
        r0 = rng.integers(0, img.shape[0] - k + 1, size=rows.size)
        c0 = rng.integers(0, img.shape[1] - k + 1, size=rows.size)
        win = np.lib.stride_tricks.sliding_window_view(img, (k, k))  # (H-k+1, W-k+1, k, k) view
        out[rows] = win[r0, c0].reshape(rows.size, k * k) / 255.0
    desc = f"{n} grey {k}x{k} patches of scikit-learn's sample photographs, pixel / 255; image shape ({k}, {k})"
    return _image_data(out, (k, k), "photo_patches", desc), _ro(src.astype(np.intp))


_IMAGE_SHAPES: dict[str, Callable[..., tuple[int, int]]] = {
    "digits_5x7": lambda **kw: DIGIT_SHAPE,
    "mnist": lambda **kw: MNIST_SHAPE,
    "digits_8x8": lambda **kw: DIGITS_8X8_SHAPE,
    "photo_patches": lambda patch=16, **kw: (_check_patch(patch),) * 2,
}


# ---------------------------------------------------------------------------- mixed-type tables
@dataclass(frozen=True)
class MixedDatasetInfo(DatasetInfo):
    """Catalogue entry of a mixed-type table of :func:`load_mixed` (``n_features`` counts the target column).

    ``categorical`` names the ``category`` columns (the others are float64), ``target`` the column usually
    predicted from the others ("" for none; it stays in the frame), ``index`` the identifier column used as
    the row labels ("" for a RangeIndex), ``n_missing`` the missing cells of the frame (all columns).
    """

    categorical: tuple[str, ...] = ()
    target: str = ""
    index: str = ""
    n_missing: int = 0


@dataclass(frozen=True)
class _MixedEntry:
    info: MixedDatasetInfo
    load: Callable[[], pd.DataFrame]


_MIXED: dict[str, _MixedEntry] = {}
_MIXED_ALIASES = {"palmerpenguins": "penguins", "cars": "auto_mpg", "mammals_sleep": "msleep"}
_MIXED_NA = ("NA",)


def _model_year(cell: str) -> float:
    """vega-datasets dates a model year as 'YYYY-01-01'."""
    return float(cell[:4])


def _mixed_table_loader(info: MixedDatasetInfo, filename: str, *, drop=(), convert=None):
    """Loader of a CSV in assets/ as a DataFrame: ``info.categorical`` columns as categories (levels sorted),
    the others float64 (``convert`` maps a column to its cell parser, default ``float``); NA = missing;
    ``info.index`` as the row labels; ``drop`` columns left out."""
    convert = dict(convert or {})

    @functools.lru_cache(maxsize=1)
    def load():
        import pandas as pd

        header, rows = _read_asset(filename)
        missing = [c for c in (*info.categorical, *drop, *convert, *([info.index] if info.index else []))
                   if c not in header]
        if missing:
            raise RuntimeError(f"{ASSETS_DIR / filename}: column(s) {missing} not in the header {list(header)}.")
        out = {}
        for j, col in enumerate(header):
            if col in drop or col == info.index:
                continue
            cells = [r[j] for r in rows]
            if col in info.categorical:
                values = [None if c in _MIXED_NA else c for c in cells]
                out[col] = pd.Categorical(values, categories=sorted({v for v in values if v is not None}))
            else:
                parse = convert.get(col, float)
                out[col] = np.array([np.nan if c in _MIXED_NA else parse(c) for c in cells], dtype=np.float64)
        index = pd.Index([r[header.index(info.index)] for r in rows], name=info.index) if info.index else None
        frame = pd.DataFrame(out, index=index)
        if frame.shape != (info.n_samples, info.n_features) or int(frame.isna().sum().sum()) != info.n_missing:
            raise RuntimeError(f"{ASSETS_DIR / filename}: read {frame.shape} with {int(frame.isna().sum().sum())} "
                               f"missing cells; expected ({info.n_samples}, {info.n_features}) with "
                               f"{info.n_missing}. The file is not the one described in assets/README.md.")
        return frame

    return load


_MIXED_TABLES = [
    (MixedDatasetInfo(
        "penguins", "Palmer penguins (real missing values)", 344, 8,
        "344 penguins of 3 species on 3 islands of the Palmer Archipelago (2007-2009): bill length and depth, "
        "flipper length (mm), body mass (g), year; species, island and sex are categories. Real missing values: "
        "2 birds without any measurement, 11 without sex (19 cells, 0.7%).",
        "palmerpenguins 0.1.6 (PyPI), palmerpenguins/data/penguins.csv; Horst, Hill & Gorman (2020), data of "
        "Gorman, Williams & Fraser (2014), Palmer Station LTER", "CC0 (data); package MIT", False,
        has_missing=True, labels="", categorical=("species", "island", "sex"), target="species", n_missing=19),
     dict(filename="penguins.csv")),
    (MixedDatasetInfo(
        "msleep", "Mammals' sleep (real missing values)", 83, 9,
        "83 mammals (row labels: common name): total, REM and cycle of sleep, time awake (hours), brain and body "
        "weight (kg); diet (vore), taxonomic order and conservation status are categories; genus is left out "
        "(77 values for 83 animals). Real missing values in 5 of the 9 columns (136 cells, 18.2%).",
        "plotnine 0.15.9 (PyPI), plotnine/data/msleep.csv (ggplot2's msleep; Savage & West 2007, PNAS 104:1051, "
        "with vore, order and conservation added from Wikipedia)", "MIT (plotnine, ggplot2)", False,
        has_missing=True, labels="", categorical=("vore", "order", "conservation"), index="name", n_missing=136),
     dict(filename="msleep.csv", drop=("genus",))),
    (MixedDatasetInfo(
        "auto_mpg", "Auto MPG cars (real missing values)", 406, 8,
        "406 car models 1970-1982 (row labels: model name, not unique): miles per gallon, cylinders, displacement, "
        "horsepower, weight (lbs), acceleration, model year; Origin (USA, Europe, Japan) is a category. Real "
        "missing values: 8 miles per gallon, 6 horsepower (14 cells, 0.4%). This copy dates no model in 1981: "
        "61 are dated 1982.",
        "vega_datasets 0.9.0 (PyPI), vega_datasets/_data/cars.json converted to CSV (Donoho & Ramos 1982, "
        "StatLib; the UCI Auto MPG data, Quinlan 1993, in its original 406 rows)",
        "CC BY 4.0 (UCI Auto MPG); package MIT", False, has_missing=True, labels="", categorical=("Origin",),
        target="Miles_per_Gallon", index="Name", n_missing=14),
     dict(filename="auto_mpg.csv", convert={"Year": _model_year})),
    (MixedDatasetInfo(
        "abalone", "Abalone (complete; target rings)", 4177, 9,
        "4177 abalones: sex (M, F, I = infant) is a category; length, diameter, height (mm / 200), whole, "
        "shucked, viscera and shell weight (g / 200) and rings (age - 1.5 years; the target, kept in the frame "
        "as a float column) are numbers. No missing value (2 heights are 0 in the source).",
        "scikit-lego 0.9.10 (PyPI), sklego/data/abalone.zip; UCI Abalone (Nash, Sellers, Talbot, Cawthorn & Ford "
        "1994); values rounded to UCI's 4 decimals: rows identical to UCI's abalone.data",
        "CC BY 4.0 (UCI); package MIT", False, labels="", categorical=("sex",), target="rings"),
     dict(filename="abalone.csv")),
]
for _info, _kw in _MIXED_TABLES:
    _MIXED[_info.name] = _MixedEntry(_info, _mixed_table_loader(_info, **_kw))


# ---------------------------------------------------------------------------- public API
def _entry(name: str) -> _Entry:
    key = _ALIASES.get(name, name)
    if key not in _REGISTRY:
        raise BadInputError(f"unknown data set {name!r}; available: {', '.join(_REGISTRY)}.")
    return _REGISTRY[key]


def _check_kwargs(entry: _Entry, fn, kwargs: dict) -> None:
    accepted = list(inspect.signature(fn).parameters)
    unknown = sorted(set(kwargs) - set(accepted))
    if unknown:
        raise BadInputError(f"{entry.info.name!r} does not take {unknown}; accepted options: {accepted or 'none'}.")


def image_shape(name: str, **kwargs) -> tuple[int, int] | None:
    """(height, width) of the rows of an image data set, or None for a non-image set.

    Parameters
    ----------
    name : str
        A data set name (aliases accepted).
    **kwargs
        The options that would be passed to :func:`load_dataset` (only ``photo_patches``'s ``patch``
        changes the shape; unknown options are an error, as in :func:`load_dataset`).

    Returns
    -------
    tuple (height, width) or None
        ``digits_5x7`` (7, 5), ``mnist`` (28, 28), ``digits_8x8`` (8, 8), ``photo_patches``
        (patch, patch); rows are flattened row-major, so ``X[i].reshape(height, width)`` is image i.

    Examples
    --------
    >>> image_shape("mnist"), image_shape("photo_patches", patch=8), image_shape("iris")
    ((28, 28), (8, 8), None)
    """
    entry = _entry(name)
    _check_kwargs(entry, entry.load, kwargs)
    shape = _IMAGE_SHAPES.get(entry.info.name)
    return None if shape is None else tuple(shape(**kwargs))


def list_datasets() -> list[DatasetInfo]:
    """Catalogue of the built-in data sets, in display order (see :class:`DatasetInfo`)."""
    return [e.info for e in _REGISTRY.values()]


def load_dataset(name: str, *, return_labels: bool = False, **kwargs):
    """Load a built-in data set as complete :class:`IncompleteData` (``hepatitis``: real missing).

    Parameters
    ----------
    name : str
        One of ``[info.name for info in list_datasets()]``.
    return_labels : bool, default False
        Also return the class labels / target of each row (None for ``ring``).
    **kwargs
        Generator options of synthetic sets: ``n_samples`` (digits: ``n_per_digit``),
        ``random_state`` (int, None or Generator; default 0), and ``noise`` (digits, moons, ring).
        Image sets: ``mnist`` takes ``digits`` (None or e.g. ``(1, 7)``), ``n_samples`` (None = all)
        and ``random_state``; ``digits_8x8`` ``n_samples`` / ``random_state``; ``photo_patches``
        ``patch`` (side, default 16), ``n_samples`` (default 2000) and ``random_state``.

    Returns
    -------
    IncompleteData, or (IncompleteData, ndarray or None) with ``return_labels``.
    """
    entry = _entry(name)
    _check_kwargs(entry, entry.load, kwargs)
    data, labels = entry.load(**kwargs)
    return (data, labels) if return_labels else data


def dataset_parameters(name: str, **kwargs) -> dict:
    """True generating mixture of a synthetic data set.

    Returns
    -------
    dict with read-only ``weights`` (K,), ``means`` (K, D) and ``covariances`` (K, D, D).

    Raises
    ------
    BadInputError
        For data sets not drawn from a Gaussian mixture (real tables, ``two_moons``, ``ring``).
    """
    entry = _entry(name)
    if entry.params is None:
        raise BadInputError(
            f"{entry.info.name!r} is not drawn from a known Gaussian mixture; parameters exist for "
            f"{', '.join(n for n, e in _REGISTRY.items() if e.params is not None)}."
        )
    _check_kwargs(entry, entry.params, kwargs)
    return {k: _ro(v) for k, v in entry.params(**kwargs).items()}


def _mixed_entry(name: str) -> _MixedEntry:
    key = _MIXED_ALIASES.get(name, name) if isinstance(name, str) else name
    if not isinstance(key, str) or key not in _MIXED:
        numeric = " (a numeric set: use load_dataset)" if isinstance(name, str) and name in _REGISTRY else ""
        raise BadInputError(f"unknown mixed-type data set {name!r}{numeric}; available: {', '.join(_MIXED)}.")
    return _MIXED[key]


def list_mixed() -> list[MixedDatasetInfo]:
    """Catalogue of the mixed-type tables of :func:`load_mixed` (see :class:`MixedDatasetInfo`)."""
    return [e.info for e in _MIXED.values()]


def load_mixed(name: str) -> pd.DataFrame:
    """Load a built-in mixed-type table (numbers and categories) as a new pandas DataFrame.

    Parameters
    ----------
    name : str
        One of ``[info.name for info in list_mixed()]``: ``penguins``, ``msleep``, ``auto_mpg``, ``abalone``
        (aliases ``palmerpenguins``, ``cars``, ``mammals_sleep``).

    Returns
    -------
    pandas.DataFrame
        Numeric columns float64 (NaN = missing), the columns in ``info.categorical`` of ``category`` dtype
        (levels sorted; NaN = missing); an identifier column, where there is one, as the index
        (``info.index``). The target column (``info.target``, e.g. ``rings`` of ``abalone``) stays in the
        frame: drop it to predict it from the others. Each call returns an independent copy.

    Raises
    ------
    BadInputError
        For an unknown name (the message lists the available ones).

    Examples
    --------
    >>> df = load_mixed("abalone")
    >>> df.shape, list(df["sex"].cat.categories), str(df["rings"].dtype)
    ((4177, 9), ['F', 'I', 'M'], 'float64')
    """
    return _mixed_entry(name).load().copy(deep=True)
