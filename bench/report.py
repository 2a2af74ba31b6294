#!/usr/bin/env python3
"""Prints criterion results (target/criterion) as a markdown table, with
each implementation's time relative to ferrolb in the same group."""
import json
import pathlib
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "target/criterion")
rows = {}
for est in sorted(root.glob("*/*/new/estimates.json")):
    impl = est.parent.parent.name
    group_dir = est.parent.parent.parent
    bench = json.loads((est.parent / "benchmark.json").read_text())
    group = bench["group_id"]
    ns = json.loads(est.read_text())["median"]["point_estimate"]
    thr = bench.get("throughput") or {}
    rows.setdefault(group, {})[bench["function_id"] or impl] = (ns, thr)


def fmt_time(ns):
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.2f} µs"
    return f"{ns:.0f} ns"


print("| group | implementation | median | throughput | vs ferrolb |")
print("|---|---|---|---|---|")
for group in sorted(rows):
    impls = rows[group]
    base = impls.get("ferrolb", (None,))[0]
    for name in sorted(impls, key=lambda n: (n != "ferrolb", n)):
        ns, thr = impls[name]
        if "Bytes" in thr:
            tp = f"{thr['Bytes'] / ns * 1e9 / 2**20:.0f} MiB/s"
        elif "Elements" in thr:
            tp = f"{thr['Elements'] / ns * 1e9 / 1e6:.1f} M/s"
        else:
            tp = ""
        ratio = f"{ns / base:.2f}x slower" if base and name != "ferrolb" else ""
        print(f"| {group} | {name} | {fmt_time(ns)} | {tp} | {ratio} |")
