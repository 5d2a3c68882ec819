"""The image data sets (mnist, digits_8x8, photo_patches) and image_shape()."""

from __future__ import annotations

import gzip
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from explorer.core.data import IncompleteData
from explorer.core.validation import BadInputError
from explorer.datasets import ASSETS_DIR, image_shape, list_datasets, load_dataset

ROOT = Path(__file__).resolve().parents[1]
IMAGE_SETS = {"mnist": (10000, 784), "digits_8x8": (1797, 64), "photo_patches": (2000, 256)}


@pytest.fixture(scope="module")
def mnist():
    return load_dataset("mnist", return_labels=True)


@pytest.mark.parametrize("name", sorted(IMAGE_SETS))
def test_image_sets_are_listed_loaded_and_in_unit_range(name):
    info = {i.name: i for i in list_datasets()}[name]
    assert (info.n_samples, info.n_features) == IMAGE_SETS[name]
    assert info.source and info.licence and info.labels
    data, labels = load_dataset(name, return_labels=True)
    assert isinstance(data, IncompleteData) and data.shape == IMAGE_SETS[name] and data.name == name
    assert not data.missing.any() and np.array_equal(data.truth, data.values)
    assert data.values.min() >= 0.0 and data.values.max() <= 1.0
    assert data.values.max() == 1.0 and data.values.min() == 0.0  # the full grey range is used
    assert not any(data.binary)  # constant-zero border pixels are not flagged 0/1 columns
    assert labels.shape == (data.n_samples,) and labels.dtype.kind == "i"
    h, w = image_shape(name)
    assert h * w == data.n_features and data.columns[w] == "r1c0"  # row-major column names
    assert not data.values.flags.writeable


def test_mnist_matches_the_raw_idx_file(mnist):
    data, labels = mnist
    raw = gzip.decompress((ASSETS_DIR / "t10k-images-idx3-ubyte.gz").read_bytes())
    first = np.frombuffer(raw, dtype=np.uint8, offset=16, count=784).reshape(28, 28)
    np.testing.assert_array_equal(data.values[0].reshape(28, 28) * 255.0, first)  # row-major, /255
    np.testing.assert_array_equal(np.bincount(labels), [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009])
    assert labels[0] == 7  # the first MNIST test image is a 7


def test_mnist_digit_filter_counts_and_order(mnist):
    full, full_labels = mnist
    data, labels = load_dataset("mnist", digits=(7, 1), return_labels=True)
    assert data.shape == (2163, 784)
    assert (labels == 1).sum() == 1135 and (labels == 7).sum() == 1028
    keep = np.flatnonzero(np.isin(full_labels, (1, 7)))
    np.testing.assert_array_equal(data.values, full.values[keep])  # file order kept
    sevens = load_dataset("mnist", digits=7)
    assert sevens.n_samples == 1028


def test_mnist_subsample_is_deterministic_and_a_subset(mnist):
    full, _ = mnist
    a, la = load_dataset("mnist", digits=(1, 7), n_samples=100, random_state=3, return_labels=True)
    b, lb = load_dataset("mnist", digits=(1, 7), n_samples=100, random_state=3, return_labels=True)
    c = load_dataset("mnist", digits=(1, 7), n_samples=100, random_state=4)
    np.testing.assert_array_equal(a.values, b.values)
    np.testing.assert_array_equal(la, lb)
    assert not np.array_equal(a.values, c.values)
    assert set(la.tolist()) <= {1, 7} and a.shape == (100, 784)
    rows = {r.tobytes() for r in full.values}
    assert all(r.tobytes() in rows for r in a.values)
    assert len({r.tobytes() for r in a.values}) == 100  # without replacement
    g = load_dataset("mnist", n_samples=5, random_state=np.random.default_rng(0))
    assert g.shape == (5, 784)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"digits": (1, 10)}, "digits must be None or distinct integers 0-9"),
    ({"digits": (1, 1)}, "distinct"),
    ({"digits": ()}, "digits must be"),
    ({"digits": (1.5,)}, "digits must be"),
    ({"digits": (1, 7), "n_samples": 3000}, "exceeds the 2163 available"),
    ({"n_samples": 0}, "n_samples must be an integer >= 1"),
    ({"patch": 3}, "does not take"),
])
def test_mnist_bad_options(kwargs, match):
    with pytest.raises(BadInputError, match=match):
        load_dataset("mnist", **kwargs)


