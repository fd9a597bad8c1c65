#!/usr/bin/env python3
"""Ratios of tinyfuse-bench --workloads runs taken in turn (tinyfuse-gpu alternate).

Each argument is VARIANT=FILE[,FILE...]: the JSON of one variant's runs (one per round). Prints, per
workload row (workload, mode, batch), each variant's mean of the rounds' median samples/s, its
ratio to the first variant, and the spread of that ratio over the rounds (round k's variant against
round k's first variant). A row that failed a check in any run is marked.

Usage: alternation.py off=a-1.json,a-2.json fixed=b-1.json,b-2.json [--json OUT.json]
Standard library only.
"""
import argparse
import json
import sys


def rows(path):
    with open(path) as f:
        data = json.load(f)
    out = {}
    for r in data.get("workloads", {}).get("rows", []):
        if r.get("status") != "ok":
            continue
        key = (r["workload"], r["mode"], r["batch"])
        ok = all(c.get("ok", False) for c in r.get("checks", []))
        out[key] = (r["samples_per_second"]["median"], ok)
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("variants", nargs="+", metavar="VARIANT=FILE[,FILE...]")
    ap.add_argument("--json", help="write the table as JSON here too")
    args = ap.parse_args(argv)
    variants = []
    for v in args.variants:
        name, _, files = v.partition("=")
        if not files:
            ap.error(f"{v}: expected VARIANT=FILE[,FILE...]")
        variants.append((name, [rows(f) for f in files.split(",")]))
    base_name, base_runs = variants[0]
    keys = sorted(set.intersection(*(set(r) for _, runs in variants for r in runs)))
    if not keys:
        ap.error("no workload row is in every run")
    table = []
    header = f"| workload | mode | batch | {base_name} (samples/s) |" + "".join(f" {n} / {base_name} |" for n, _ in variants[1:])
    print(header)
    print("|---|---|---:|---:|" + "---:|" * (len(variants) - 1))
    for key in keys:
        base = [r[key][0] for r in base_runs]
        base_mean = sum(base) / len(base)
        flags = "" if all(r[key][1] for _, runs in variants for r in runs) else " (a check failed)"
        cells, entry = [], {"workload": key[0], "mode": key[1], "batch": key[2], base_name: base_mean}
        for name, runs in variants[1:]:
            vals = [r[key][0] for r in runs]
            mean = sum(vals) / len(vals)
            per_round = [v / b for v, b in zip(vals, base)]
            cells.append(f" {mean / base_mean:.3f}x ({min(per_round):.3f}-{max(per_round):.3f}) |")
            entry[name] = mean
            entry[name + "_ratio"] = mean / base_mean
            entry[name + "_ratio_per_round"] = per_round
        print(f"| {key[0]} | {key[1]} | 2^{key[2].bit_length() - 1}{'' if key[2] & (key[2] - 1) == 0 else '+'} | "
              f"{base_mean / 1e6:.1f} M{flags} |" + "".join(cells))
        table.append(entry)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"variants": [n for n, _ in variants], "rows": table}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
