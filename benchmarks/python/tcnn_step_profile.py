#!/usr/bin/env python3
"""Where a tinyfuse.tcnn training step's time goes: host time per phase (model, loss, backward,
optimizer step), synced and queued; CUDA-event time per step; torch.profiler tables by self CPU and
self CUDA time. The workloads of benchmarks/workloads/ (W1 by default), stepped by torch.optim.Adam
(--fused-adam: its fused kernel) as tcnn_workloads.py steps them. --graph also captures the whole
step (model, loss, backward, Adam with capturable=True) in one CUDA graph, as PyTorch's whole-network
capture recipe does, and times its replays: the step without the host's per-op costs.

    python benchmarks/python/tcnn_step_profile.py --device cuda [--workload W1] [--log2 18] [--graph] [--out F.json]
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
p.add_argument("--graph", action="store_true", help="also time the step captured in one CUDA graph (cuda only)")
a = p.parse_args()
if a.graph and a.device != "cuda":
    p.error("--graph captures a CUDA graph: it needs --device cuda")
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


def event_median_us(work, runs):
    """Median microseconds of work(i) for i < runs, each between its own pair of CUDA events and
    waited for before the next (as tinyfuse-bench times a row)."""
    times = []
    for i in range(runs):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        work(i)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1e3)
    return statistics.median(times)


if cuda:
    event_us = event_median_us(step, 30)
    print("bench-style per-step event time: median %.0f us -> %.1f M samples/s" % (event_us, n / event_us))
    result["event_us_per_step"] = event_us
    result["samples_per_second"] = n / event_us * 1e6


def workload_loss(x, y):
    """The workload's loss of the model on (x, y), as step() forms it in its timed phases."""
    return tw.eikonal_loss(model, x, y, weight) if weight is not None else loss_fn(model(x).float(), y)


def graph_step_time():
    """The whole step captured in one CUDA graph on static tensors (PyTorch's whole-network recipe:
    warm-up on a side stream, capture, replay), Adam with capturable=True. Checked first: from the
    same parameters, GRAPH_CHECK_STEPS replays and as many eager steps (a fresh Adam each) give the
    same losses. Returns the median event time of a replay with its batch copied in, and the
    largest relative difference of the two loss trajectories."""
    start = [prm.detach().clone() for prm in model.parameters()]

    def restore():
        with torch.no_grad():
            for prm, saved in zip(model.parameters(), start):
                prm.copy_(saved)

    gopt = tw.adam_optimizer(model.parameters(), cfg["optimizer"], capturable=True)
    sx, sy = data[0][0].clone(), data[0][1].clone()

    def graph_body():
        gopt.zero_grad(set_to_none=False)
        gloss = workload_loss(sx, sy)
        gloss.backward(inputs=params)
        gopt.step()
        return gloss

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            graph_body()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_loss = graph_body()

    def replay(i):
        x, y = data[i % len(data)]
        sx.copy_(x)
        sy.copy_(y)
        graph.replay()

    # The check: replays from the saved parameters and a zeroed Adam state, then eager steps.
    restore()
    for st in gopt.state.values():
        for v in st.values():
            if torch.is_tensor(v):
                v.zero_()
    graph_losses = []
    for i in range(GRAPH_CHECK_STEPS):
        replay(i)
        graph_losses.append(static_loss.item())
    restore()
    eopt = tw.adam_optimizer(model.parameters(), cfg["optimizer"])
    eager_losses = []
    for i in range(GRAPH_CHECK_STEPS):
        x, y = data[i % len(data)]
        eopt.zero_grad(set_to_none=True)
        eloss = workload_loss(x, y)
        eloss.backward(inputs=params)
        eopt.step()
        eager_losses.append(eloss.item())
    diff = max(abs(g - e) / max(abs(e), 1e-30) for g, e in zip(graph_losses, eager_losses))
    if not diff <= GRAPH_CHECK_TOLERANCE:
        raise RuntimeError(f"replays and eager steps differ by {diff:.3g} (losses {graph_losses} vs {eager_losses})")
    return event_median_us(replay, 40), diff


# Replays against eager steps: the same first losses up to FP16 rounding and the order of the
# grid's atomics, which ten steps of Adam barely amplify.
GRAPH_CHECK_STEPS = 10
GRAPH_CHECK_TOLERANCE = 1e-2

if a.graph:
    try:
        graph_us, diff = graph_step_time()
        print("CUDA graph of the whole step: median %.0f us -> %.1f M samples/s (first %d losses within %.2g of "
              "eager steps')" % (graph_us, n / graph_us, GRAPH_CHECK_STEPS, diff))
        result["graph"] = {"event_us_per_step": graph_us, "samples_per_second": n / graph_us * 1e6,
                           "loss_check_steps": GRAPH_CHECK_STEPS, "loss_relative_difference": diff}
    except Exception as exc:  # noqa: BLE001 - the reason capture fails is the finding
        print(f"CUDA graph of the whole step: failed: {type(exc).__name__}: {exc}")
        result["graph"] = {"error": f"{type(exc).__name__}: {exc}"}

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
