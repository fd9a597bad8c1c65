#!/usr/bin/env python3
"""Markdown tables of a tinyfuse-bench --device cuda run beside the PyTorch run of the same device call.

Reads the JSON tinyfuse-bench writes (--out) and the JSON benchmarks/torch/torch_mlp.py writes
(--out), and prints one table per mode, width and precision: tinyfuse samples/s, its share of the
hardware limit, PyTorch eager and torch.compile samples/s of the same width, batch, mode and
precision (fp16 networks against torch fp16, fp32 against fp32), and the ratios tinyfuse / PyTorch.

Hardware limit of a record: copy bandwidth / bytes per sample (inference: input + output in the
network's dtypes; training: input + FP32 target) and matmul rate of the record's precision / FLOP
per sample (forward 2*sum(in*out), training 3x); the lower binds. The ceilings come from the torch
JSON (measured in the same run), or from the bench JSON when it was given --ceilings.

Usage:
  compare_results.py BENCH.json TORCH.json                 # Markdown on stdout
  compare_results.py BENCH.json TORCH.json -o auto         # benchmarks/results/cuda-<date>.md
  compare_results.py BENCH.json TORCH.json -o FILE.md

Standard library only.
"""
import argparse
import json
import os
import sys
import tempfile

DTYPE_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "f64": 8}
PRECISION_DTYPE = {"fp32": "f32", "fp16": "f16", "bf16": "bf16", "fp64": "f64"}


def si(v, unit=""):
    """3.21 G style: three significant digits and an SI prefix."""
    if v is None:
        return "-"
    prefixes = ["", "k", "M", "G", "T", "P"]
    i = 0
    while abs(v) >= 1000 and i < len(prefixes) - 1:
        v /= 1000.0
        i += 1
    digits = 0 if abs(v) >= 100 else 1 if abs(v) >= 10 else 2
    suffix = (prefixes[i] + unit).strip()
    return f"{v:.{digits}f} {suffix}" if suffix else f"{v:.{digits}f}"


def pct(v):
    return "-" if v is None else (f"{v:.1f} %" if v < 10 else f"{v:.0f} %")


def ratio(v):
    return "-" if v is None else f"{v:.2f}x"


def batch_label(b):
    if b > 0 and b & (b - 1) == 0:
        return f"2^{b.bit_length() - 1}"
    return str(b)


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"compare_results.py: cannot read {path}: {e}")


def sps(record):
    """samples/s of a bench record (median) or None."""
    s = record.get("samples_per_second")
    if isinstance(s, dict):
        return s.get("median")
    return s if isinstance(s, (int, float)) else None


def bytes_per_sample(r):
    if r.get("bytes_per_sample"):
        return r["bytes_per_sample"]
    w = r["width"]
    dt = r.get("dtypes") or {}
    in_b = DTYPE_BYTES.get(dt.get("input") or PRECISION_DTYPE.get(r.get("precision"), "f32"), 4)
    out_b = DTYPE_BYTES.get(dt.get("output") or PRECISION_DTYPE.get(r.get("precision"), "f32"), 4)
    return w * in_b + w * (4 if r["mode"] == "training" else out_b)


def flop_per_sample(r):
    if r.get("flop_per_sample"):
        return r["flop_per_sample"]
    w = r["width"]
    f = 2.0 * 3 * w * w  # n -> n x2 -> n: three n x n layers
    return 3 * f if r["mode"] == "training" else f


