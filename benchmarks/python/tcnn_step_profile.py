#!/usr/bin/env python3
"""Where a tinyfuse.tcnn training step's time goes: host time per phase (model, loss, backward,
optimizer step), synced and queued; CUDA-event time per step; torch.profiler tables by self CPU and
self CUDA time. The workloads of benchmarks/workloads/ (W1 by default), stepped by torch.optim.Adam
(--fused-adam: its fused kernel) as tcnn_workloads.py steps them.

    python benchmarks/python/tcnn_step_profile.py --device cuda [--workload W1] [--log2 18] [--out F.json]
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "benchmarks", "torch"))
sys.path.insert(0, os.path.join(ROOT, "benchmarks", "python"))
import torch_workloads as tw  # noqa: E402
import tcnn_workloads as tcw  # noqa: E402
import importlib  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--device", default="cuda")
p.add_argument("--workload", default="W1")
p.add_argument("--log2", type=int, default=18)
p.add_argument("--module", default="tinyfuse.tcnn")
p.add_argument("--out", help="write the figures as JSON to this file")
p.add_argument("--fused-adam", action="store_true")
p.add_argument("--steps", type=int, default=50, help="steps per measured loop (the profiler takes 20)")
a = p.parse_args()
dev = torch.device(a.device)
cuda = dev.type == "cuda"
tcnn = importlib.import_module(a.module)
spec = tw.load_workloads([a.workload])[0]
model = tcw.tcnn_model(tcnn, spec, dev, False)
cfg = spec["config"]
opt = tw.adam_optimizer(model.parameters(), cfg["optimizer"], **({"fused": True} if a.fused_adam else {}))
loss_fn = tw.loss_function(cfg["loss"]["otype"])
weight = tw.eikonal_weight(spec)
params = list(model.parameters()) if weight is not None else None
n = 1 << a.log2
gen = torch.Generator().manual_seed(1)
data = [tw.sample(spec, n, gen, dev) for _ in range(8)]
for m in model.modules():
    for name, prm in m.named_parameters(recurse=False):
        print("param", type(m).__name__, name, tuple(prm.shape), prm.dtype, "module dtype", getattr(m, "dtype", None),
              "loss_scale", getattr(m, "loss_scale", None))


def sync():
    if cuda:
        torch.cuda.synchronize()


def step(i, parts=None):
    x, y = data[i % len(data)]
    t0 = time.perf_counter()
    if weight is not None:
        t1 = time.perf_counter()
        loss = tw.eikonal_loss(model, x, y, weight)
    else:
        out = model(x)
        t1 = time.perf_counter()
        loss = loss_fn(out.float(), y)
    t2 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    loss.backward(inputs=params)
    t3 = time.perf_counter()
    opt.step()
    t4 = time.perf_counter()
    if parts is not None:
        parts.append((t1 - t0, t2 - t1, t3 - t2, t4 - t3))
    return loss


for i in range(10):
    step(i)
sync()
# Host time per phase, no sync inside (the GPU runs behind).
parts = []
for i in range(a.steps):
    step(i, parts)
    sync()
med = [statistics.median(p[k] for p in parts) * 1e6 for k in range(4)]
print("host us per phase (synced after each step): forward %.0f loss %.0f backward %.0f adam %.0f total %.0f" %
      (*med, sum(med)))
result = {"workload": a.workload, "batch": n, "device": str(dev), "fused_adam": a.fused_adam,
          "torch": torch.__version__, "host_us_synced": dict(zip(("model", "loss", "backward", "optimizer"), med))}
parts = []
sync()
t0 = time.perf_counter()
for i in range(a.steps):
    step(i, parts)
t_enq = time.perf_counter() - t0
sync()
t_all = time.perf_counter() - t0
med = [statistics.median(p[k] for p in parts) * 1e6 for k in range(4)]
print("host us per phase (queued): forward %.0f loss %.0f backward %.0f adam %.0f" % tuple(med))
print("queued: enqueue %.0f us/step, wall %.0f us/step" % (t_enq / a.steps * 1e6, t_all / a.steps * 1e6))
result["host_us_queued"] = dict(zip(("model", "loss", "backward", "optimizer"), med))
result["queued_us_per_step"] = {"enqueue": t_enq / a.steps * 1e6, "wall": t_all / a.steps * 1e6}
if cuda:
    times = []
    for i in range(30):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        step(i)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1e3)
    event_us = statistics.median(times)
    print("bench-style per-step event time: median %.0f us -> %.1f M samples/s" % (event_us, n / event_us))
    result["event_us_per_step"] = event_us
    result["samples_per_second"] = n / event_us * 1e6

from torch.profiler import ProfilerActivity, profile  # noqa: E402

acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
with profile(activities=acts, record_shapes=False) as prof:
    for i in range(20):
        step(i)
    sync()
table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=60)
print(table)
if cuda:
    print(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=40))
if a.out:
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)
