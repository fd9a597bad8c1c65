#!/usr/bin/env python3
"""tinyfuse's CPU MLPs beside PyTorch's on the same machine, thread count by thread count, in one run.

For each thread count T, one after the other: torch_mlp.py --device cpu --threads T with nn.Linear's
biases and without, then tinyfuse-bench --device cpu with TINYFUSE_NUM_THREADS=T (PortableMLP and
CutlassMLP; FullyFusedMLP on the CPU is CutlassMLP's network). PortableMLP has biases and is compared
with PyTorch with biases; CutlassMLP has none and is compared with PyTorch without. Prints one
Markdown table per thread count and mode, and writes every figure and ratio to --out.

Columns: samples/s of tinyfuse, of PyTorch eager and torch.compile, tinyfuse / best PyTorch, and
tinyfuse's FLOP rate as a share of two matmul rates measured in the same run: OpenBLAS's 1024^3 sgemm
(tinyfuse-bench) and PyTorch's 1024^3 FP32 matmul (torch_mlp.py).

Usage:
  cpu_compare.py --bench build-cpu/benchmarks/tinyfuse-bench [--threads 1,2] [--widths 16,32,64,128]
                 [--batches 10,12,14,16,18] [--modes inference,training] [--quick] [--out cpu-compare.json]
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
NETWORKS = {"PortableMLP": True, "CutlassMLP": False}  # otype -> has biases


def run(cmd, env=None):
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, env=env, stdout=sys.stderr)


def load(path):
    with open(path) as f:
        return json.load(f)


def fmt(x):
    if x is None:
        return "-"
    if x >= 1e6:
        return "%.2f M" % (x / 1e6)
    return "%.0f k" % (x / 1e3)


def measure(a, threads, tmp):
    """Runs the three programs for one thread count; returns their JSON documents."""
    common = ["--device", "cpu", "--widths", a.widths, "--batches", a.batches, "--modes", a.modes]
    torch_docs = {}
    for bias in (True, False):
        out = os.path.join(tmp, "torch-%d-%s.json" % (threads, "bias" if bias else "nobias"))
        cmd = [sys.executable, os.path.join(HERE, "torch_mlp.py"), *common, "--threads", str(threads), "--out", out]
        if not bias:
            cmd.append("--no-bias")
        if a.quick:
            cmd.append("--quick")
        run(cmd)
        torch_docs[bias] = load(out)
    out = os.path.join(tmp, "tinyfuse-%d.json" % threads)
    env = dict(os.environ, TINYFUSE_NUM_THREADS=str(threads))
    cmd = [a.bench, *common, "--networks", ",".join(NETWORKS), "--skip-encodings", "--out", out]
    if a.quick:
        cmd.append("--quick")
    run(cmd, env)
    return torch_docs, load(out)


def torch_figure(doc, variant, mode, width, batch):
    for r in doc.get("results", []):
        if (r.get("variant"), r.get("mode"), r.get("width"), r.get("batch"), r.get("precision")) == (
                variant, mode, width, batch, "fp32"):
            return r.get("samples_per_s")
    return None


def rows_for(threads, torch_docs, bench):
    sgemm = bench.get("sgemm_peak", {}).get("gflops", {}).get("median")
    torch_matmul = torch_docs[False].get("ceilings", {}).get("matmul_flops_per_s", {}).get("fp32")
    rows = []
    for r in bench.get("results", []):
        if r.get("status") != "ok":
            rows.append({"threads": threads, "network": r.get("network"), "mode": r.get("mode"),
                         "width": r.get("width"), "batch": r.get("batch"), "error": r.get("error", r.get("status"))})
            continue
        bias = NETWORKS[r["network"]]
        eager = torch_figure(torch_docs[bias], "eager", r["mode"], r["width"], r["batch"])
        compiled = torch_figure(torch_docs[bias], "compile", r["mode"], r["width"], r["batch"])
        best = max([x for x in (eager, compiled) if x], default=None)
        ours = r["samples_per_second"]["median"]
        gflops = r.get("gflops")
        rows.append({
            "threads": threads, "network": r["network"], "torch_bias": bias, "mode": r["mode"], "width": r["width"],
            "batch": r["batch"], "tinyfuse": ours, "torch_eager": eager, "torch_compile": compiled,
            "ratio_to_best_torch": ours / best if best else None,
            "percent_of_sgemm": 100 * gflops / sgemm if gflops and sgemm else None,
            "percent_of_torch_matmul": 100 * gflops * 1e9 / torch_matmul if gflops and torch_matmul else None,
        })
    return rows, sgemm, torch_matmul


def markdown(rows, threads, sgemm, torch_matmul, mode):
    out = ["### %d thread%s, %s (OpenBLAS sgemm %.1f GFLOP/s, PyTorch matmul %.1f GFLOP/s)" % (
        threads, "" if threads == 1 else "s", mode, sgemm or 0, (torch_matmul or 0) / 1e9), "",
        "| width | batch | PortableMLP | torch eager / compile (bias) | ratio | CutlassMLP | torch eager / compile "
        "(no bias) | ratio | % sgemm / % torch matmul (Cutlass) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    keys = sorted({(r["width"], r["batch"]) for r in rows if r["threads"] == threads and r["mode"] == mode})
    for width, batch in keys:
        cells = ["%d" % width, "2^%d" % (batch.bit_length() - 1)]
        share = "-"
        for net in NETWORKS:
            r = next((x for x in rows if x["threads"] == threads and x["mode"] == mode and x["network"] == net
                      and x["width"] == width and x["batch"] == batch), None)
            if r is None or "error" in r:
                cells += ["failed" if r else "-", "-", "-"]
                continue
            ratio = r["ratio_to_best_torch"]
            cells += [fmt(r["tinyfuse"]), "%s / %s" % (fmt(r["torch_eager"]), fmt(r["torch_compile"])),
                      "%.2fx" % ratio if ratio else "-"]
            if net == "CutlassMLP" and r["percent_of_sgemm"] is not None:
                share = "%.0f %% / %.0f %%" % (r["percent_of_sgemm"], r["percent_of_torch_matmul"] or 0)
        out.append("| " + " | ".join(cells + [share]) + " |")
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bench", required=True, help="the tinyfuse-bench program of a CPU (or CUDA) build")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--widths", default="16,32,64,128")
    p.add_argument("--batches", default="10,12,14,16,18", help="log2 batch sizes")
    p.add_argument("--modes", default="inference,training")
    p.add_argument("--quick", action="store_true", help="1 warm-up and 3 timed runs per figure on both sides")
    p.add_argument("--out", default="cpu-compare.json")
    a = p.parse_args()
    if not os.access(a.bench, os.X_OK):
        sys.exit("cpu_compare.py: --bench '%s' is not an executable (build the project first)" % a.bench)
    doc = {"tool": "cpu_compare.py", "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
           "threads": [int(t) for t in a.threads.split(",")], "quick": a.quick, "runs": [], "rows": []}
    tables = []
    with tempfile.TemporaryDirectory() as tmp:
        for threads in doc["threads"]:
            torch_docs, bench = measure(a, threads, tmp)
            rows, sgemm, torch_matmul = rows_for(threads, torch_docs, bench)
            doc["rows"] += rows
            doc["runs"].append({"threads": threads, "tinyfuse_commit": bench.get("git_commit"),
                                "tinyfuse_dirty": bench.get("git_dirty"), "blas": bench.get("blas"),
                                "torch": torch_docs[True].get("torch"), "sgemm_gflops": sgemm,
                                "torch_matmul_gflops": (torch_matmul or 0) / 1e9, "host": bench.get("host")})
            for mode in a.modes.split(","):
                tables.append(markdown(rows, threads, sgemm, torch_matmul, mode))
    print("\n\n".join(tables))
    ratios = [r["ratio_to_best_torch"] for r in doc["rows"] if r.get("ratio_to_best_torch")]
    if ratios:
        print("\ntinyfuse / best PyTorch over %d rows: min %.2fx, max %.2fx; rows behind PyTorch: %d" % (
            len(ratios), min(ratios), max(ratios), sum(1 for x in ratios if x < 1)))
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=2)
    print("cpu_compare.py: wrote " + a.out, file=sys.stderr)


if __name__ == "__main__":
    main()
