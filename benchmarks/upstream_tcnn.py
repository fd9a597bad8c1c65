#!/usr/bin/env python3
"""Upstream tiny-cuda-nn's own programs' figures as workload records for tinyfuse-bench.

On a GPU machine, scripts/gpu/tinyfuse-gpu workloads runs upstream's programs from a build made
outside this repository (TCNN_BUILD) on the workloads' configs and pictures, and this turns what
they print into the records tinyfuse-bench --workload-compare reads (variants "tcnn", JIT fusion
off, and "tcnn-jit", on):

  bench   benchmarks/image/bench_ours.cu's program (bench_image_ours IMAGE CONFIG): for FullyFusedMLP
          ("fully_fused", then "cutlass", which is skipped here) and batches 2^21 down to 2^14, a
          training and an inference throughput, each "Mean throughput is X/s" (JIT fusion off: it
          does not turn it on). Its timing includes drawing each batch (random positions, texture
          lookups of the targets). Read from its output, so a run cut short by a time limit still
          gives the batches it finished.
  sample  samples/mlp_learning_an_image.cu's program (mlp_learning_an_image IMAGE CONFIG STEPS OUT):
          batch 2^18 training steps with JIT fusion on where supported (it prints which); it prints
          "Step#N: loss=L time=T[µs]", T the time since the previous print. The throughput is that
          of the last span of at least 100 steps (drawing each batch and reading the loss every 100
          steps included).

Usage: upstream_tcnn.py bench LOG --workload W1 --out F.json
       upstream_tcnn.py sample LOG --workload W1 --out F.json
"""
import argparse
import json
import os
import re
import sys
import tempfile

BENCH_BATCHES = [1 << b for b in range(21, 13, -1)]  # bench_ours.cu's order
BENCH_METHODS = ["fully_fused", "cutlass"]
SAMPLE_BATCH = 1 << 18


def parse_bench(text, workload):
    """Records of bench_image_ours' FullyFusedMLP rows from its output."""
    training = [float(m) for m in re.findall(r"Finished training benchmark\. Mean throughput is ([0-9.eE+-]+)/s", text)]
    inference = [float(m) for m in re.findall(r"Finished inference benchmark\. Mean throughput is ([0-9.eE+-]+)/s", text)]
    out = []
    for mode, figures in (("training", training), ("inference", inference)):
        for k, sps in enumerate(figures):
            method, batch = BENCH_METHODS[k // len(BENCH_BATCHES)], BENCH_BATCHES[k % len(BENCH_BATCHES)]
            if method != "fully_fused":
                continue
            out.append({"variant": "tcnn", "workload": workload, "mode": mode, "batch": batch, "device": "cuda",
                        "samples_per_s": sps,
                        "via": "bench_image_ours (tiny-cuda-nn benchmarks/image, FullyFusedMLP, JIT fusion off; "
                               "steady_clock, drawing each batch included)"})
    return out


def parse_sample(text, workload):
    """The record of mlp_learning_an_image's training throughput from its output."""
    jit = "JIT fusion is enabled" in text
    steps = [(int(n), float(t)) for n, t in re.findall(r"Step#(\d+): loss=[^ ]+ time=([0-9.]+)\[", text)]
    spans = [(n - p, t) for (p, _), (n, t) in zip(steps, steps[1:]) if n - p >= 100]
    if not spans:
        return []
    count, micros = spans[-1]
    return [{"variant": "tcnn-jit" if jit else "tcnn", "workload": workload, "mode": "training", "batch": SAMPLE_BATCH,
             "device": "cuda", "samples_per_s": count * SAMPLE_BATCH / (micros * 1e-6),
             "via": f"mlp_learning_an_image (tiny-cuda-nn samples, JIT fusion {'on' if jit else 'off'}; steady_clock "
                    f"over its last {count} steps, drawing each batch and reading the loss every 100 steps included)"}]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("program", choices=("bench", "sample"))
    p.add_argument("log", help="the program's standard output")
    p.add_argument("--workload", required=True, help="the workload whose config and picture it ran (W1, W2)")
    p.add_argument("--commit", default="", help="the upstream commit it was built from")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    with open(a.log, errors="replace") as f:
        text = f.read()
    records = (parse_bench if a.program == "bench" else parse_sample)(text, a.workload)
    if not records:
        print(f"upstream_tcnn.py: no figures in {a.log}", file=sys.stderr)
    doc = {"tool": "upstream_tcnn.py", "program": a.program, "upstream_commit": a.commit, "results": records}
    folder = os.path.dirname(os.path.abspath(a.out))
    fd, tmp = tempfile.mkstemp(dir=folder)
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, a.out)
    return 0 if records else 1


if __name__ == "__main__":
    sys.exit(main())
