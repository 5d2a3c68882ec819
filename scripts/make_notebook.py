"""Regenerate the notebooks from this source (run: .venv/bin/python scripts/make_notebook.py).

* notebooks/tour.ipynb: the EM mixture, density imputation, the steppable core, the EM playground;
* notebooks/variational_and_benchmark.ipynb: the variational DP mixture (POIGMM), its Student-t
  predictive, the imputation benchmark and its reproduction of seed000, the two pages.
"""
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
KERNEL = {"name": "python3", "display_name": "Python 3", "language": "python"}
NOTEBOOKS = __import__("pathlib").Path(__file__).resolve().parents[1] / "notebooks"
nb.metadata["kernelspec"] = KERNEL
nbf.write(nb, str(NOTEBOOKS / "tour.ipynb"))

vb = nbf.v4.new_notebook()
vb.cells = [
md("""# The variational Dirichlet-process mixture (POIGMM) and the imputation benchmark

The model of Garriga Alonso's thesis (seed 000): a truncated stick-breaking variational Gaussian mixture fitted
on the observed coordinates of every row, with the errata of the reference digest applied. Then the thesis's
imputation benchmark, from Python, and the reproduction of its figures A.1-A.5 from the committed full run.
Runs in about a minute; the test suite executes it."""),
code("""import numpy as np
import pandas as pd
from explorer import DPGMMImputer, amputate, load_dataset

boston = load_dataset("boston")
X = boston.truth
X_nan, missing = amputate(X, mechanism="mcar", rate=0.3, random_state=0)
print(boston.name, X.shape, f"missing {missing.mean():.2f}")"""),
md("""## 1. Fit: the truncation is an upper bound

`n_components` is the truncation K. The stick-breaking prior switches off what the data do not need:
`weights_` are E[pi_k], `n_effective_` counts the components above 1 %. The fit works in standardised units
(observed means and standard deviations), as the thesis does."""),
code("""imp = DPGMMImputer(n_components=15, update="principled", n_init=2, random_state=0).fit(X_nan)
print(f"effective components: {imp.n_effective_} of 15; stop: {imp.stop_reason_} after {imp.n_iter_} iterations")
print("E[pi_k]:", np.round(np.sort(imp.weights_)[::-1], 3))
h = imp.history_
elbo = h["elbo"].values[1:]  # iteration 0 (the initialisation) has no ELBO: its completions are point masses
print(f"ELBO {elbo[0]:.1f} -> {elbo[-1]:.1f}; largest decrease between iterations: "
      f"{max(0.0, float(-np.diff(elbo).min())):.2e}")"""),
md("""The principled update (expected sufficient statistics) with the corrected responsibilities is what the issue
asks for; its ELBO is not *guaranteed* to increase (the corrected responsibilities maximise a collapsed bound, the
principled component update the augmented one), so the cell above prints the largest decrease instead of asserting
none. `responsibilities="augmented"` is the exact coordinate-ascent pair, and never decreases (tested).
The thesis's component update ("fill with the previous means") has no defined ELBO with missing data
(point-mass completions); its history traces the plug-in log-likelihood instead."""),
code("""exact = DPGMMImputer(n_components=15, responsibilities="augmented", random_state=0).fit(X_nan)
e = exact.history_["elbo"].values[1:]
d = np.diff(e)
assert np.all(np.isfinite(e)) and np.all(d >= -1e-9 * np.abs(e[1:])), d.min()
print(f"augmented: {e.size} iterations, smallest ELBO change {d.min():.2e}")
thesis = DPGMMImputer(n_components=15, update="thesis", random_state=0).fit(X_nan)
print("thesis update: ELBO", thesis.elbo_, "| plug-in log-likelihood",
      round(float(thesis.history_["log_likelihood"].values[-1]), 1))"""),
md("""## 2. Density imputation: plug-in Gaussian mixture or Student-t posterior predictive

`transform` gives the conditional means (observed entries untouched). `conditional(X)` is the plug-in mixture of
the author's code; `predictive(X)` integrates the Normal-Wishart posterior out, a Student-t mixture per row: the
thesis's proposed fix for its log-likelihood overflow. Scored on the true hidden values (joint density per row):"""),
code("""X_imp = imp.transform(X_nan)
assert np.array_equal(X_imp[~missing], X[~missing]) and not np.isnan(X_imp).any()
plug = -imp.conditional(X_nan).logpdf(X)
student = -imp.predictive(X_nan).logpdf(X)
rows = missing.any(axis=1)
print(f"NLL of the hidden values, original units: plug-in {plug[rows].sum():.1f}, Student-t {student[rows].sum():.1f}")
lo, hi = imp.predictive(X_nan).interval(0.95)
print(f"95 % Student-t interval coverage: {((X >= lo) & (X <= hi))[missing].mean():.3f}")"""),
md("""## 3. The benchmark from Python

`explorer.benchmark.run_benchmark` takes data sets x mechanisms x rates x methods x repetitions and returns a tidy
table; every method of a repetition sees the same mask. `quick=True` uses cheap settings (a smoke test, not a
benchmark). `benchmarks/run_imputation.py` is the command-line front end with a progress line per job."""),
code("""from explorer.benchmark import METHODS, run_benchmark, summarise

for m in ("poigmm", "missforest", "mice"):
    print(f"{m}: {METHODS[m].differs[:150]}...")
df = run_benchmark("boston", ["mcar"], [0.1, 0.3], ["mean", "poigmm", "knn"], 1, seed=0, quick=True,
                   progress=lambda d: print(f"\\r{d['done']}/{d['total']} {d['method']}", end=""))
summarise(df).query("metric in ['nrmse', 'nll', 'nll_t']")[["rate", "method", "metric", "mean"]]"""),
md("""## 4. The committed full run next to the thesis

`results/seed000_benchmark/` holds the full run (both data sets, the five mechanisms at the thesis's rates, all
methods, repetitions) with the command that made it (`COMMAND.txt`), and `REPORT.md`, generated by
`benchmarks/report_seed000.py`, checks the thesis's claims one by one. Boston, MCAR_total, NRMSE:"""),
code("""from pathlib import Path
from explorer.reference import seed000_reference

root = Path("..") if Path("../results").exists() else Path(".")
summary = pd.read_csv(root / "results" / "seed000_benchmark" / "summary.csv")
ours = summary.query("dataset == 'boston' and mechanism == 'mcar' and metric == 'nrmse'")
ref = seed000_reference().query("dataset == 'boston' and mechanism == 'mcar' and metric == 'nrmse'")
table = ours.pivot(index="rate", columns="method", values="mean")[["missforest", "poigmm", "mice", "mean"]]
table.join(ref.pivot(index="rate", columns="method", values="mean")[["missforest", "poigmm", "mice", "mean"]],
           rsuffix=" (thesis)").round(3)"""),
md("""## 5. The pages, live

The variational mixture page: step or play the updates, both component updates side by side, stick weights as
bars, the effective number of components and the ELBO over iterations."""),
code("""import panel as pn
pn.extension()
from explorer.views.vb_playground import VariationalPlayground
VariationalPlayground()"""),
md("""The benchmark page, here showing the committed full run (press **Run** for a new one; it runs in the
background with a progress bar)."""),
code("""from explorer.views.benchmark_view import BenchmarkPage
page = BenchmarkPage()
page.model.load_results(root / "results" / "seed000_benchmark" / "summary.csv")
page"""),
]
vb.metadata["kernelspec"] = KERNEL
nbf.write(vb, str(NOTEBOOKS / "variational_and_benchmark.ipynb"))
