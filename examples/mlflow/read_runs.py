"""Read back what `bat mirror mlflow` logged, with MLflow's own client.

Usage: python read_runs.py TRACKING_URI EXPERIMENT_NAME

Prints one JSON object: the experiment id and, per run that carries a
`bat.branch` tag (or a `bat.superseded_branch` tag), its run id, status,
params, tags and the full history of every metric as [step, value,
timestamp] triples in the order MLflow returns them. The MLflow mirror
test (tests/mlflow.rs) compares it with the ledger.
"""

import json
import sys

from mlflow.tracking import MlflowClient


def main() -> None:
    uri, name = sys.argv[1], sys.argv[2]
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(name)
    if exp is None:
        print(json.dumps({"experiment_id": None, "runs": []}))
        return
    runs = []
    for run in client.search_runs([exp.experiment_id], max_results=1000):
        tags = dict(run.data.tags)
        metrics = {}
        for key in sorted(run.data.metrics):
            history = client.get_metric_history(run.info.run_id, key)
            metrics[key] = [[m.step, m.value, m.timestamp] for m in history]
        runs.append(
            {
                "run_id": run.info.run_id,
                "run_name": run.info.run_name,
                "status": run.info.status,
                "branch": tags.get("bat.branch"),
                "superseded_branch": tags.get("bat.superseded_branch"),
                "params": dict(run.data.params),
                "tags": tags,
                "metrics": metrics,
            }
        )
    print(json.dumps({"experiment_id": exp.experiment_id, "runs": runs}))


if __name__ == "__main__":
    main()
