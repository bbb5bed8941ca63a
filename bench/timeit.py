"""Interleaved wall-clock timing of commands for the bench scripts.

usage: timeit.py RUNS SPEC.json [WARMUP] -> prints JSON {name: [seconds, ...]}
SPEC is a list of {"name", "argv", "stdin" (path or null), "stdout" (path or
null)}. Each round runs every command once, in order, so machine noise falls
on all of them alike; a command that exits non-zero is reported as a failure
(its stderr tail on our stderr) and timed as null.
"""
import json
import subprocess
import sys
import time


def run_once(c):
    stdin = open(c["stdin"], "rb") if c.get("stdin") else subprocess.DEVNULL
    stdout = open(c["stdout"], "wb") if c.get("stdout") else subprocess.DEVNULL
    t0 = time.perf_counter()
    p = subprocess.run(c["argv"], stdin=stdin, stdout=stdout, stderr=subprocess.PIPE)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        sys.stderr.write(f"timeit: {c['name']} exited {p.returncode}: {p.stderr[-400:].decode(errors='replace')}\n")
        return None
    return dt


def main():
    runs, spec = int(sys.argv[1]), json.load(open(sys.argv[2]))
    warmup = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    for _ in range(warmup):  # page cache, CPU frequency: not counted
        for c in spec:
            run_once(c)
    out = {c["name"]: [] for c in spec}
    for _ in range(runs):
        for c in spec:
            out[c["name"]].append(run_once(c))
    print(json.dumps(out))


main()
