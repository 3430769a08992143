#!/usr/bin/env python3
"""Random baseline/candidate raw evaluations over one cell identity set (tools/evaldiff/run.sh)."""
import json, random, sys
seed, arm = int(sys.argv[1]), sys.argv[2]
random.seed(seed)
n = random.randint(1, 6)
ids = [(random.choice(['a','b','c']), "t%d" % i, random.randint(0,1)) for i in range(n)]
random.seed(seed * 7 + (arm == 'c'))
base = random.random()
def sc():
    r = random.random()
    if r < 0.3: return random.choice([0.6, 0.6000000001, 0.5, 0.49, 0.7, 1, 0])
    return min(1.0, max(0.0, base + random.uniform(-0.15, 0.15)))
cells = [{"valid": True, "track": t, "task_id": k, "repeat": r, "task_score": sc(), "stages": {s: sc() for s in ['S1','S2','S3','S4','S5']}} for t,k,r in ids]
print(json.dumps({"schema_version": 1, "status": "complete", "cells": cells}))
