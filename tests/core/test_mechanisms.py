"""Tests of explorer.core.missingness.mechanisms: rates, the claimed (in)dependence on values, image geometry,
determinism, the registry and bad input."""

import dataclasses
import inspect
import math

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.special import expit, logit

from explorer.core.missingness.mechanisms import (
    MECHANISMS,
    MaskResult,
    apply_mechanism,
    cpt_v,
    get_mechanism,
    image_half,
    image_quarter,
    image_square,
    linear_value_effect,
    list_mechanisms,
    logit_vd,
    mar_logistic,
    mar_rows,
    mar_threshold,
    mcar,
    mcar_rows,
    nmar_lowest,
    nmar_random,
    quantile_levels,
    self_masking,
)
from explorer.core.validation import BadInputError

N, D = 4000, 16
IMG = (8, 6)
_DATA_RNG = np.random.default_rng(20240601)
X_TAB = _DATA_RNG.normal(size=(N, D)) * np.linspace(1, 3, D) + np.arange(D)
X_IMG = _DATA_RNG.uniform(size=(N, IMG[0] * IMG[1]))
PATS = [[False] * 12 + [True] * 4, [True] + [False] * 15, [False] * 16]
PROBS = [0.5, 0.3, 0.2]

# (id, mechanism, rate, params, expected overall rate, absolute tolerance)
CASES = [
    ("mcar", "mcar", 0.3, {}, 0.3, 0.01),
    ("mcar_rows-thesis", "mcar_rows", 0.25, {"variant": "thesis"}, 0.25, 0.02),
    ("mcar_rows-code", "mcar_rows", 0.25, {"variant": "code"}, 0.25, 0.02),
    ("mar_rows-thesis", "mar_rows", 0.25, {"variant": "thesis"}, 0.25, 0.02),
    ("mar_rows-code", "mar_rows", 0.25, {"variant": "code"}, 0.25, 0.02),
    ("mar_threshold", "mar_threshold", 0.25, {"target": list(range(4, D))}, 0.25, 0.002),
    ("mar_logistic", "mar_logistic", 0.25, {"target": list(range(4, D)), "strength": 1.5}, 0.25, 0.015),
    ("nmar_lowest-thesis", "nmar_lowest", 0.25, {"variant": "thesis"}, 0.25, 1e-9),
    ("nmar_lowest-code", "nmar_lowest", 0.25, {"variant": "code"}, 0.25, 0.002),
    ("nmar_random-thesis", "nmar_random", 0.25, {"variant": "thesis"}, 0.25, 0.002),
    # the documented discrepancy of the author's code: realised rate r**1.5, not r
    ("nmar_random-code", "nmar_random", 0.25, {"variant": "code"}, 0.25**1.5, 0.01),
    ("self_masking", "self_masking", 0.25, {"strength": 2.0}, 0.25, 0.01),
    ("cpt_v", "cpt_v", None, {"mu": (0.2, 0.4, 0.6, 0.8, 0.9)}, 1 - 0.58, 0.01),
    ("logit_vd", "logit_vd", None, {"sigma": (-1.0, 0.0, 1.0), "omega": np.linspace(-1, 1, D)},
     1 - expit(np.add.outer([-1.0, 0.0, 1.0], np.linspace(-1, 1, D))).mean(), 0.01),
    ("linear_value_effect", "linear_value_effect", None, {"s": 0.25}, 0.5, 0.01),
    ("patterns", "patterns", None, {"patterns": PATS, "probs": PROBS}, 0.5 * 4 / 16 + 0.3 / 16, 0.01),
    ("random_pixels", "random_pixels", 0.4, {"image_shape": IMG}, 0.4, 0.01),
    ("quarter", "quarter", None, {"image_shape": IMG}, 0.25, 1e-12),
    ("half", "half", None, {"image_shape": IMG, "side": "left"}, 0.5, 1e-12),
    ("square", "square", None, {"image_shape": IMG, "size": 3}, 9 / 48, 1e-12),
]
IDS = [c[0] for c in CASES]
DETERMINISTIC = {"mar_threshold", "half"}


