#!/usr/bin/env python3
"""Compare two golden JSONL files (format: ../shared/golden/README.md), e.g. a golden
regenerated with scripts/golden.sh against the shared one:

    tools/golden_compare.py A.jsonl B.jsonl [--tol X]

Prints per line: prompt_tokens equal, greedy tokens equal (or the first index where they
differ), top-1 id equal at every position, the largest |logit difference| over the ids
both top-20 rows share, and how many ids differ between the rows (a reorder near the
20th place is expected from rounding). Exit status 1 when prompt tokens differ, a top-1
differs by more than --tol in A's own logits, or a shared logit differs by more than --tol
(default 0.001; the files print 6 significant digits)."""
import argparse
import json
import sys


def load(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--tol", type=float, default=0.001)
    args = ap.parse_args()
    A, B = load(args.a), load(args.b)
    bad = 0
    if len(A) != len(B):
        print(f"line count {len(A)} vs {len(B)}")
        bad = 1
    worst_all = 0.0
    for li, (x, y) in enumerate(zip(A, B), 1):
        if x["prompt"] != y["prompt"]:
            print(f"line {li}: prompts differ: {x['prompt']!r} vs {y['prompt']!r}")
            bad = 1
            continue
        pt = x["prompt_tokens"] == y["prompt_tokens"]
        bad |= not pt
        ta, tb = x["tokens"], y["tokens"]
        first_diff = next((i for i, (p, q) in enumerate(zip(ta, tb)) if p != q),
                          None if len(ta) == len(tb) else min(len(ta), len(tb)))
        worst, swaps, top1 = 0.0, 0, 0
        for ra, rb in zip(x["prompt_top"], y["prompt_top"]):
            da, db = dict((i, v) for i, v in ra), dict((i, v) for i, v in rb)
            if ra[0][0] != rb[0][0]:
                gap = ra[0][1] - da.get(rb[0][0], float("-inf"))
                top1 += 1
                if gap > args.tol:
                    bad = 1
            for i in set(da) & set(db):
                worst = max(worst, abs(da[i] - db[i]))
            swaps += len(set(da) ^ set(db)) // 2
        worst_all = max(worst_all, worst)
        bad |= worst > args.tol
        print(f"line {li}: prompt_tokens {'equal' if pt else 'DIFFER'}, tokens "
              f"{'equal' if first_diff is None else f'differ from index {first_diff}'}, "
              f"top-1 differs at {top1} positions, largest |diff| {worst:.6f}, "
              f"{swaps} top-20 membership swaps, n_ctx {x.get('n_ctx')} / {y.get('n_ctx')}")
    print(f"largest |diff| overall {worst_all:.6f} -> {'FAIL' if bad else 'ok'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
