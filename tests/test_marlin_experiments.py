"""Smoke tests of the Marlin chapter-6 real-data reproductions (Table 6.5 Hepatitis, Table 6.8 MNIST), and one
real check of the MNIST quadrant data."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "experiments" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _table_rows(text: str) -> dict[str, list[str]]:
    rows = {}
    for line in text.splitlines():
        if line.startswith("| ") and not line.startswith("| method") and not line.startswith("|---"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[cells[0]] = cells[1:]
    return rows


def _finite_numbers(cell: str) -> list[float]:
    values = [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?(?:e-?\d+)?|nan|inf", cell)]
    assert values, f"no number in {cell!r}"
    return values


def test_hepatitis_quick_writes_every_row(tmp_path):
    hep = _load("marlin_table65_hepatitis")
    summary = hep.main(["--quick", "--out", str(tmp_path)])
    text = (tmp_path / "marlin_table65_hepatitis_quick.md").read_text()
    rows = _table_rows(text)
    assert set(rows) == set(hep.PAPER)  # every method of Table 6.5, nothing else
    for row, cells in rows.items():
        ours_loss, ours_err = _finite_numbers(cells[0]), _finite_numbers(cells[2])
        assert all(np.isfinite(ours_loss)) and all(np.isfinite(ours_err)), row
        assert 0 < ours_loss[0] < 5 and 0 <= ours_err[0] <= 100, row
        assert cells[1].startswith(f"{hep.PAPER[row][0]:.4f}"), row  # the published number sits next to ours
    payload = json.loads((tmp_path / "marlin_table65_hepatitis_quick.json").read_text())
    assert len(payload["summary"]["LR Zero"]["loss"]) == 3  # one loss per outer fold
    # the per-fold losses are the table's mean
    assert np.isclose(np.mean(summary["LR Mean"]["loss"]), summary["LR Mean"]["loss_mean"])


def test_hepatitis_data_is_the_uci_table():
    hep = _load("marlin_table65_hepatitis")
    X, y, columns = hep.load()
    assert X.shape == (155, 19) and len(columns) == 19
    assert np.bincount(y).tolist() == [123, 32]  # 123 lived, 32 died (die = 1)
    assert np.unique(~np.isnan(X), axis=0).shape[0] == 21  # the thesis's 21 missingness patterns
    assert 0.05 < np.isnan(X).mean() < 0.07  # about 6 % missing


def test_mnist_quick_writes_every_row(tmp_path):
    mn = _load("marlin_table68_mnist")
    mn.main(["--quick", "--out", str(tmp_path)])
    text = (tmp_path / "marlin_table68_mnist_quick.md").read_text()
    rows = _table_rows(text)
    assert set(mn.PAPER) <= set(rows) and set(rows) == set(mn.METHODS)
    for row, cells in rows.items():
        loss, err = _finite_numbers(cells[0])[0], _finite_numbers(cells[2])[0]
        assert np.isfinite(loss) and loss > 0 and 0 <= err <= 100, row
    assert "MNIST **test** set" in text and "disjoint" in text  # the split is stated
    payload = json.loads((tmp_path / "marlin_table68_mnist_quick.json").read_text())
    assert {v["verdict"] for v in payload["verdicts"]} <= {"holds", "partly", "does not hold"}
    assert len(payload["verdicts"]) == 3


def test_mnist_quadrants_and_augmented_shape():
    """Real check: one whole quadrant missing per image, the 4 patterns all present, disjoint draws, and the
    augmented representation [x * r, r] has 2 x 784 columns with the indicator equal to the pattern."""
    from sklearn.dummy import DummyClassifier

    from explorer.learn.treatments import MissingInputClassifier

    mn = _load("marlin_table68_mnist")
    d = mn.make_split(3, n_train=10, n_test=12)
    X, q = d["X_train"], d["quadrant_train"]
    assert X.shape == (100, 784) and d["X_test"].shape == (120, 784)
    assert np.bincount(d["y_train"]).tolist() == [10] * 10 and np.bincount(d["y_test"]).tolist() == [12] * 10
    assert not set(d["train_index"]) & set(d["test_index"])  # disjoint images
    observed = ~np.isnan(X)
    patterns = np.unique(observed, axis=0)
    assert patterns.shape[0] == 4 and (patterns.sum(axis=1) == 588).all()
    assert set(np.unique(q)) == {0, 1, 2, 3} and set(np.unique(d["quadrant_test"])) == {0, 1, 2, 3}
    for i in range(X.shape[0]):
        img = observed[i].reshape(28, 28)
        r0, c0 = 14 * (q[i] // 2), 14 * (q[i] % 2)
        assert not img[r0:r0 + 14, c0:c0 + 14].any() and img.sum() == 588
    # observed pixels equal the complete image, in [0, 1]
    assert np.array_equal(X[observed], d["complete_train"][observed])
    assert d["complete_train"].min() >= 0 and d["complete_train"].max() <= 1
    clf = MissingInputClassifier(DummyClassifier(strategy="prior"), "augmented")  # records n_features_in_
    Z = clf.fit(X, d["y_train"])._treat(np.nan_to_num(X), ~observed)
    assert Z.shape == (100, 2 * 784) and clf.estimator_.n_features_in_ == 2 * 784
    assert np.array_equal(Z[:, 784:], observed.astype(float))
    assert np.array_equal(Z[:, :784], np.where(observed, X, 0.0))
    # each of the 4 indicator patterns appears among the augmented rows
    assert np.unique(Z[:, 784:], axis=0).shape[0] == 4


def test_mnist_split_is_reproducible_and_seed_dependent():
    mn = _load("marlin_table68_mnist")
    a, b, c = mn.make_split(0, 5, 5), mn.make_split(0, 5, 5), mn.make_split(1, 5, 5)
    assert np.array_equal(a["train_index"], b["train_index"]) and np.array_equal(a["quadrant_test"],
                                                                                 b["quadrant_test"])
    assert not np.array_equal(np.sort(a["train_index"]), np.sort(c["train_index"]))
    with pytest.raises(ValueError, match="fewer than"):
        mn.make_split(0, 500, 500)  # digit 5 has 892 test images