def _data(name):
    return X_IMG if get_mechanism(name).image else X_TAB


def _run(name, rate, params, seed=0, X=None):
    X = _data(name) if X is None else X
    return apply_mechanism(X, name, rate, rng=np.random.default_rng(seed), **params)


def test_every_registered_mechanism_has_a_case():
    assert {c[1] for c in CASES} == set(MECHANISMS)


@pytest.mark.parametrize(("case", "name", "rate", "params", "expected", "tol"), CASES, ids=IDS)
def test_shape_dtype_and_realised_rate(case, name, rate, params, expected, tol):
    res = _run(name, rate, params)
    X = _data(name)
    assert isinstance(res, MaskResult)
    assert res.missing.dtype == bool and res.missing.shape == X.shape
    assert res.realised_rate == pytest.approx(res.missing.mean())
    assert res.realised_rate == pytest.approx(expected, abs=tol)
    assert res.requested_rate == rate and res.mechanism == name and res.kind == MECHANISMS[name].kind
    assert set(res.params) == set(MECHANISMS[name].param_names)
    assert not res.missing.flags.writeable


@pytest.mark.parametrize(("case", "name", "rate", "params", "expected", "tol"), CASES, ids=IDS)
def test_determinism_and_seed_dependence(case, name, rate, params, expected, tol):
    a, b = _run(name, rate, params, seed=7), _run(name, rate, params, seed=7)
    np.testing.assert_array_equal(a.missing, b.missing)
    direct = MECHANISMS[name].func
    args = (rate,) if MECHANISMS[name].has_rate else ()
    by_hand = direct(_data(name), *args, rng=np.random.default_rng(7), **params)
    np.testing.assert_array_equal(by_hand, a.missing)
    c = _run(name, rate, params, seed=8)
    if name in DETERMINISTIC:
        np.testing.assert_array_equal(a.missing, c.missing)
    else:
        assert not np.array_equal(a.missing, c.missing)


def _cases_of(kind):
    return [pytest.param(*c, id=c[0]) for c in CASES if MECHANISMS[c[1]].kind == kind]


@pytest.mark.parametrize(("case", "name", "rate", "params", "expected", "tol"), _cases_of("MCAR"))
def test_mcar_masks_ignore_the_values(case, name, rate, params, expected, tol):
    X = _data(name)
    other = np.random.default_rng(99).standard_t(3, size=X.shape) ** 3
    a, b = _run(name, rate, params, X=X), _run(name, rate, params, X=other)
    np.testing.assert_array_equal(a.missing, b.missing)


@pytest.mark.parametrize(("case", "name", "rate", "params", "expected", "tol"), _cases_of("NMAR"))
def test_nmar_masks_depend_on_the_values(case, name, rate, params, expected, tol):
    a = _run(name, rate, params, X=X_TAB).missing
    b = _run(name, rate, params, X=-X_TAB).missing
    assert not np.array_equal(a, b)


def test_mcar_uncorrelated_with_values():
    m = mcar(X_TAB, 0.3, rng=np.random.default_rng(1))
    corr = [np.corrcoef(m[:, j], X_TAB[:, j])[0, 1] for j in range(D)]
    assert np.max(np.abs(corr)) < 4 / math.sqrt(N)


def test_mcar_rows_thesis_removes_a_fixed_fraction_code_a_binomial_number():
    thesis = mcar_rows(X_TAB, 0.25, rng=np.random.default_rng(1), variant="thesis")
    code = mcar_rows(X_TAB, 0.25, rng=np.random.default_rng(1), variant="code")
    per_row = thesis.sum(axis=1)
    assert set(per_row.tolist()) == {0, 8}  # sqrt(0.25) * 16 = 8 entries of each marked row
    assert (per_row > 0).mean() == pytest.approx(0.5, abs=0.03)
    counts = code.sum(axis=1)
    assert len(set(counts.tolist())) > 5  # Binomial(16, 1/2) in marked rows
    # stochastic rounding keeps the expected rate when sqrt(r) D is not an integer
    X3 = X_TAB[:, :3]
    m = mcar_rows(X3, 0.2, rng=np.random.default_rng(2))
    assert set(m[m.any(axis=1)].sum(axis=1).tolist()) == {1, 2}
    assert m.mean() == pytest.approx(0.2, abs=0.015)


