"""rliable's numbers for the score matrices bat's cross-check test writes.

Usage: python rliable_check.py CASES.json  (prints one JSON object)

CASES.json: {"reps": R, "cases": [{"name": ..., "a": [[...]], "b": [[...]]}]},
each matrix (runs x tasks) as rliable expects. For each case this prints
rliable 1.2.0's IQM and mean of `a` and `b`, P(a > b) and P(b > a), the 95%
stratified-bootstrap percentile intervals of a's IQM and mean (runs
resampled within each task), and the interval of P(a > b) unless the case
says `"pi_interval": false`.
"""

import json
import sys

import numpy as np
from rliable import library as rly
from rliable import metrics


def num(x):
    """A float for JSON; NaN (no interval computed) as null."""
    x = float(x)
    return None if np.isnan(x) else x


def main(path):
    with open(path) as f:
        spec = json.load(f)
    reps = int(spec["reps"])
    out = {}
    for case in spec["cases"]:
        a = np.array(case["a"], dtype=float)
        b = np.array(case["b"], dtype=float)
        both = lambda x: np.array([metrics.aggregate_iqm(x), metrics.aggregate_mean(x)])
        point, ci = rly.get_interval_estimates(
            {"a": a}, both, reps=reps, random_state=np.random.RandomState(0)
        )
        # rliable's interval of P(a > b) runs scipy's Mann-Whitney test per
        # task per resample (minutes for dozens of tasks): only where asked.
        if case.get("pi_interval", True):
            pi_point, pi_ci = rly.get_interval_estimates(
                {"ab": [a, b]},
                metrics.probability_of_improvement,
                reps=reps,
                random_state=np.random.RandomState(1),
            )
        else:
            pi_point, pi_ci = {"ab": np.nan}, {"ab": np.array([np.nan, np.nan])}
        out[case["name"]] = {
            "iqm_a": float(metrics.aggregate_iqm(a)),
            "iqm_b": float(metrics.aggregate_iqm(b)),
            "mean_a": float(metrics.aggregate_mean(a)),
            "pi_ab": float(metrics.probability_of_improvement(a, b)),
            "pi_ba": float(metrics.probability_of_improvement(b, a)),
            "ci_iqm_a": [float(ci["a"][0][0]), float(ci["a"][1][0])],
            "ci_mean_a": [float(ci["a"][0][1]), float(ci["a"][1][1])],
            "pi_point": num(np.asarray(pi_point["ab"]).reshape(-1)[0]),
            "ci_pi_ab": [num(np.asarray(pi_ci["ab"]).reshape(-1)[0]), num(np.asarray(pi_ci["ab"]).reshape(-1)[1])],
        }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1])
