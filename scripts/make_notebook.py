"""Regenerate notebooks/tour.ipynb from this source (run: .venv/bin/python scripts/make_notebook.py)."""
import nbformat as nbf
nb = nbf.v4.new_notebook()
md = lambda s: nbf.v4.new_markdown_cell(s)
code = lambda s: nbf.v4.new_code_cell(s)
nb.cells = [
md("""# A tour of `explorer`: probabilistic imputation with Gaussian mixtures

This notebook walks through the library from the top (a scikit-learn style imputer) to the bottom (the
steppable EM of the numerical core), then embeds the live EM playground. It runs top to bottom in a few
seconds; the test suite executes it (`pytest --nbmake notebooks/`).

Convention used everywhere: a boolean array called `missing`, **True = missing**."""),
code("""import numpy as np
import explorer
from explorer import load_dataset, amputate, GaussianMixtureImputer

rng = np.random.default_rng(0)
data = load_dataset("iris")
X = data.truth
print(data)"""),
md("""## 1. Remove values with a missingness mechanism

`amputate` applies any mechanism of the registry (MCAR, MAR, NMAR, image masks) and returns the data with
NaN and the `missing` mask. Here 30 % of the entries go missing completely at random."""),
code("""X_nan, missing = amputate(X, mechanism="mcar", rate=0.3, random_state=1)
print(f"realised rate {missing.mean():.3f}; rows with every value missing: {missing.all(axis=1).sum()}")
X_nan[:5]"""),
md("""## 2. Fit a Gaussian mixture on the incomplete data and impute

`GaussianMixtureImputer` runs EM on the observed coordinates only (Ghahramani & Jordan 1994). `transform`
returns the conditional means E[x_mis | x_obs]; observed entries are returned bit for bit."""),
code("""try:  # a row with nothing observed carries no information: the default is to say so
    GaussianMixtureImputer(n_components=3, random_state=0).fit(X_nan)
except ValueError as err:
    print("ValueError:", err)

imp = GaussianMixtureImputer(n_components=3, empty_rows="marginal", random_state=0).fit(X_nan)
X_em = imp.transform(X_nan)
X_mean = np.where(missing, np.nanmean(X_nan, axis=0), X_nan)

rmse = lambda A: np.sqrt(np.mean((A - X)[missing] ** 2))
print(f"EM converged: {imp.converged_} after {imp.n_iter_} iterations ({imp.stop_reason_})")
print(f"RMSE on the missing entries: EM {rmse(X_em):.3f}  vs  column means {rmse(X_mean):.3f}")
assert np.array_equal(X_em[~missing], X[~missing])"""),
md("""The fit's history is an `xarray.Dataset`; the observed-data log-likelihood never decreases."""),
code("""h = imp.history_
print(h)
ll = h["log_likelihood"].values
assert np.all(np.diff(ll) >= -1e-8 * np.abs(ll[:-1]))"""),
md("""## 3. Density imputation: what the model believes about each missing value

`conditional(X)` returns p(x_mis | x_obs) for every row as a Gaussian mixture: its mean (single imputation),
samples (multiple imputation), intervals, and the density of any value."""),
code("""cond = imp.conditional(X_nan)
row = int(np.flatnonzero(missing.any(axis=1))[0])
feature = int(np.flatnonzero(missing[row])[0])
lo, hi = cond.interval(0.95)
print(f"row {row}, {data.columns[feature]}: true {X[row, feature]:.2f}, mean {cond.mean()[row, feature]:.2f}, "
      f"95% interval [{lo[row, feature]:.2f}, {hi[row, feature]:.2f}]")
grid = np.linspace(X[:, feature].min() - 1, X[:, feature].max() + 1, 200)
density, per_component = cond.marginal_pdf(row, feature, grid)
print("density integrates to", round(float(np.trapezoid(density, grid)), 3))
draws = imp.sample(X_nan, n_imputations=5, random_state=0)
print("multiple imputations:", draws.shape)
inside = (X >= lo) & (X <= hi)
print(f"coverage of the 95% intervals on the missing entries: {inside[missing].mean():.2f}")"""),
md("""## 4. The numerical core: `prepare` / `init` / `step` / `fit`

Every iterative algorithm has the same shape, with immutable states, so apps can step, play, pause and
rewind it. Here we reproduce the remark of Ghahramani & Jordan's Fig. 1: with `y` missing whenever `x` is
large (MAR), the maximum-likelihood mean of `y` lies above **every** observed `y`."""),
code("""from explorer.core import em_gmm
from explorer.core.mechanisms import apply_mechanism

biv = load_dataset("ghahramani_bivariate", n_samples=100, random_state=1).truth
mask = apply_mechanism(biv, "mar_threshold", 0.35, rng=np.random.default_rng(0), side="above")
print(f"y observed for {(~mask.missing[:, 1]).mean():.0%} of the rows")
prepared = em_gmm.prepare(np.where(mask.missing, np.nan, biv))
config = em_gmm.EMConfig(n_components=1, tol=1e-12, max_iter=5000)
state = em_gmm.init(prepared, config, np.random.default_rng(0))
for _ in range(3):
    state = em_gmm.step(state, prepared, config)   # one E+M step, pure
result = em_gmm.fit(prepared, config, np.random.default_rng(0))
y_obs = biv[~mask.missing[:, 1], 1]
print(f"mean of the observed y: {y_obs.mean():.2f}; largest observed y: {y_obs.max():.2f}; "
      f"ML (EM) mean of y: {result.state.means[0, 1]:.2f}  (true mean 5)")"""),
md("""## 5. The EM playground, live

The same widget that `panel serve apps/` shows. Press **Step** or **Play**: exact EM, the naive
"impute conditional means and refit" and mean imputation followed by EM run side by side on the same data."""),
code("""import panel as pn
pn.extension()
from explorer.views.em_playground import EMPlayground
playground = EMPlayground()
playground"""),
]
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
nbf.write(nb, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "notebooks" / "tour.ipynb"))
