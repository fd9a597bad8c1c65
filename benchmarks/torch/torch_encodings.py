#!/usr/bin/env python3
"""PyTorch baselines for every encoding row of tinyfuse-bench --device cpu, in one JSON for --grid-compare.

The HashGrid rows as torch_hashgrid.py measures them (FP32 table on the CPU), and the parameter-free
encodings over 3-D inputs in [0, 1), written with ordinary tensor ops as tinyfuse computes them
(docs/CONFIG.md): Frequency (12 frequencies: sin and cos of 2^k pi x), TriangleWave (12:
4 |frac(2^(k-1) x + k/4) - 1/2| - 1), OneBlob (32 bins, torch_workloads.py's) and SphericalHarmonics
(degree 4, torch_workloads.py's). Each: forward (inference_mode) and forward + backward (the input
gradient of a fixed random output gradient), eager and torch.compile, wall clock, median of the
timed runs after warm-up, on --threads threads.

Usage: torch_encodings.py [--threads N] [--batches 14,16] [--out FILE.json] [--quick] [--no-compile]
"""
import argparse
import datetime
import json
import math
import os
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch_hashgrid as th  # noqa: E402
import torch_workloads as tw  # noqa: E402


class Frequency(torch.nn.Module):
    def __init__(self, n_frequencies):
        super().__init__()
        self.register_buffer("scales", math.pi * 2.0 ** torch.arange(n_frequencies, dtype=torch.float32))

    def forward(self, x):  # (B, D) -> (B, D * 2F): per dim, sin and cos of each frequency
        phase = x.unsqueeze(-1) * self.scales  # (B, D, F)
        return torch.stack([torch.sin(phase), torch.cos(phase)], -1).flatten(1)


class TriangleWave(torch.nn.Module):
    def __init__(self, n_frequencies):
        super().__init__()
        k = torch.arange(n_frequencies, dtype=torch.float32)
        self.register_buffer("scales", 2.0 ** (k - 1))
        self.register_buffer("shifts", 0.25 * k)

    def forward(self, x):
        v = x.unsqueeze(-1) * self.scales + self.shifts
        return (4 * (v - torch.floor(v) - 0.5).abs() - 1).flatten(1)


ENCODINGS = {
    "Frequency 3D": lambda: Frequency(12),
    "TriangleWave 3D": lambda: TriangleWave(12),
    "OneBlob 3D": lambda: tw.OneBlob(32, "cpu"),
    "SphericalHarmonics 3D": lambda: tw.SphericalHarmonics(),
}


def basic_case(name, batch, mode, compiled, warmup, repeats, n_inputs=4):
    torch.manual_seed(0)
    enc = ENCODINGS[name]()
    f = torch.compile(enc) if compiled else enc
    xs = [torch.rand(batch, 3) for _ in range(n_inputs)]
    with torch.no_grad():
        dy = torch.randn_like(enc(xs[0]))
    i = [0]
    if mode == "forward":
        def run():
            with torch.inference_mode():
                f(xs[i[0] % n_inputs])
            i[0] += 1
    else:
        def run():
            x = xs[i[0] % n_inputs].requires_grad_(True)
            (g,) = torch.autograd.grad(f(x), x, dy)
            x.requires_grad_(False)
            i[0] += 1
    med, lo, hi = th.wall_time(run, warmup, repeats)
    return {"median_s": med, "min_s": lo, "max_s": hi, "samples_per_s": batch / med}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int)
    p.add_argument("--batches", default="14,16")
    p.add_argument("--out", default="torch-encodings.json")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--no-compile", action="store_true")
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    warmup, repeats = (1, 3) if a.quick else (3, 10)
    copy_bw = th.copy_bandwidth("cpu", warmup, repeats)
    variants = (False,) if a.no_compile else (False, True)
    cases = [(f"HashGrid {d}D", d) for d in (2, 3)] + [(name, None) for name in ENCODINGS]
    results = []
    for name, grid_dims in cases:
        for lb in [int(b) for b in a.batches.split(",")]:
            for mode in ("forward", "forward+backward"):
                for compiled in variants:
                    print(f"torch {'compile' if compiled else 'eager'} {name} {mode} batch 2^{lb}", file=sys.stderr,
                          flush=True)
                    try:
                        if grid_dims:
                            r = th.bench_case("cpu", grid_dims, 1 << lb, mode, compiled, warmup, repeats)
                        else:
                            r = basic_case(name, 1 << lb, mode, compiled, warmup, repeats)
                    except Exception as e:  # noqa: BLE001 - report and go on
                        r = {"error": str(e)[:300]}
                    r.update({"framework": "torch", "variant": "compile" if compiled else "eager", "encoding": name,
                              "mode": mode, "batch": 1 << lb, "precision": "fp32"})
                    results.append(r)
    doc = {"tool": "torch_encodings.py", "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
           "torch": torch.__version__, "device": "cpu", "threads": torch.get_num_threads(),
           "ceilings": {"copy_bytes_per_s": copy_bw}, "results": results}
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(a.out)) or ".")
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, a.out)
    print("torch_encodings.py: wrote " + a.out, file=sys.stderr)


if __name__ == "__main__":
    main()