# ----------------------------------------------------------------------------------------- MAR
def test_mar_rows_thesis_rate_bound_is_0_64_when_a_fifth_controls():
    X = X_TAB[:, :10]  # 2 controlling columns of 10
    assert mar_rows(X, 0.64, rng=np.random.default_rng(0)).mean() == pytest.approx(0.64, abs=0.03)
    with pytest.raises(BadInputError, match=r"feasible range \[0, 0.64\].*2 controlling"):
        mar_rows(X, 0.65, rng=np.random.default_rng(0))


def test_mar_rows_thesis_hides_only_rows_with_extreme_score_and_never_the_control():
    X = np.random.default_rng(3).normal(size=(N, 5))  # one controlling column (int(0.2 * 5) = 1)
    r = 0.2
    m = mar_rows(X, r, rng=np.random.default_rng(4), variant="thesis")
    never = np.flatnonzero(~m.any(axis=0))
    assert never.size == 1
    c = never[0]
    n_mark = round(N * math.sqrt(r) * 5 / 4)
    xc = np.sort(X[:, c])
    hit = m.any(axis=1)
    # w_c > 0 marks the lowest x_c, w_c < 0 the highest: either way a contiguous extreme block
    assert X[hit, c].max() <= xc[n_mark - 1] or X[hit, c].min() >= xc[N - n_mark]
    # in marked rows each non-controlling value is dropped w.p. sqrt(r)
    assert m[hit].sum() / (n_mark * 4) == pytest.approx(math.sqrt(r), abs=0.02)
    # the mask depends only on the controlling column: change all other columns, same seed
    Y = np.random.default_rng(5).normal(size=X.shape)
    Y[:, c] = X[:, c]
    np.testing.assert_array_equal(mar_rows(Y, r, rng=np.random.default_rng(4), variant="thesis"), m)


def test_mar_rows_code_can_hide_every_column_and_allows_high_rates():
    m = mar_rows(X_TAB, 0.7, rng=np.random.default_rng(0), variant="code")
    assert m.any(axis=0).all()
    assert m.mean() == pytest.approx(0.7, abs=0.02)
    with pytest.raises(BadInputError, match=r"feasible range \[0, 0.66.*variant='code'"):
        mar_rows(X_TAB, 0.7, rng=np.random.default_rng(0), variant="thesis")


def test_mar_rows_binary_columns_never_control():
    binary = np.zeros(D, dtype=bool)
    binary[1:] = True  # only column 0 may control
    X = X_TAB.copy()
    m = mar_rows(X, 0.2, rng=np.random.default_rng(0), binary=binary, n_controlling=1)
    assert np.flatnonzero(~m.any(axis=0)).tolist() == [0]


@pytest.mark.parametrize("side", ["above", "below"])
def test_mar_threshold_is_a_deterministic_function_of_the_control(side):
    m = mar_threshold(X_TAB, 0.05, rng=np.random.default_rng(0), target=[3, 5], control=2, side=side)
    assert not m[:, [j for j in range(D) if j not in (3, 5)]].any()
    np.testing.assert_array_equal(m[:, 3], m[:, 5])
    x, hit = X_TAB[:, 2], m[:, 3]
    assert hit.sum() == round(0.05 * D / 2 * N)
    if side == "above":
        assert x[hit].min() > x[~hit].max()
    else:
        assert x[hit].max() < x[~hit].min()
    Y = np.random.default_rng(1).normal(size=X_TAB.shape)
    Y[:, 2] = x
    again = mar_threshold(Y, 0.05, rng=np.random.default_rng(5), target=[3, 5], control=2, side=side)
    np.testing.assert_array_equal(again, m)


