"""explorer.core.gaussians.gaussian: the inverse Cholesky factors (triangular inverses)."""

import numpy as np
import pytest


@pytest.mark.parametrize("m", [1, 3, 23, 24, 40])
@pytest.mark.parametrize("batch", [(), (4,), (2, 3)])
def test_triangular_inverse_matches_a_dense_solve(m, batch):
    """Both paths of the inverse Cholesky factor (batched solve below TRTRI_MIN_SIZE, LAPACK dtrtri from it up)."""
    from explorer.core.gaussians.gaussian import TRTRI_MIN_SIZE, tril_inverse

    rng = np.random.default_rng(m)
    A = rng.standard_normal(batch + (m, m + 3))
    L = np.linalg.cholesky(A @ np.swapaxes(A, -1, -2) + 0.1 * np.eye(m))
    Linv = tril_inverse(L)
    assert Linv.shape == L.shape
    if m >= TRTRI_MIN_SIZE:  # dtrtri: exactly lower triangular
        np.testing.assert_array_equal(np.triu(Linv, 1), 0.0)
    else:  # LU solve: round-off above the diagonal
        assert np.abs(np.triu(Linv, 1)).max(initial=0.0) < 1e-12
    np.testing.assert_allclose(L @ Linv, np.broadcast_to(np.eye(m), L.shape), atol=1e-10)
    np.testing.assert_allclose(Linv, np.linalg.inv(L), rtol=1e-9, atol=1e-12)
    assert (m >= TRTRI_MIN_SIZE) == (m >= 24)  # both paths are exercised
