#!/usr/bin/env python3
"""PyTorch baseline for tinyfuse-bench's HashGrid rows: a plain multiresolution hash grid.

The same encoding tinyfuse's HashGrid computes (tiny-cuda-nn's defaults: 16 levels x 2 features,
2^19 entries per level, base resolution 16, per-level scale 2, CoherentPrime hash, linear
interpolation, position x * scale + 0.5), written with ordinary tensor ops: per level, the cell
corners' indices (dense row-major while the level fits its table, else the XOR hash), a gather
from the level's table and the weighted sum. Parameters FP16 (as tiny-cuda-nn keeps them), the
arithmetic in FP32, output FP16; the backward pass is autograd's (index_add into the table's
gradient).

Measured for 2-D and 3-D inputs, forward alone (inference_mode) and forward + backward
(parameter gradients, output gradient a fixed random tensor), eager and torch.compile. Timed with
CUDA events after warm-up, median of many runs, inputs rotated among several buffers so the L2
does not hold them. Also measures the copy bandwidth (the hardware limit tinyfuse-bench's byte
model divides by).

With --device cpu (beside tinyfuse-bench --device cpu --grid-compare): the table and the output in
FP32 (the CPU backend's dtype), each run timed with the wall clock on --threads threads, the copy
bandwidth of a 256 MiB host copy.

Usage: torch_hashgrid.py [--device cuda|cpu] [--threads N] [--batches 14,...,22] [--out FILE.json] [--quick]
                         [--no-compile]
"""
import argparse
import datetime
import json
import math
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import torch

N_LEVELS, N_FEATURES, LOG2_T, BASE, SCALE = 16, 2, 19, 16, 2.0
PRIMES = (1, 2654435761, 805459861)


def event_time(fn, warmup, repeats):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times), min(times), max(times)


def wall_time(fn, warmup, repeats):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times), max(times)


def copy_bandwidth(device, warmup, repeats):
    n = (1 << 30) if device == "cuda" else (1 << 27)  # 2 GiB / 256 MiB of FP16
    a = torch.empty(n, dtype=torch.float16, device=device).uniform_()
    b = torch.empty_like(a)
    timer = event_time if device == "cuda" else wall_time
    med, _, _ = timer(lambda: b.copy_(a), warmup, repeats)
    return 2 * a.numel() * a.element_size() / med