def test_digits_8x8_equals_scikit_learn():
    from sklearn.datasets import load_digits

    ref = load_digits()
    data, labels = load_dataset("digits_8x8", return_labels=True)
    np.testing.assert_array_equal(data.values * 16.0, ref.data)
    np.testing.assert_array_equal(labels, ref.target)
    sub = load_dataset("digits_8x8", n_samples=50, random_state=1)
    assert sub.shape == (50, 64)
    with pytest.raises(BadInputError, match="exceeds the 1797 available"):
        load_dataset("digits_8x8", n_samples=1798)


def test_photo_patches_are_windows_of_the_grey_photos():
    data, src = load_dataset("photo_patches", patch=8, n_samples=300, random_state=5, return_labels=True)
    assert data.shape == (300, 64) and set(np.unique(src)) == {0, 1}
    with np.load(ASSETS_DIR / "sample_photos_gray.npz") as z:
        photos = [z["china"], z["flower"]]
    assert photos[0].shape == (427, 640) and photos[0].dtype == np.uint8
    for i in (0, 1, 2):  # each row is some 8x8 window of its photo
        patch = np.rint(data.values[i].reshape(8, 8) * 255).astype(np.uint8)
        win = np.lib.stride_tricks.sliding_window_view(photos[src[i]], (8, 8))
        assert (win == patch).all(axis=(2, 3)).any()
    again = load_dataset("photo_patches", patch=8, n_samples=300, random_state=5)
    np.testing.assert_array_equal(again.values, data.values)
    other = load_dataset("photo_patches", patch=8, n_samples=300, random_state=6)
    assert not np.array_equal(other.values, data.values)
    assert data.values.std(axis=1).mean() > 0.01  # real texture, not a constant


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"patch": 1}, "patch must be an integer side length in \\[2, 64\\]"),
    ({"patch": 16.0}, "patch must be an integer"),
    ({"n_samples": 0}, "n_samples must be an integer >= 1"),
    ({"random_state": "x"}, "random_state must be"),
])
def test_photo_patches_bad_options(kwargs, match):
    with pytest.raises(BadInputError, match=match):
        load_dataset("photo_patches", **kwargs)


def test_image_shape_for_every_data_set():
    assert image_shape("digits_5x7") == (7, 5) and image_shape("digits") == (7, 5)  # alias
    assert image_shape("mnist") == (28, 28) and image_shape("mnist", digits=(1, 7)) == (28, 28)
    assert image_shape("digits_8x8") == (8, 8)
    assert image_shape("photo_patches") == (16, 16) and image_shape("photo_patches", patch=12) == (12, 12)
    for name in ("iris", "hepatitis", "three_blobs", "ring"):
        assert image_shape(name) is None
    for info in list_datasets():  # the shape agrees with the loaded width wherever it is given
        shape = image_shape(info.name)
        if shape is not None:
            assert shape[0] * shape[1] == info.n_features
    assert load_dataset("photo_patches", patch=12, n_samples=3).n_features == 144


@pytest.mark.parametrize(("args", "kwargs", "match"), [
    (("nope",), {}, "unknown data set 'nope'"),
    (("mnist",), {"patch": 4}, "does not take \\['patch'\\]"),
    (("photo_patches",), {"patch": 100}, "patch must be"),
])
def test_image_shape_bad_input(args, kwargs, match):
    with pytest.raises(BadInputError, match=match):
        image_shape(*args, **kwargs)


def test_image_shape_is_public():
    import explorer.datasets as ds

    assert "image_shape" in ds.__all__


def test_prepare_assets_check_passes():
    spec = importlib.util.spec_from_file_location("prepare_assets", ROOT / "scripts" / "prepare_assets.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--check"]) == 0
