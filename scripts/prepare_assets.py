#!/usr/bin/env python
"""Build the data files in ``assets/`` from /work/shared/data and scikit-learn's bundled copies.

Run from the repository root (re-runnable; the output is byte-identical on every run)::

    .venv/bin/python scripts/prepare_assets.py [--source /work/shared/data] [--check]

Writes compact CSV files with a header row:

* ``iris.csv``       150 x (4 + target)   from ``sklearn.datasets.load_iris`` (Fisher's values)
* ``wine.csv``       178 x (13 + target)  from ``sklearn.datasets.load_wine``
* ``boston.csv``     506 x 14             from ``boston_housing.csv`` (header added, MEDV kept
                                           as the last column; the loader drops it)
* ``ionosphere.csv`` 351 x 35             from ``ionosphere.data`` (header V1..V34, Class)
* ``hepatitis.csv``  155 x 20             from ``hepatitis.csv``, unchanged ('?' = missing)

and binary image files:

* ``t10k-images-idx3-ubyte.gz``, ``t10k-labels-idx1-ubyte.gz``  the MNIST test set, copied byte for byte
  (IDX format; checked: 10,000 images of 28 x 28 and 10,000 labels)
* ``digits_8x8.npz``          ``images`` uint8 (1797, 64) in 0..16 and ``target`` uint8 (1797,)
                               from ``sklearn.datasets.load_digits``
* ``sample_photos_gray.npz``  ``china`` and ``flower`` uint8 (427, 640): scikit-learn's two sample
                               photographs (``load_sample_images``, decoded by pillow) converted to
                               grey with the ITU-R BT.601 luma weights 0.299 R + 0.587 G + 0.114 B,
                               rounded

The .npz files are written with fixed zip timestamps (byte-identical on one machine); ``--check``
compares their arrays, not their bytes, because zlib builds may compress differently.

``digits_5x7.txt`` is hand-made and not generated here. ``--check`` rebuilds into memory and
exits with status 1 if any file in ``assets/`` differs (useful in CI).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import io
import sys
import zipfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
ASSETS = ROOT / "assets"
DEFAULT_SOURCE = Path("/work/shared/data")

BOSTON_COLUMNS = [
    "CRIM", "ZN", "INDUS", "CHAS", "NOX", "RM", "AGE", "DIS", "RAD", "TAX", "PTRATIO", "B", "LSTAT", "MEDV",
]  # fmt: skip


def fmt(x: float) -> str:
    """Shortest decimal string that round-trips to the same float64 ('296', '0.00632')."""
    return np.format_float_positional(float(x), unique=True, trim="-")


def to_csv(header: list[str], rows) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for row in rows:
        w.writerow(row)
    return buf.getvalue()


def numeric_rows(X: np.ndarray, extra=None):
    for i, row in enumerate(X):
        cells = [fmt(v) for v in row]
        if extra is not None:
            cells.append(str(extra[i]))
        yield cells


def build_iris() -> str:
    from sklearn.datasets import load_iris

    d = load_iris()
    header = ["sepal_length", "sepal_width", "petal_length", "petal_width", "target"]
    return to_csv(header, numeric_rows(d.data, d.target))


def build_wine() -> str:
    from sklearn.datasets import load_wine

    d = load_wine()
    return to_csv(list(d.feature_names) + ["target"], numeric_rows(d.data, d.target))


def build_boston(source: Path) -> str:
    X = np.loadtxt(source / "boston_housing.csv", delimiter=",", dtype=np.float64)
    assert X.shape == (506, 14), X.shape
    return to_csv(BOSTON_COLUMNS, numeric_rows(X))


def build_ionosphere(source: Path) -> str:
    rows = list(csv.reader((source / "ionosphere.data").read_text().splitlines()))
    assert len(rows) == 351 and all(len(r) == 35 for r in rows)
    X = np.array([[float(v) for v in r[:34]] for r in rows])
    labels = [r[34] for r in rows]
    assert set(labels) == {"g", "b"}
    header = [f"V{j}" for j in range(1, 35)] + ["Class"]
    return to_csv(header, numeric_rows(X, labels))


def build_hepatitis(source: Path) -> str:
    text = (source / "hepatitis.csv").read_text().replace("\r\n", "\n")
    lines = [ln for ln in text.split("\n") if ln.strip()]
    assert len(lines) == 156 and lines[0].startswith("DIE_LIVE,"), lines[0]
    return "\n".join(lines) + "\n"


def build_all(source: Path) -> dict[str, str]:
    return {
        "iris.csv": build_iris(),
        "wine.csv": build_wine(),
        "boston.csv": build_boston(source),
        "ionosphere.csv": build_ionosphere(source),
        "hepatitis.csv": build_hepatitis(source),
    }


MNIST_FILES = {"t10k-images-idx3-ubyte.gz": (2051, (10000, 28, 28)), "t10k-labels-idx1-ubyte.gz": (2049, (10000,))}
LUMA = np.array([0.299, 0.587, 0.114])


def build_mnist(source: Path) -> dict[str, bytes]:
    """The two MNIST test-set files unchanged, after checking their IDX headers."""
    out = {}
    for name, (magic, shape) in MNIST_FILES.items():
        raw = (source / name).read_bytes()
        body = gzip.decompress(raw)
        header = np.frombuffer(body[: 4 * (1 + len(shape))], dtype=">i4")
        assert header[0] == magic and tuple(header[1:]) == shape, (name, header)
        assert len(body) == 4 * (1 + len(shape)) + int(np.prod(shape)), name
        out[name] = raw
    return out


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """A compressed .npz with fixed timestamps (``numpy.load`` reads it; same bytes on every run)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for key, arr in arrays.items():
            member = io.BytesIO()
            np.lib.format.write_array(member, np.ascontiguousarray(arr), allow_pickle=False)
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, member.getvalue())
    return buf.getvalue()


