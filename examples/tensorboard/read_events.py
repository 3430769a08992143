"""Read a directory of TensorBoard runs with TensorBoard's own event reader
and print every scalar as JSON: {"run": {"tag": [[step, wall_time, value], ...]}}.

Used by tests/tensorboard.rs to check `bat export --format tensorboard`:
    python read_events.py LOGDIR
"""
import json
import os
import sys

from tensorboard.backend.event_processing import event_accumulator


def main(logdir):
    out = {}
    for root, _dirs, files in os.walk(logdir):
        if not any("tfevents" in f for f in files):
            continue
        run = os.path.relpath(root, logdir).replace(os.sep, "/")
        acc = event_accumulator.EventAccumulator(
            root, size_guidance={event_accumulator.SCALARS: 0}
        )
        acc.Reload()
        out[run] = {
            tag: [[e.step, e.wall_time, e.value] for e in acc.Scalars(tag)]
            for tag in sorted(acc.Tags()["scalars"])
        }
    json.dump(out, sys.stdout, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1])