class HashGrid(torch.nn.Module):
    """The grid of a HashGrid config (its defaults: this benchmark's); the table in `dtype` (FP16 as
    tiny-cuda-nn keeps it, or FP32 as a PyTorch model trained with Adam keeps its parameters), the
    arithmetic in FP32; the output in the table's dtype. benchmarks/torch/torch_workloads.py
    builds its models' grids with it."""

    def __init__(self, dims, n_levels=N_LEVELS, n_features=N_FEATURES, log2_hashmap_size=LOG2_T,
                 base_resolution=BASE, per_level_scale=SCALE, device="cuda", dtype=torch.float16, smoothstep=False):
        super().__init__()
        self.dims = dims
        self.smoothstep = smoothstep  # "interpolation": "Smoothstep": weights through t^2 (3 - 2t)
        scales, res, sizes, offsets = [], [], [], [0]
        log2_scale = np.log2(np.float32(per_level_scale))  # in float, as tiny-cuda-nn (and tinyfuse) compute it
        for l in range(n_levels):
            s = float(np.exp2(np.float32(l) * log2_scale) * np.float32(base_resolution) - np.float32(1))
            r = math.ceil(s) + 1
            n = min(((r ** dims + 7) // 8) * 8, 1 << log2_hashmap_size)
            scales.append(s), res.append(r), sizes.append(n), offsets.append(offsets[-1] + n)
        self.scales, self.res, self.sizes, self.offsets = scales, res, sizes, offsets
        self.table = torch.nn.Parameter(
            (torch.rand(offsets[-1], n_features, device=device) * 2e-4 - 1e-4).to(dtype))
        corners = torch.tensor([[(k >> d) & 1 for d in range(dims)] for k in range(1 << dims)], device=device)
        self.register_buffer("corners", corners.to(torch.int64))  # (2^D, D)
        self.register_buffer("primes", torch.tensor(PRIMES[:dims], device=device, dtype=torch.int64))

    def forward(self, x):  # x: (B, D) float32 in [0, 1)
        outs = []
        for l in range(len(self.scales)):
            pos = x * self.scales[l] + 0.5
            fl = torch.floor(pos)
            frac = pos - fl
            if self.smoothstep:
                frac = frac * frac * (3 - 2 * frac)
            v = fl.to(torch.int64).unsqueeze(1) + self.corners  # (B, 2^D, D)
            if self.res[l] ** self.dims <= self.sizes[l]:
                stride = torch.tensor([self.res[l] ** d for d in range(self.dims)], device=x.device)
                idx = (v * stride).sum(-1)
            else:
                h = (v * self.primes) & 0xFFFFFFFF
                idx = h[..., 0]
                for d in range(1, self.dims):
                    idx = idx ^ h[..., d]
            idx = idx % self.sizes[l] + self.offsets[l]
            w = torch.where(self.corners.bool(), frac.unsqueeze(1), 1 - frac.unsqueeze(1)).prod(-1)  # (B, 2^D)
            feats = self.table[idx].float()  # (B, 2^D, F)
            outs.append((w.unsqueeze(-1) * feats).sum(1))
        return torch.cat(outs, dim=-1).to(self.table.dtype)


def bench_case(device, dims, batch, mode, compiled, warmup, repeats, n_inputs=4):
    torch.manual_seed(0)
    dtype = torch.float16 if device == "cuda" else torch.float32
    grid = HashGrid(dims, device=device, dtype=dtype)
    xs = [torch.rand(batch, dims, device=device) for _ in range(n_inputs)]
    dy = torch.randn(batch, N_LEVELS * N_FEATURES, device=device, dtype=dtype)
    f = torch.compile(grid) if compiled else grid
    i = [0]
    if mode == "forward":
        def run():
            with torch.inference_mode():
                f(xs[i[0] % n_inputs])
            i[0] += 1
    else:
        def run():
            grid.table.grad = None
            f(xs[i[0] % n_inputs]).backward(dy)
            i[0] += 1
    med, lo, hi = (event_time if device == "cuda" else wall_time)(run, warmup, repeats)
    return {"median_s": med, "min_s": lo, "max_s": hi, "samples_per_s": batch / med}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--threads", type=int, help="cpu: torch.set_num_threads (default: torch's)")
    p.add_argument("--batches", help="default cuda 14,16,18,20,22; cpu 14,16")
    p.add_argument("--out", default="torch-hashgrid.json")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--no-compile", action="store_true")
    a = p.parse_args()
    cpu = a.device == "cpu"
    if cpu and a.threads:
        torch.set_num_threads(a.threads)
    batches = a.batches or ("14,16" if cpu else "14,16,18,20,22")
    warmup, repeats = ((1, 3) if a.quick else (3, 10)) if cpu else ((3, 10) if a.quick else (10, 50))
    copy_bw = copy_bandwidth(a.device, warmup, repeats)
    print(f"copy bandwidth {copy_bw / 1e9:.1f} GB/s", file=sys.stderr)
    results = []
    for dims in (2, 3):
        for lb in [int(b) for b in batches.split(",")]:
            for mode in ("forward", "forward+backward"):
                for compiled in ((False,) if a.no_compile else (False, True)):
                    name = f"torch {'compile' if compiled else 'eager'} HashGrid {dims}D {mode} batch 2^{lb}"
                    print(name, file=sys.stderr, flush=True)
                    try:
                        r = bench_case(a.device, dims, 1 << lb, mode, compiled, warmup, repeats)
                    except Exception as e:  # noqa: BLE001 - report and go on
                        r = {"error": str(e)[:300]}
                    r.update({"framework": "torch", "variant": "compile" if compiled else "eager",
                              "encoding": f"HashGrid {dims}D", "mode": mode, "batch": 1 << lb,
                              "precision": "fp32" if cpu else "fp16 params, fp32 math"})
                    results.append(r)
    doc = {"tool": "torch_hashgrid.py", "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
           "torch": torch.__version__, "device": "cpu" if cpu else torch.cuda.get_device_name(),
           "threads": torch.get_num_threads() if cpu else None,
           "config": {"n_levels": N_LEVELS, "n_features_per_level": N_FEATURES, "log2_hashmap_size": LOG2_T,
                      "base_resolution": BASE, "per_level_scale": SCALE},
           "ceilings": {"copy_bytes_per_s": copy_bw}, "results": results}
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(a.out)) or ".")
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, a.out)


if __name__ == "__main__":
    main()