def test_mar_threshold_ties_share_their_fate():
    X = np.column_stack([np.repeat([0.0, 1.0, 2.0, 3.0], 25), np.arange(100.0)])
    m = mar_threshold(X, 0.15, rng=np.random.default_rng(0))  # 30 % of the target: ties widen to 50
    assert m[:, 1].sum() == 50 and not m[:, 0].any()
    for v in range(4):
        assert len(set(m[X[:, 0] == v, 1])) == 1


def test_mar_logistic_probability_depends_only_on_the_control():
    rng = np.random.default_rng(11)
    n = 20000
    X = np.column_stack([np.repeat([0.0, 1.0], n // 2), rng.normal(size=n)])
    b, rate = 1.0, 0.2  # q = 0.4 of the single target; z = -1 / +1 in the two groups
    m = mar_logistic(X, rate, rng=np.random.default_rng(12), target=1, control=0, strength=b)
    assert not m[:, 0].any()
    p_lo, p_hi = m[X[:, 0] == 0, 1].mean(), m[X[:, 0] == 1, 1].mean()
    assert (p_lo + p_hi) / 2 == pytest.approx(0.4, abs=0.01)
    assert logit(p_hi) - logit(p_lo) == pytest.approx(2 * b, abs=0.12)
    a = brentq(lambda a: (expit(a - b) + expit(a + b)) / 2 - 0.4, -10, 10)  # z = -1 / +1 oracle
    assert p_hi == pytest.approx(expit(a + b), abs=0.015)
    Y = X.copy()
    Y[:, 1] = rng.normal(size=n) * 100  # the target's own values play no role
    np.testing.assert_array_equal(mar_logistic(Y, rate, rng=np.random.default_rng(12), strength=b), m)


# ---------------------------------------------------------------------------------------- NMAR
@pytest.mark.parametrize("variant", ["thesis", "code"])
@pytest.mark.parametrize("rate", [0.1, 0.3, 0.5])
def test_nmar_lowest_removes_only_the_lowest_values(variant, rate):
    m = nmar_lowest(X_TAB, rate, rng=np.random.default_rng(2), variant=variant)
    cols = np.flatnonzero(m.any(axis=0))
    s = math.sqrt(rate)
    assert cols.size == (math.floor(D * s) if variant == "thesis" else int(s * D))
    for j in cols:
        assert X_TAB[m[:, j], j].max() <= X_TAB[~m[:, j], j].min()
        if variant == "thesis":
            assert m[:, j].sum() == round(N * s)
        else:
            assert m[:, j].mean() == pytest.approx(s, abs=1 / N)


def test_nmar_code_variants_never_touch_binary_columns():
    X = X_TAB.copy()
    binary = np.zeros(D, dtype=bool)
    binary[::2] = True
    X[:, binary] = (X[:, binary] > X[:, binary].mean(axis=0)).astype(float)
    for fn, rate in ((nmar_lowest, 0.5), (nmar_random, 0.5)):
        m = fn(X, rate, rng=np.random.default_rng(0), variant="code", binary=binary)
        assert not m[:, binary].any()
        assert m.any(axis=0).sum() == min(int(math.sqrt(rate) * D), (~binary).sum())
    # the thesis variant amputates every column, binary ones included ("all the zeroes disappeared")
    hit = np.zeros(D, dtype=bool)
    for seed in range(10):
        hit |= nmar_lowest(X, 0.5, rng=np.random.default_rng(seed), binary=binary).any(axis=0)
    assert hit[binary].any()


def test_nmar_random_thesis_drops_five_sevenths_of_the_lowest():
    r = 0.3
    s = math.sqrt(r)
    m = nmar_random(X_TAB, r, rng=np.random.default_rng(3), variant="thesis")
    cols = np.flatnonzero(m.any(axis=0))
    n_marked = round(1.4 * N * s)
    assert cols.size == math.floor(D * s)
    for j in cols:
        x = np.sort(X_TAB[:, j])
        assert m[:, j].sum() == round(n_marked * 5 / 7)
        assert X_TAB[m[:, j], j].max() <= x[n_marked - 1]
        assert (~m[:, j] & (X_TAB[:, j] <= x[n_marked - 1])).sum() == n_marked - round(n_marked * 5 / 7)
    # floor(D sqrt r) columns: 8 of 16 here, so the realised rate is below r for this D
    assert m.mean() == pytest.approx(cols.size / D * round(n_marked * 5 / 7) / N)


@pytest.mark.parametrize("rate", [0.1, 0.3, 0.5])
def test_nmar_random_code_realises_rate_to_the_power_1_5(rate):
    X = np.random.default_rng(4).normal(size=(2000, 100))
    m = nmar_random(X, rate, rng=np.random.default_rng(5), variant="code")
    s = math.sqrt(rate)
    assert m.mean() == pytest.approx(int(s * 100) / 100 * s * s, abs=0.01)
    assert m.mean() == pytest.approx(rate**1.5, abs=0.015)  # 0.032 / 0.164 / 0.354 in the digest
    assert m.mean() < 0.75 * rate  # i.e. NOT the requested rate
    for j in np.flatnonzero(m.any(axis=0)):
        assert X[m[:, j], j].max() < np.quantile(X[:, j], 1.4 * s)


@pytest.mark.parametrize("strength", [2.0, -2.0])
def test_self_masking_hides_large_values_for_positive_strength(strength):
    m = self_masking(X_TAB, 0.3, rng=np.random.default_rng(6), strength=strength)
    for j in range(D):
        diff = X_TAB[m[:, j], j].mean() - X_TAB[~m[:, j], j].mean()
        assert np.sign(diff) == np.sign(strength) and abs(diff) > 0.5 * X_TAB[:, j].std()
    np.testing.assert_allclose(m.mean(axis=0), 0.3, atol=0.03)


def test_cpt_v_matches_mu_on_given_levels_and_quantile_levels():
    mu = np.array([0.1, 0.3, 0.5, 0.7, 0.95])
    V = np.random.default_rng(7).integers(1, 6, size=(N, 10)).astype(float)
    m = cpt_v(V, rng=np.random.default_rng(8), mu=mu, levels="given")
    for v in range(1, 6):
        assert (~m[V == v]).mean() == pytest.approx(mu[v - 1], abs=0.02)
    lev = quantile_levels(X_TAB, 5)
    np.testing.assert_array_equal(np.sort(np.bincount(lev[:, 0])[1:]), [N // 5] * 5)
    assert all(np.all(np.diff(X_TAB[np.argsort(lev[:, j]), j][:: N // 5]) > 0) for j in range(D))
    m = cpt_v(X_TAB, rng=np.random.default_rng(9), mu=mu)  # 'auto' bins non-integer data
    for v in range(1, 6):
        assert (~m[lev == v]).mean() == pytest.approx(mu[v - 1], abs=0.02)


def test_logit_vd_matches_sigmoid_sigma_plus_omega_and_is_cpt_v_with_equal_omega():
    sigma, omega = np.array([-2.0, -0.5, 0.5, 2.0]), np.linspace(-1.5, 1.5, 10)
    V = np.random.default_rng(7).integers(1, 5, size=(N, 10)).astype(float)
    m = logit_vd(V, rng=np.random.default_rng(8), sigma=sigma, omega=omega, levels="given")
    for v in range(1, 5):
        for d in (0, 9):
            col = V[:, d] == v
            assert (~m[col, d]).mean() == pytest.approx(expit(sigma[v - 1] + omega[d]), abs=0.05)
    # equal omega: exactly cpt_v's mask with mu = sigmoid(sigma + omega) from the same generator
    same = logit_vd(V, rng=np.random.default_rng(3), sigma=sigma, omega=np.full(10, 0.3), levels="given")
    ref = cpt_v(V, rng=np.random.default_rng(3), mu=expit(sigma + 0.3), levels="given")
    np.testing.assert_array_equal(same, ref)
    lev = quantile_levels(X_TAB, 4)   # 'auto' bins non-integer data, omega defaults to 0
    m = logit_vd(X_TAB, rng=np.random.default_rng(9), sigma=sigma)
    for v in range(1, 5):
        assert (~m[lev == v]).mean() == pytest.approx(expit(sigma[v - 1]), abs=0.02)


def test_linear_value_effect():
    V = np.random.default_rng(7).integers(1, 6, size=(N, 10)).astype(float)
    m = linear_value_effect(V, rng=np.random.default_rng(1), s=0.25)  # mu = 0, .25, .5, .75, 1
    for v, mu in zip(range(1, 6), (0.0, 0.25, 0.5, 0.75, 1.0)):
        assert (~m[V == v]).mean() == pytest.approx(mu, abs=0.02)
    m0 = linear_value_effect(V, rng=np.random.default_rng(1), s=0.0)
    assert m0.mean() == pytest.approx(0.5, abs=0.01)
    for v in range(1, 6):
        assert m0[V == v].mean() == pytest.approx(0.5, abs=0.03)
    with pytest.raises(BadInputError, match=r"outside \[0, 1/\(V-1\)\] = \[0, 0.25\]"):
        linear_value_effect(V, rng=np.random.default_rng(1), s=0.3)


def test_patterns_only_given_patterns_with_given_frequencies():
    res = _run("patterns", None, {"patterns": PATS, "probs": PROBS})
    rows, counts = np.unique(res.missing, axis=0, return_counts=True)
    freq = {tuple(r): c / N for r, c in zip(rows.tolist(), counts)}
    assert set(freq) == {tuple(p) for p in PATS}
    for p, q in zip(PATS, PROBS):
        assert freq[tuple(p)] == pytest.approx(q, abs=0.03)


def test_patterns_default_is_marlins_list_converted_to_true_missing():
    marlin_r = np.array([[1, 1], [0, 1], [1, 0]])  # marlin2008 Ch. 6, 1 = observed
    X2 = np.random.default_rng(0).normal(size=(3000, 2))
    m = apply_mechanism(X2, "patterns", rng=np.random.default_rng(1)).missing
    rows, counts = np.unique(m, axis=0, return_counts=True)
    assert {tuple(r) for r in rows.tolist()} == {tuple(r) for r in (~marlin_r.astype(bool)).tolist()}
    np.testing.assert_allclose(counts / 3000, 1 / 3, atol=0.03)


# ----------------------------------------------------------------------------------------- images
def _bbox_area(img):
    r, c = np.nonzero(img)
    return (r.max() - r.min() + 1) * (c.max() - c.min() + 1)


@pytest.mark.parametrize("shape", [(8, 6), (5, 7)])
def test_quarter_fixed_and_random(shape):
    h, w = shape
    X = np.zeros((400, h * w))
    corners = {0: (0, 0), 1: (0, w - 1), 2: (h - 1, 0), 3: (h - 1, w - 1)}
    for q, (r, c) in corners.items():
        m = image_quarter(X, rng=np.random.default_rng(0), image_shape=shape, quarter=q)
        img = m[0].reshape(h, w)
        assert (m == m[0]).all() and img.sum() == (h // 2) * (w // 2) == _bbox_area(img)
        assert img[r, c]
    m = image_quarter(X, rng=np.random.default_rng(1), image_shape=shape)
    blocks = np.stack([image_quarter(X[:1], rng=np.random.default_rng(0), image_shape=shape, quarter=q)[0]
                       for q in range(4)])
    which = [np.flatnonzero((blocks == row).all(axis=1)) for row in m]
    assert all(k.size == 1 for k in which)
    np.testing.assert_allclose(np.bincount(np.concatenate(which), minlength=4) / 400, 0.25, atol=0.07)


@pytest.mark.parametrize("side", ["top", "bottom", "left", "right"])
def test_half(side):
    h, w = 7, 6
    m = image_half(np.zeros((3, h * w)), rng=np.random.default_rng(0), image_shape=(h, w), side=side)
    img = m[0].reshape(h, w)
    n_pix = (h // 2) * w if side in ("top", "bottom") else h * (w // 2)
    assert (m == m[0]).all() and img.sum() == n_pix == _bbox_area(img)
    corner = {"top": img[0, 0], "bottom": img[-1, 0], "left": img[0, 0], "right": img[0, -1]}[side]
    assert corner


def test_square_positions_inside_and_uniform():
    h, w, k = 8, 6, 3
    m = image_square(X_IMG, rng=np.random.default_rng(2), image_shape=(h, w), size=k).reshape(-1, h, w)
    assert (m.sum(axis=(1, 2)) == k * k).all()
    assert all(_bbox_area(img) == k * k for img in m[:200])
    top = m.any(axis=2).argmax(axis=1)
    left = m.any(axis=1).argmax(axis=1)
    np.testing.assert_array_equal(np.unique(top), np.arange(h - k + 1))
    np.testing.assert_array_equal(np.unique(left), np.arange(w - k + 1))
    np.testing.assert_allclose(np.bincount(top) / N, 1 / (h - k + 1), atol=0.03)


def test_random_pixels_is_mcar_per_pixel():
    m = apply_mechanism(X_IMG, "random_pixels", 0.5, rng=np.random.default_rng(0), image_shape=IMG).missing
    np.testing.assert_allclose(m.mean(axis=0), 0.5, atol=0.04)


# --------------------------------------------------------------------------------------- registry
def test_registry_params_match_function_signatures():
    for name, mech in MECHANISMS.items():
        sig = inspect.signature(mech.func).parameters
        assert list(sig)[0] == "X" and sig["rng"].kind is inspect.Parameter.KEYWORD_ONLY
        assert set(mech.param_names) == set(sig) - {"X", "rate", "rng"}, name
        for p in mech.params:
            assert sig[p.name].default == p.default, (name, p.name)
            if p.kind == "choice":
                assert p.default in p.choices
        assert mech.kind in ("MCAR", "MAR", "NMAR") and "\n" not in mech.summary
        assert mech.has_rate == ("rate" in sig)


def test_list_mechanisms_filters():
    assert {m.name for m in list_mechanisms(kind="MAR")} == {"mar_rows", "mar_threshold", "mar_logistic"}
    assert {m.name for m in list_mechanisms(image=True)} == {"random_pixels", "quarter", "half", "square"}
    assert len(list_mechanisms()) == len(MECHANISMS)
    assert all(m.kind == "MCAR" and not m.image for m in list_mechanisms(kind="MCAR", image=False))
    with pytest.raises(BadInputError, match="kind must be one of"):
        list_mechanisms(kind="MNAR")


def test_mask_result_is_frozen_and_records_defaults():
    res = apply_mechanism(X_TAB, "nmar_random", rng=np.random.default_rng(0))
    assert res.requested_rate == 0.2 and res.params == {"variant": "thesis", "binary": None}
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.realised_rate = 0.0
    with pytest.raises(ValueError):
        res.missing[0, 0] = True


# -------------------------------------------------------------------------------------- bad input
BAD = [  # (data, mechanism, rate, params, message regex)
    (X_TAB, "mcar", 1.2, {}, r"outside the feasible range \[0, 1\]"),
    (X_TAB, "mcar", float("nan"), {}, "feasible range"),
    (X_TAB, "nmar_random", 0.6, {}, r"feasible range \[0, 0.5102\]"),
    (X_TAB, "nmar_random", 0.6, {"variant": "code"}, "7/5 sqrt"),
    (X_TAB, "mar_threshold", 0.2, {}, r"feasible range \[0, 0.0625\].*target"),
    (X_TAB, "mcar", 0.2, {"variant": "code"}, "Unknown parameter.*variant"),
    (X_TAB, "mcar_rows", 0.2, {"varient": "code"}, "accepted parameters: variant"),
    (X_TAB, "nope", None, {}, "Unknown missingness mechanism 'nope'. Available: .*mcar"),
    (X_TAB, "cpt_v", 0.3, {}, "has no rate"),
    (X_IMG, "quarter", None, {"image_shape": (6, 6)}, "image_shape=.*36 pixels.*48"),
    (X_IMG, "half", None, {}, "needs image_shape"),
    (X_IMG, "square", None, {"image_shape": IMG, "size": 7}, r"size=7.*\[1, 6\]"),
    (X_IMG, "quarter", None, {"image_shape": IMG, "quarter": 4}, "quarter must be one of"),
    (X_IMG, "half", None, {"image_shape": IMG, "side": "up"}, "side must be one of"),
    (X_TAB, "mar_logistic", 0.05, {"control": -1}, "control column 15"),
    (X_TAB, "mar_logistic", 0.05, {"target": 16}, "target=16 is not a column"),
    (X_TAB, "mar_logistic", 0.05, {"strength": np.inf}, "strength must be a finite number"),
    (X_TAB, "nmar_lowest", 0.2, {"binary": [True]}, "16 booleans"),
    (X_TAB, "mar_rows", 0.2, {"n_controlling": 16}, r"n_controlling=16.*\[1, 15\]"),
    (X_TAB, "cpt_v", None, {"levels": "given"}, "levels='quantile'"),
    (X_TAB, "cpt_v", None, {"mu": (0.5, 1.5)}, "mu must be"),
    (X_TAB, "logit_vd", None, {"sigma": (0.0, np.inf)}, "sigma must be"),
    (X_TAB, "logit_vd", None, {"omega": (0.0, 1.0)}, "one finite number per column"),
    (X_TAB, "linear_value_effect", None, {"s": "steep"}, "s='steep' is outside"),
    (X_TAB, "patterns", None, {"patterns": [[True] * 3]}, r"shape \(n_patterns, 16\)"),
    (X_TAB[:, :2], "patterns", None, {"probs": [0.5, 0.6, 0.1]}, "summing to 1"),
]


@pytest.mark.parametrize(("X", "name", "rate", "params", "match"), BAD, ids=[b[-1][:30] for b in BAD])
def test_bad_input(X, name, rate, params, match):
    with pytest.raises(BadInputError, match=match):
        apply_mechanism(X, name, rate, rng=np.random.default_rng(0), **params)


def test_rng_must_be_a_generator():
    with pytest.raises(BadInputError, match="numpy.random.Generator"):
        mcar(X_TAB, 0.1, rng=np.random.RandomState(0))


@pytest.mark.parametrize("rate", [5e-324, 1e-300, 1e-12, 0.2, 0.5, 0.8, 1 - 1e-12])
def test_self_masking_solves_its_intercept_at_any_rate(rate):
    """The expected hidden fraction is the rate, also for rates whose probabilities underflow (a subnormal rate
    once made brentq see the same sign at both ends of its bracket)."""
    from explorer.core.missingness.mask_helpers import _logistic_probs

    z = np.random.default_rng(0).standard_normal(200)
    p = _logistic_probs(z, 2.0, rate)
    assert np.all((p >= 0) & (p <= 1))
    if rate >= 1e-300:
        assert p.mean() == pytest.approx(rate, rel=1e-9)
    else:  # below the smallest normal double: the probabilities are (sub)normal or 0, and no entry is hidden
        assert p.mean() <= 1e-300
    assert np.all(np.diff(p[np.argsort(z)]) >= 0)  # larger values more likely hidden (strength > 0)
    X = np.column_stack([z, -z])
    hidden = self_masking(X, rate, rng=np.random.default_rng(1))
    assert hidden.shape == X.shape
    if rate < 1e-300:
        assert not hidden.any()
    else:  # binomial, 400 entries
        assert abs(hidden.mean() - rate) <= 5 * math.sqrt(rate * (1 - rate) / X.size)
