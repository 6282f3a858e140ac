"""``python -m reference``: the golden toy example of SPEC.md section 5, computed by the oracle, exactly."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from reference import laws


def _constant(row):
    row = np.array(row, dtype=object)
    return lambda prefix: row


def main() -> None:
    target = _constant([Fraction(1, 3), Fraction(2, 3)])
    draft = _constant([Fraction(2, 3), Fraction(1, 3)])
    gamma = 2
    print("V = 2 {a, b}, M_b = (1/3, 2/3), M_s = (2/3, 1/3) at every position, g = 2")
    for method in ("token", "block"):
        law = laws.output_law(target, draft, gamma, method)
        tau = [sum((p for (prefix, _), p in law.items() if len(prefix) == i), Fraction(0)) for i in range(3)]
        mean = sum(i * p for i, p in enumerate(tau))
        print(f"\n{method}: P(tau = 0, 1, 2) = {', '.join(map(str, tau))};  E[tau] = {mean}")
        for (prefix, y), p in sorted(law.items(), key=lambda kv: (len(kv[0][0]), kv[0])):
            print(f"  {''.join('ab'[x] for x in prefix):>2}|{'ab'[y]}  {p}")
    print(f"\nceiling sum_i sum_x^i min(M_s, M_b) = {laws.acceptance_ceiling(target, draft, gamma)}")


if __name__ == "__main__":
    main()
