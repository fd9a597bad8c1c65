#!/usr/bin/env python3
"""Short summaries of the device outputs that scripts/gpu/tinyfuse-gpu prints (standard library only).

  tables.py kernel-times NCU.csv                  one line per profiled kernel launch: microseconds, name
  tables.py kernel-medians NCU.csv BATCHES LABEL  per batch (log2 list, "14,16"): the median kernel time
                                                  of its launches after the first 3 (warm-up)
  tables.py torch-rows TORCH.json                 torch_mlp.py's rows: variant, batch, us per call, samples/s
"""
import csv
import json
import statistics
import sys

# ncu --csv writes one row per (launch, metric); the time metric is gpu__time_duration.sum.
_UNIT_TO_US = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}


def _duration_rows(path):
    rows = [r for r in csv.reader(open(path, newline="")) if len(r) > 10]
    if not rows:
        return []
    head, data = rows[0], rows[1:]
    name, metric = head.index("Kernel Name"), head.index("Metric Name")
    value, unit = head.index("Metric Value"), head.index("Metric Unit")
    out = []
    for r in data:
        if r[metric] != "gpu__time_duration.sum":
            continue
        out.append((float(r[value].replace(",", "")) * _UNIT_TO_US.get(r[unit], 1e-3), r[name]))
    return out


def kernel_times(path):
    for us, name in _duration_rows(path):
        print(f"{us:10.1f} us  {name[:110]}")


def kernel_medians(path, batches, label):
    times = [us for us, _ in _duration_rows(path)]
    batches = [b for b in batches.split(",") if b]
    per = len(times) // len(batches) if batches else 0
    for i, b in enumerate(batches):
        part = times[i * per + 3:(i + 1) * per]
        if part:
            print(f"{label} 2^{b}: kernel {statistics.median(part):.2f} us median of {len(part)} "
                  f"(min {min(part):.2f}, max {max(part):.2f})")


def torch_rows(path):
    for r in json.load(open(path))["results"]:
        if "median_s" in r:
            print(f'{r["variant"]:8s} 2^{r["batch"].bit_length() - 1:<3d} {r["median_s"] * 1e6:9.1f} us  '
                  f'{r["samples_per_s"] / 1e9:7.3f} G/s')
        else:
            print(r["variant"], r["batch"], r.get("error"))


def main(argv):
    commands = {"kernel-times": (kernel_times, 1), "kernel-medians": (kernel_medians, 3),
                "torch-rows": (torch_rows, 1)}
    if len(argv) < 2 or argv[1] not in commands or len(argv) - 2 != commands[argv[1]][1]:
        sys.stderr.write(__doc__)
        return 2
    try:
        commands[argv[1]][0](*argv[2:])
    except (OSError, ValueError, KeyError) as e:  # a step that failed left no or a partial file
        print(f"tables.py {argv[1]}: {argv[2]}: {e.__class__.__name__}: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