def build_digits_8x8() -> bytes:
    from sklearn.datasets import load_digits

    d = load_digits()
    images = d.data.astype(np.uint8)
    assert images.shape == (1797, 64) and np.array_equal(images, d.data) and images.max() == 16
    return npz_bytes({"images": images, "target": d.target.astype(np.uint8)})


def build_photos() -> bytes:
    from sklearn.datasets import load_sample_images  # needs pillow to decode the JPEGs

    d = load_sample_images()
    names = [Path(f).stem for f in d.filenames]
    assert names == ["china", "flower"], names
    grey = {n: np.clip(np.rint(img.astype(np.float64) @ LUMA), 0, 255).astype(np.uint8)
            for n, img in zip(names, d.images)}
    return npz_bytes(grey)


def build_binary(source: Path) -> dict[str, bytes]:
    return {**build_mnist(source), "digits_8x8.npz": build_digits_8x8(), "sample_photos_gray.npz": build_photos()}


def _same_binary(path: Path, data: bytes) -> bool:
    if not path.exists():
        return False
    if path.suffix != ".npz":
        return path.read_bytes() == data
    with np.load(path) as old, np.load(io.BytesIO(data)) as new:
        return set(old.files) == set(new.files) and all(
            old[k].dtype == new[k].dtype and np.array_equal(old[k], new[k]) for k in new.files
        )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="folder with the raw data files")
    ap.add_argument("--check", action="store_true", help="only compare with the files in assets/")
    args = ap.parse_args(argv)
    files = build_all(args.source)
    ASSETS.mkdir(exist_ok=True)
    status = 0
    for name, text in files.items():
        path = ASSETS / name
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        n_lines = text.count("\n")
        if args.check:
            same = path.exists() and path.read_text() == text
            status |= not same
            print(f"{'ok     ' if same else 'DIFFERS'} {name:16s} {n_lines:4d} lines sha256:{digest}")
        else:
            path.write_text(text)
            print(f"wrote {name:16s} {n_lines:4d} lines {len(text):7d} bytes sha256:{digest}")
    for name, data in build_binary(args.source).items():
        path = ASSETS / name
        digest = hashlib.sha256(data).hexdigest()[:16]
        if args.check:
            same = _same_binary(path, data)
            status |= not same
            print(f"{'ok     ' if same else 'DIFFERS'} {name:26s} {len(data):8d} bytes sha256:{digest}")
        else:
            path.write_bytes(data)
            print(f"wrote {name:26s} {len(data):8d} bytes sha256:{digest}")
    return status


if __name__ == "__main__":
    sys.exit(main())
