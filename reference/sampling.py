"""Fast statistical sampling of verification outcomes from exact laws (vectorised inverse CDF).

``verify_batch`` is the decision-by-decision oracle; these samplers are what statistics and benchmarks
use to draw millions of outcomes: build the exact law of a request once, then map NumPy uniforms
through its cumulative table. A cell of probability 0 is never drawn.
"""

from __future__ import annotations

import numpy as np

from reference.laws import OutputLaw, conditional_law


class CategoricalSampler:
    """Inverse-CDF sampler over the flattened cells of a non-negative probability array."""

    def __init__(self, probabilities):
        probs = np.asarray(probabilities, dtype=np.float64)
        flat = probs.ravel()
        if flat.size == 0 or not np.all(np.isfinite(flat)) or np.any(flat < 0) or flat.sum() <= 0:
            raise ValueError("probabilities must be finite, non-negative and not all zero")
        self.shape = probs.shape
        self._cdf = np.cumsum(flat)
        self._last_positive = int(np.flatnonzero(flat > 0)[-1])

    def sample_flat(self, n: int, generator: np.random.Generator) -> np.ndarray:
        """``n`` flat cell indices (int64)."""
        targets = generator.random(n) * self._cdf[-1]
        idx = np.searchsorted(self._cdf, targets, side="right")  # skips empty cells
        return np.minimum(idx, self._last_positive)


class RequestSampler:
    """Draws ``(tau, Y)`` for ONE request with a fixed draft, replicated with fresh coins.

    Arguments as for :func:`reference.laws.conditional_law`.
    """

    def __init__(self, target_logits, draft_logits, draft_token_ids, temperature, method: str):
        self.law = conditional_law(target_logits, draft_logits, draft_token_ids, temperature, method)
        self._sampler = CategoricalSampler(self.law)

    def sample(self, n: int, generator: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``(tau [n], Y [n])``, both int64."""
        flat = self._sampler.sample_flat(n, generator)
        return np.divmod(flat, self.law.shape[1])


class OutputLawSampler:
    """Draws outputs ``(accepted prefix, extra token)`` from an output law (drafts sampled too)."""

    def __init__(self, law: OutputLaw):
        self.outcomes = list(law)
        self._sampler = CategoricalSampler(np.array([float(law[o]) for o in self.outcomes]))

    def sample(self, n: int, generator: np.random.Generator) -> np.ndarray:
        """Indices into ``self.outcomes`` (int64)."""
        return self._sampler.sample_flat(n, generator)

    def accepted_counts(self, indices: np.ndarray | None = None) -> np.ndarray:
        """``tau`` of each outcome (all outcomes when ``indices`` is None)."""
        taus = np.array([len(prefix) for prefix, _ in self.outcomes], dtype=np.int64)
        return taus if indices is None else taus[indices]
