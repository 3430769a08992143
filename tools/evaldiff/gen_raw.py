#!/usr/bin/env python3
"""Random raw evaluation with Python-coercible score values (tools/evaldiff/run.sh)."""
import json, random, sys
random.seed(int(sys.argv[1]))
def score():
    r = random.random()
    if r < 0.6: return random.random()
    if r < 0.97: return random.choice([0, 1, 0.0, 1.0, -0.0, "0.75", " 1e-1 ", "1_0e-2", "\u0660.\u0665", 1e-07, 0.35000000000000003, 5e-324, 0.1, 0.7, 0.3, "1"])
    return random.choice([0, 1, 0.0, 1.0, -0.0, "0.75", " 1e-1 ", "1_0e-2", "\u0660.\u0665", True, None, "nan", 1.0000001, -1e-300, 5e-324, "0x1", 0.35000000000000003, 1e-07, "inf", 2, 0.1, 0.7, 0.3])
tracks = ['a','b','é','Z','a b']
cells = []
for i in range(random.randint(1, 8)):
    st = {s: score() for s in ['S1','S2','S3','S4','S5']}
    if False: del st['S2']
    c = {"valid": True, "track": random.choice(tracks), "task_id": "t%d" % random.randint(0, 20), "repeat": random.choice([0, 1, 2, 0, True, -1, 1.0]) if random.random() < 0.1 else random.randint(0,2), "task_score": score(), "stages": st}
    if random.random() < 0.3:
        try:
            vals=[float(st[s]) for s in ['S1','S2','S3','S4','S5']]
            c["agentic_score"] = sum(v*w for v,w in zip(vals,[0.25,0.15,0.35,0.15,0.1])) + random.choice([0, 1e-9, 1e-7])
        except Exception: c["agentic_score"] = "x"
    cells.append(c)
print(json.dumps({"schema_version": random.choice([1,1.0,True]), "status": "complete", "cells": cells}, ensure_ascii=False))
