#!/usr/bin/env python3
"""Record CPython 3.11 behaviour for random inputs (figures only) used by
tests/eval_vectors.rs: float(str) results and re.search of the pack's
absolute-path pattern.

    python3.11 tools/gen_eval_vectors.py > tests/data/numeric/python-vectors.json
"""
import json, random, re, sys

random.seed(20260601)
alphabet = list("0123456789") + ["_", ".", "e", "E", "+", "-", " ", "\t", "\u00a0", "\u2003", "\u0663", "\uff15", "i", "n", "f", "a", "N", "I", "t", "y", "x", "\u200b"]
floats = []
for _ in range(1500):
    s = "".join(random.choice(alphabet) for _ in range(random.randint(0, 8)))
    floats.append(s)
def digits():
    d = "".join(random.choice("0123456789٣") for _ in range(random.randint(1, 6)))
    if random.random() < 0.2 and len(d) > 1:
        k = random.randint(1, len(d) - 1)
        d = d[:k] + "_" + d[k:]
    return d
for _ in range(600):
    s = random.choice(["", "+", "-", " ", "\u2003"]) + random.choice([digits(), ""]) + random.choice(["", ".", "." + digits()])
    if random.random() < 0.5:
        s += random.choice("eE") + random.choice(["", "+", "-"]) + str(random.randint(0, 400))
    floats.append(s + random.choice(["", " ", "\n", "\x1f"]))
floats += ["1_0", "1__0", "_1", "1_", "1e_1", "1_e1", "0.5_5", "1.5e-3_0", "infinity", "-iNf", "+nan", "nan(1)", "1e309", "-1e309", "4.9e-324", "2.4703282292062327e-324", "2.4703282292062328e-324", "0x1p0", "١٢٣", "１.５", " \u3000 7 \u3000", "7\x1c", "\x1f8"]
rows = []
for s in floats:
    try:
        x = float(s)
        rows.append([s, "nan" if x != x else repr(x)])
    except ValueError:
        rows.append([s, None])
pat = re.compile(r"(?:^|[\s\"'])/(?:home|root|localhome|mnt|workspace|tmp)/")
pieces = ["/home/", "/tmp/", "/mnt", "home/", "/root/", "/workspace/", "/localhome/", " ", "\t", "\x1c", "\x1f", "\x85", "\xa0", "\u2028", "\u3000", "\u200b", "\ufeff", '"', "'", "`", "=", "a", "/", "/Home/"]
paths = []
for _ in range(1500):
    s = "".join(random.choice(pieces) for _ in range(random.randint(0, 5)))
    paths.append([s, pat.search(s) is not None])
json.dump({"python": sys.version.split()[0], "float": rows, "path_regex": paths}, sys.stdout, ensure_ascii=True, indent=0)
print()