def limit(r, ceilings):
    """(binding samples/s, 'memory'|'compute', memory samples/s, compute samples/s or None)."""
    if not ceilings or not ceilings.get("copy_bytes_per_s"):
        return None
    mem = ceilings["copy_bytes_per_s"] / bytes_per_sample(r)
    rate = (ceilings.get("matmul_flops_per_s") or {}).get(r.get("precision"))
    comp = rate / flop_per_sample(r) if rate else None
    if comp is not None and comp < mem:
        return comp, "compute", mem, comp
    return mem, "memory", mem, comp


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bench", help="tinyfuse-bench --device cuda JSON")
    ap.add_argument("torch", help="benchmarks/torch/torch_mlp.py JSON")
    ap.add_argument("-o", "--out", default="-", help="'-' (stdout, default), 'auto' (benchmarks/results/cuda-<date>.md) or a file")
    a = ap.parse_args()

    bench, torch = load(a.bench), load(a.torch)
    if bench.get("tool") != "tinyfuse-bench" or not isinstance(bench.get("results"), list):
        sys.exit(f"compare_results.py: {a.bench} is not a tinyfuse-bench JSON")
    if bench.get("device") == "cpu":
        sys.exit(f"compare_results.py: {a.bench} is a CPU run; the PyTorch figures are GPU figures (run tinyfuse-bench --device cuda)")
    if not isinstance(torch.get("results"), list):
        sys.exit(f"compare_results.py: {a.torch} has no 'results' (not a torch_mlp.py JSON?)")
    ceilings = torch.get("ceilings") or bench.get("ceilings")
    ceil_src = "torch_mlp.py, same run" if torch.get("ceilings") else "tinyfuse-bench --ceilings"

    tfig = {}
    for t in torch["results"]:
        key = (t.get("variant"), t.get("precision"), t.get("mode"), t.get("width"), t.get("batch"))
        tfig.setdefault(key, t)

    def torch_sps(variant, r):
        t = tfig.get((variant, r.get("precision"), r["mode"], r["width"], r["batch"]))
        if t is None:
            return None, "n/a"
        v = t.get("samples_per_s")
        return (v, si(v)) if v else (None, "failed")

    # Sections in the order the bench ran them: mode, then width, then precision.
    recs = [r for r in bench["results"] if r.get("device", "cuda") != "cpu"]
    for r in recs:
        if not r.get("precision"):
            r["precision"] = (r.get("torch") or {}).get("precision") or ("fp16" if "FP16" in r["network"] else "fp32")
    sections = []
    for mode in ("inference", "training"):
        for w in sorted({r["width"] for r in recs}):
            for p in dict.fromkeys(r["precision"] for r in recs):
                rows = [r for r in recs if r["mode"] == mode and r["width"] == w and r["precision"] == p]
                if rows:
                    sections.append((mode, w, p, rows))

    gpu = bench.get("gpu") or {}
    date = (bench.get("date") or "")[:10]
    timing = bench.get("timing") or {}
    out = []
    out.append(f"# tinyfuse vs PyTorch: n->n x2->n MLP on {gpu.get('name') or torch.get('device') or 'GPU'} ({date})")
    out.append("")
    commit = bench.get("git_commit") or "?"
    if bench.get("git_dirty"):
        commit += " (with uncommitted changes)"
    out.append(f"- tinyfuse-bench {bench.get('version', '?')}, commit {commit}, {bench.get('date', '?')}; "
               f"median of {timing.get('repeats', '?')} runs after {timing.get('warmup', '?')} warm-up, "
               f"CUDA events per run ({'host waits for each run' if timing.get('sync_each_run', True) else 'runs queued back to back'}), "
               f"inputs rotated past the L2")
    if gpu:
        out.append(f"- GPU: {gpu.get('name')} (sm {gpu.get('compute_capability')}, {gpu.get('sm_count')} SMs), "
                   f"driver {gpu.get('driver_version')}, runtime {gpu.get('runtime_version')}")
    out.append(f"- PyTorch {torch.get('torch', '?')} ({torch.get('tool', 'torch_mlp.py')}, {torch.get('date', '?')}): "
               "eager and torch.compile; fp16 inference in half weights, fp16 training with AMP; fp32 with TF32 off")
    if ceilings:
        mm = ceilings.get("matmul_flops_per_s") or {}
        out.append(f"- Ceilings ({ceil_src}): copy {si(ceilings.get('copy_bytes_per_s'), 'B/s')} (read + write), "
                   + ", ".join(f"{k} matmul {si(v, 'FLOP/s')}" for k, v in mm.items() if v))
        out.append("- % of limit: samples/s over the binding limit, min(copy rate / bytes per sample, matmul rate of the "
                   "precision / FLOP per sample); bytes per sample: inference input + output, training input + FP32 "
                   "target; FLOP per sample: forward 2*sum(in*out), training 3x")
    else:
        out.append("- No ceilings in either file: no % of limit column")
    out.append("- x eager / x compile: tinyfuse samples/s over PyTorch samples/s at the same width, batch, mode and precision")
    out.append("")

    errors = []
    for mode, w, p, rows in sections:
        out.append(f"## {mode.capitalize()}, {w} -> {w} x2 -> {w}, {p}")
        out.append("")
        lim = limit(rows[0], ceilings)
        if lim:
            binding, kind, mem, comp = lim
            out.append(f"Limit: memory {si(mem)} samples/s ({bytes_per_sample(rows[0]):.0f} B/sample), compute "
                       f"{si(comp) if comp else 'n/a'} samples/s ({flop_per_sample(rows[0]):,.0f} FLOP/sample): "
                       f"{kind}-bound, {si(binding)} samples/s.")
            out.append("")
        head = ["network", "batch", "samples/s", "% of limit", "PyTorch eager", "torch.compile", "x eager", "x compile"]
        if not ceilings:
            head.remove("% of limit")
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "|".join("---" if i < 2 else "---:" for i in range(len(head))) + "|")
        for r in rows:
            v = sps(r) if r.get("status", "ok") == "ok" else None
            e_v, e_s = torch_sps("eager", r)
            c_v, c_s = torch_sps("compile", r)
            cells = [r["network"], batch_label(r["batch"]), si(v) if v else "failed"]
            if ceilings:
                lr = limit(r, ceilings)
                cells.append(pct(100.0 * v / lr[0]) if v and lr else "-")
            cells += [e_s, c_s, ratio(v / e_v) if v and e_v else "-", ratio(v / c_v) if v and c_v else "-"]
            if v and r.get("loss_finite") is False:
                cells[2] += " (loss not finite)"
            out.append("| " + " | ".join(cells) + " |")
            if r.get("status", "ok") != "ok":
                errors.append(f"{r['network']} {mode} width {w} batch {batch_label(r['batch'])}: "
                              f"{str(r.get('error', '?'))[:300]}")
        out.append("")
    if errors:
        out.append("## Failed cases")
        out.append("")
        out += [f"- {e}" for e in errors]
        out.append("")
    text = "\n".join(out).rstrip("\n") + "\n"

    if a.out == "-":
        sys.stdout.write(text)
        return
    path = a.out
    if path == "auto":
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        path = os.path.join(root, "benchmarks", "results", f"cuda-{date or 'undated'}.md")
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    print(f"compare_results.py: wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
