#!/usr/bin/env python3
"""The workload suite in PyTorch, beside tinyfuse-bench --workloads (benchmarks/workloads).

The same four models, read from the same files (benchmarks/workloads/configs), written with
ordinary tensor ops: W1 image (2-D HashGrid -> 64 x 2 MLP, RelativeL2), W2 OneBlob (OneBlob 64
bins -> 128 x 5 MLP, RelativeL2), W3 NeRF field (3-D HashGrid -> 64 x 1 MLP -> 16; SH degree 4 of
the direction; both concatenated -> 64 x 2 MLP -> RGB, Sigmoid; L2), W4 SDF (3-D HashGrid ->
64 x 2 MLP -> 1, L1), W4e (W4 with Softplus, trained with the eikonal step: L1 on half the batch,
weight * mean (|grad_x f| - 1)^2 on the other half, the input gradient from
torch.autograd.grad(create_graph=True) and the loss's backward through it). The hash grid is torch_hashgrid.py's; the MLPs have no biases, as
FullyFusedMLP. Each workload: a training step (forward, loss, backward, torch.optim.Adam with the
config's learning rate, betas and epsilon) and an inference pass, in eager mode and under
torch.compile, on the CPU (FP32) or CUDA (AMP: FP32 parameters, FP16 autocast, GradScaler).

Timing and data as tinyfuse-bench's workload rows: one untimed first step, then warm-up and timed
runs (median); inputs and targets from the workload's target field (the built-in picture through
tinyfuse._native, the procedural radiance field and SDF of benchmarks/workloads/targets.h) cycle
through buffers past the caches (CPU: twice the last-level cache, and the caches are written over
before the runs; CUDA: 256 MiB); CUDA runs between their own events, the host waiting for each.
Every training row records its loss per step (read after each timed run, untimed); every
inference row checks its outputs are finite and reports its loss against the target. W4e's
training rows run eager only: torch.compile (aot_autograd) raises "does not currently support
double backward"; its compile rows record that as their error (inference is compiled as usual).

benchmarks/python/tcnn_workloads.py runs the same workloads through tinyfuse.tcnn (or upstream
tinycudann) with this file's runner. The JSON goes to tinyfuse-bench --workload-compare.

Usage: torch_workloads.py [--device cpu|cuda] [--workloads W1,W3] [--batches 14] [--modes training]
                          [--variants eager,compile] [--warmup N] [--repeats N] [--quick] [--out F.json]
"""
import argparse
import datetime
import glob
import json
import math
import os
import statistics
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOAD_DIR = os.path.join(HERE, "..", "workloads", "configs")
sys.path.insert(0, HERE)
from torch_hashgrid import HashGrid  # noqa: E402

ROTATION_MIN_BUFFERS, ROTATION_MIN_BYTES = 4, 256 << 20  # as benchmarks/rotation.h


# ---------------------------------------------------------------------------------------------
# The workloads and their targets

def load_workloads(ids=None):
    """The workload files, in id order; `ids` (["W1", ...]) picks some."""
    specs = []
    for path in sorted(glob.glob(os.path.join(WORKLOAD_DIR, "w*.json"))):
        with open(path) as f:
            spec = json.load(f)
        spec["file"] = path
        specs.append(spec)
    specs.sort(key=lambda s: s["id"])
    if not ids or ids == ["all"]:
        return specs
    known = {s["id"]: s for s in specs}
    missing = [i for i in ids if i not in known]
    if missing:
        raise SystemExit(f"no workload {', '.join(missing)} in {WORKLOAD_DIR}; known: {', '.join(known)}")
    return [known[i] for i in ids]


_PATTERN = {}


def test_pattern(device):
    """learn-image's built-in 256 x 256 picture, (1, 3, H, W), from tinyfuse._native."""
    if device not in _PATTERN:
        from tinyfuse import _native
        rgb = torch.frombuffer(bytearray(_native.test_pattern(256)), dtype=torch.float32).reshape(256, 256, 3)
        _PATTERN[device] = rgb.permute(2, 0, 1).unsqueeze(0).contiguous().to(device)
    return _PATTERN[device]


def target_values(kind, x):
    """The targets of benchmarks/workloads/targets.h at inputs x (n, n_input_dims), FP32."""
    if kind == "image":
        # Bilinear between pixel centres, clamped at the borders: grid_sample, align_corners=False.
        grid = (x * 2 - 1).view(1, -1, 1, 2)
        out = torch.nn.functional.grid_sample(test_pattern(x.device), grid, mode="bilinear",
                                              padding_mode="border", align_corners=False)
        return out.view(3, -1).t().contiguous()
    if kind == "radiance":
        p, d = x[:, :3], 2 * x[:, 3:] - 1
        fine = 0.1 * torch.sin(16 * math.pi * p.sum(1, keepdim=True))
        coarse = torch.stack([torch.sin(2 * math.pi * (2 * p[:, c] + p[:, (c + 1) % 3])) for c in range(3)], 1)
        return 0.5 + 0.25 * coarse + fine + 0.1 * d
    if kind == "sdf":
        sphere = (x - torch.tensor([0.4, 0.5, 0.5], device=x.device)).norm(dim=1) - 0.25
        t = x - torch.tensor([0.65, 0.5, 0.5], device=x.device)
        ring = t[:, :2].norm(dim=1) - 0.2
        torus = torch.stack([ring, t[:, 2]], 1).norm(dim=1) - 0.06
        return torch.minimum(sphere, torus).unsqueeze(1)
    raise ValueError(f"unknown target {kind}")


def sample(spec, n, gen, device):
    """n training samples of the workload: inputs (n, n_input_dims) and targets (n, n_output_dims)."""
    kind = spec["target"]
    if kind == "radiance":
        p = torch.rand(n, 3, generator=gen)
        z = 2 * torch.rand(n, generator=gen) - 1
        phi = 2 * math.pi * torch.rand(n, generator=gen)
        r = (1 - z * z).clamp_min(0).sqrt()
        d = torch.stack([r * torch.cos(phi), r * torch.sin(phi), z], 1)
        x = torch.cat([p, (d + 1) / 2], 1)
    else:
        x = torch.rand(n, spec["n_input_dims"], generator=gen)
    x = x.to(device)
    return x, target_values(kind, x)


# ---------------------------------------------------------------------------------------------
# The models in PyTorch

class OneBlob(torch.nn.Module):
    """tinyfuse's OneBlob (docs/CONFIG.md): per input dim n_bins features, the share of the quartic
    kernel 15/16 (1 - u^2)^2, u = (t - x) n_bins, in each bin [k, k+1) / n_bins; [0, 1) wraps."""

    def __init__(self, n_bins, device):
        super().__init__()
        self.n_bins = n_bins
        self.register_buffer("edges", torch.arange(n_bins + 1, device=device, dtype=torch.float32))

    @staticmethod
    def _cdf(u):  # integral of the kernel from -1 to u
        u = u.clamp(-1, 1)
        return 15 / 16 * (u - 2 * u ** 3 / 3 + u ** 5 / 5) + 0.5

    def forward(self, x):  # (B, D) -> (B, D * n_bins), dimension-major
        u = self.edges - x.unsqueeze(-1) * self.n_bins  # (B, D, n_bins + 1)
        share = 0
        for shift in (-self.n_bins, 0, self.n_bins):  # the wrapped neighbours
            c = self._cdf(u + shift)
            share = share + c[..., 1:] - c[..., :-1]
        return share.flatten(1)


class SphericalHarmonics(torch.nn.Module):
    """Degree 4 (16 real harmonics, band by band, Condon-Shortley sign) of (2x - 1), as tinyfuse's."""

    def forward(self, x):
        x, y, z = (2 * x - 1).unbind(1)
        xy, xz, yz, x2, y2, z2 = x * y, x * z, y * z, x * x, y * y, z * z
        return torch.stack([
            torch.full_like(x, 0.28209479177387814), -0.48860251190291987 * y, 0.48860251190291987 * z,
            -0.48860251190291987 * x, 1.0925484305920792 * xy, -1.0925484305920792 * yz,
            0.94617469575755997 * z2 - 0.31539156525251999, -1.0925484305920792 * xz,
            0.54627421529603959 * x2 - 0.54627421529603959 * y2, 0.59004358992664352 * y * (-3.0 * x2 + y2),
            2.8906114426405538 * xy * z, 0.45704579946446572 * y * (1.0 - 5.0 * z2),
            0.3731763325901154 * z * (5.0 * z2 - 3.0), 0.45704579946446572 * x * (1.0 - 5.0 * z2),
            1.4453057213202769 * z * (x2 - y2), 0.59004358992664352 * x * (-x2 + 3.0 * y2)], 1)


def mlp(n_in, n_out, net, device):
    """FullyFusedMLP's shape: n_hidden_layers hidden layers of n_neurons, no biases."""
    # Softplus as tiny-cuda-nn (and tinyfuse) define it: log(1 + exp(10 x)) / 10.
    acts = {"None": None, "ReLU": torch.nn.ReLU, "Sigmoid": torch.nn.Sigmoid,
            "Softplus": lambda: torch.nn.Softplus(beta=10.0)}
    layers, width = [], n_in
    for _ in range(net["n_hidden_layers"]):
        layers += [torch.nn.Linear(width, net["n_neurons"], bias=False), acts[net.get("activation", "ReLU")]()]
        width = net["n_neurons"]
    layers.append(torch.nn.Linear(width, n_out, bias=False))
    out_act = acts[net.get("output_activation", "None")]
    if out_act:
        layers.append(out_act())
    return torch.nn.Sequential(*layers).to(device)


def encoding(cfg, n_in, device):
    """(module, output width) of an encoding config."""
    otype = cfg["otype"]
    if otype in ("HashGrid", "Grid"):
        g = HashGrid(n_in, cfg.get("n_levels", 16), cfg.get("n_features_per_level", 2), cfg.get("log2_hashmap_size", 19),
                     cfg.get("base_resolution", 16), cfg.get("per_level_scale", 2.0), device=device, dtype=torch.float32,
                     smoothstep=cfg.get("interpolation", "Linear") == "Smoothstep")
        return g, cfg.get("n_levels", 16) * cfg.get("n_features_per_level", 2)
    if otype == "OneBlob":
        return OneBlob(cfg["n_bins"], device), n_in * cfg["n_bins"]
    if otype == "SphericalHarmonics":
        return SphericalHarmonics(), cfg["degree"] ** 2
    raise ValueError(f"no PyTorch {otype} here")


class NerfField(torch.nn.Module):
    """W3: density network outputs, then the direction's harmonics, into the colour network."""

    def __init__(self, density, direction, color):
        super().__init__()
        self.density, self.direction, self.color = density, direction, color

    def forward(self, x):
        return self.color(torch.cat([self.density(x[:, :3]), self.direction(x[:, 3:])], 1))


def torch_model(spec, device):
    cfg = spec["config"]
    if "density" in cfg:
        d = cfg["density"]
        enc, width = encoding(d["encoding"], 3, device)
        density = torch.nn.Sequential(enc, mlp(width, d["n_output_dims"], d["network"], device))
        direction, dir_width = encoding(cfg["direction_encoding"], 3, device)
        color = mlp(d["n_output_dims"] + dir_width, spec["n_output_dims"], cfg["color_network"], device)
        return NerfField(density, direction, color)
    enc, width = encoding(cfg["encoding"], spec["n_input_dims"], device)
    return torch.nn.Sequential(enc, mlp(width, spec["n_output_dims"], cfg["network"], device))


EIKONAL_NOT_COMPILED = ("not run: torch.compile with aot_autograd does not support double backward "
                        "(the eikonal step differentiates the input gradient); see the eager row")


def eikonal_weight(spec):
    """The eikonal term's weight of a workload trained with the eikonal step, else None."""
    step = spec.get("step", {"otype": "Supervised"})
    return step["eikonal_weight"] if step["otype"] == "Eikonal" else None


def variant_name(variant, spec, eikonal_gradient):
    """A row's variant: with '-fd' where an eikonal workload takes grad_x f by central differences."""
    return variant + ("-fd" if eikonal_gradient == "fd" and eikonal_weight(spec) is not None else "")


def eikonal_loss(model, x, y, weight):
    """benchmarks/workloads/eikonal_step.h's loss: mean |f - t| over the first half of the rows,
    weight * mean (|grad_x f| - 1)^2 over the second; the input gradient kept in the graph. Each
    half is its own forward: only the eikonal rows' input gradient is formed and differentiated."""
    half = x.shape[0] // 2
    f = model(x[:half])[:, :1].float()
    xe = x[half:].detach().requires_grad_(True)
    fe = model(xe)[:, :1].float()
    (grad,) = torch.autograd.grad(fe, xe, torch.ones_like(fe), create_graph=True)
    l1 = (f - y[:half]).abs().mean()
    eik = ((grad.float().norm(dim=1) - 1) ** 2).mean()
    return l1 + weight * eik


# The finite-difference workaround's step: instant-nsr-pl's and sdfstudio's order of magnitude
# (NeuS-family code anneals it from ~1e-2 towards the finest grid cell, 1 / 7,000 here).
FD_STEP = 1e-3


def eikonal_loss_fd(model, x, y, weight, h=FD_STEP):
    """The same loss with grad_x f by central differences, as tiny-cuda-nn's users train SDFs
    without second derivatives: six more forward passes over the eikonal rows (one batched call),
    a first-order backward only."""
    half = x.shape[0] // 2
    f = model(x[:half])[:, :1].float()
    xe = x[half:]
    offsets = torch.eye(3, device=x.device, dtype=x.dtype) * h
    shifted = torch.cat([xe + o for o in offsets] + [xe - o for o in offsets])
    fe = model(shifted)[:, :1].float().view(6, -1)
    grad = ((fe[:3] - fe[3:]) / (2 * h)).t()
    l1 = (f - y[:half]).abs().mean()
    eik = ((grad.norm(dim=1) - 1) ** 2).mean()
    return l1 + weight * eik


def adam_optimizer(params, opt_cfg, **options):
    """torch.optim.Adam with the config's learning rate, betas and epsilon (`options`: Adam's own,
    e.g. fused=True)."""
    return torch.optim.Adam(params, lr=opt_cfg["learning_rate"],
                            betas=(opt_cfg.get("beta1", 0.9), opt_cfg.get("beta2", 0.999)),
                            eps=opt_cfg.get("epsilon", 1e-8), **options)


def loss_function(otype):
    """tinyfuse's losses (docs/CONFIG.md): means over batch x outputs; RelativeL2's normaliser held
    constant in the gradient."""
    if otype == "L2":
        return lambda p, t: ((p - t) ** 2).mean()
    if otype == "L1":
        return lambda p, t: (p - t).abs().mean()
    if otype == "RelativeL2":
        return lambda p, t: ((p - t) ** 2 / (p.detach() ** 2 + 0.01)).mean()
    raise ValueError(f"no PyTorch {otype} here")


# ---------------------------------------------------------------------------------------------
# Timing and the rows

def largest_cpu_cache():
    """cpu0's largest data or unified cache in bytes, from sysfs (0 when it does not say)."""
    best = 0
    for d in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*"):
        try:
            kind = open(os.path.join(d, "type")).read().strip()
            size = open(os.path.join(d, "size")).read().strip()
        except OSError:
            continue
        if kind == "Instruction" or not size:
            continue
        unit = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(size[-1], 1)
        best = max(best, int(size.rstrip("KMG")) * unit)
    return best


class Timer:
    """Runs and times work on a device, as tinyfuse-bench's RunTimer."""

    def __init__(self, device):
        self.device = device
        self.cuda = device.type == "cuda"
        self.rotation_bytes = ROTATION_MIN_BYTES if self.cuda else max(ROTATION_MIN_BYTES, 2 * largest_cpu_cache())
        self._scratch = None

    def slots(self, bytes_per_run, runs):
        need = max(ROTATION_MIN_BUFFERS, self.rotation_bytes // max(bytes_per_run, 1) + 1)
        return max(1, min(need, runs))

    def evict(self):
        if not self.cuda:
            if self._scratch is None:
                self._scratch = torch.empty(self.rotation_bytes, dtype=torch.uint8)
            self._scratch.fill_((int(time.time()) & 0x7F) + 1)

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def time(self, warmup, repeats, work, after=None):
        """Median, min, max seconds of work(i) over `repeats` runs after `warmup`; after(i) untimed."""
        run, times = 0, []
        for _ in range(warmup):
            work(run)
            run += 1
            self.sync()
        for _ in range(repeats):
            if self.cuda:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                work(run)
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) / 1e3)
            else:
                t0 = time.perf_counter()
                work(run)
                times.append(time.perf_counter() - t0)
            if after:
                after(run)
            run += 1
        return statistics.median(times), min(times), max(times)


def run_workload(spec, build, variant, device, batches, modes, warmup, repeats, compiled=False, amp=False,
                 seed=1337, log=print, eikonal_gradient="analytic", fused_step=None):
    """The rows of one workload for one implementation: `build(spec, device)` gives the model (a
    torch.nn.Module); training rows first (a fresh model each), then inference on the last trained
    model. Returns the JSON records. An eikonal workload's step takes grad_x f by double backward
    (eikonal_gradient "analytic") or by central differences ("fd", eikonal_loss_fd).
    `fused_step(model, spec)`, when given, replaces the PyTorch loss and optimizer: it returns a
    step function of (x, y) whose result has .item() (the step's loss, read after the timing)."""
    if eikonal_gradient not in ("analytic", "fd"):
        raise ValueError(f"eikonal_gradient: {eikonal_gradient!r} (analytic, fd)")
    fd = eikonal_gradient == "fd"
    timer = Timer(device)
    cfg = spec["config"]
    loss_fn = loss_function(cfg["loss"]["otype"])
    opt_cfg = cfg["optimizer"]
    runs = warmup + repeats
    records, trained, trained_steps = [], None, 0

    def record(mode, batch, **fields):
        r = {"variant": variant, "workload": spec["id"], "name": spec["name"], "mode": mode, "batch": batch,
             "device": device.type}
        r.update(fields)
        records.append(r)
        log(f"  {variant} {spec['id']} {mode} batch 2^{int(math.log2(batch))}: "
            + (f"{r['samples_per_s'] / 1e3:.3f} k samples/s" if "samples_per_s" in r else f"failed: {r.get('error')}"))
        return r

    def autocast():
        return torch.autocast("cuda", dtype=torch.float16, enabled=amp)

    for mode in ("training", "inference"):
        if mode not in modes:
            continue
        for lb in batches[mode]:
            batch = 1 << lb
            try:
                if compiled:
                    # Each row compiles afresh: Dynamo's caches would otherwise collect one entry per
                    # (workload, batch, mode) of the shared step function until its recompile limit
                    # (8), past which it runs the rest eagerly under the compile row's name.
                    torch._dynamo.reset()
                torch.manual_seed(seed)
                gen = torch.Generator().manual_seed(seed + batch)
                if mode == "training" and eikonal_weight(spec) is not None and compiled and not fd:
                    record(mode, batch, error=EIKONAL_NOT_COMPILED)
                    continue
                if mode == "training":
                    model = build(spec, device)
                    trainer_step = fused_step(model, spec) if fused_step is not None else None
                    opt = adam_optimizer(model.parameters(), opt_cfg) if trainer_step is None else None
                    scaler = torch.amp.GradScaler("cuda", enabled=amp)

                    weight = eikonal_weight(spec)

                    def forward_loss(x, y, model=model, weight=weight):
                        if weight is not None:
                            return (eikonal_loss_fd if fd else eikonal_loss)(model, x, y, weight)
                        return loss_fn(model(x).float(), y)

                    fl = torch.compile(forward_loss, dynamic=False) if compiled else forward_loss
                    count = timer.slots(batch * 4 * (spec["n_input_dims"] + spec["n_output_dims"]), runs + 1)
                    data = [sample(spec, batch, gen, device) for _ in range(count)]
                    timer.sync()
                    timer.evict()
                    holder = {}

                    # The eikonal step's x is a leaf that requires its gradient: backward into the
                    # parameters only, as tinyfuse's step (no dL/dx through the double backward).
                    params = list(model.parameters()) if weight is not None and not fd else None

                    def step(i, fl=fl, opt=opt, scaler=scaler, data=data, params=params, trainer_step=trainer_step):
                        x, y = data[i % len(data)]
                        if trainer_step is not None:
                            holder["loss"] = trainer_step(x, y)
                            return
                        with autocast():
                            loss = fl(x, y)
                        opt.zero_grad(set_to_none=True)
                        scaler.scale(loss).backward(inputs=params)
                        scaler.step(opt)
                        scaler.update()
                        holder["loss"] = loss

                    t0 = time.perf_counter()
                    step(0)  # the untimed first step (and, compiled, the compilation)
                    first = holder["loss"].item()
                    first_seconds = time.perf_counter() - t0
                    losses = []
                    med, lo, hi = timer.time(warmup, repeats, lambda i: step(i + 1),
                                             lambda i: losses.append(holder["loss"].item()))
                    tail = max(1, len(losses) // 3)
                    late = sum(losses[-tail:]) / tail
                    record(mode, batch, samples_per_s=batch / med, median_s=med, min_s=lo, max_s=hi,
                           first_loss=first, last_loss=losses[-1], losses=losses,
                           loss_fell=all(math.isfinite(v) for v in losses) and late < first,
                           first_call_seconds=first_seconds)
                    trained, trained_steps = model, 1 + runs
                else:
                    model = trained if trained is not None else build(spec, device)
                    f = torch.compile(model, dynamic=False) if compiled else model
                    count = timer.slots(batch * 4 * spec["n_input_dims"], runs)
                    xs = [sample(spec, batch, gen, device)[0] for _ in range(count)]
                    outs = {}

                    def infer(i, f=f, xs=xs):
                        with torch.inference_mode(), autocast():
                            outs["y"] = f(xs[i % len(xs)])

                    t0 = time.perf_counter()
                    infer(0)  # compiled: the compilation
                    timer.sync()
                    first_seconds = time.perf_counter() - t0
                    timer.evict()
                    med, lo, hi = timer.time(warmup, repeats, infer)
                    last = (warmup + repeats - 1) % len(xs)
                    y = outs["y"].float()
                    rows = min(256, batch)
                    ref = target_values(spec["target"], xs[last][:rows])
                    record(mode, batch, samples_per_s=batch / med, median_s=med, min_s=lo, max_s=hi,
                           finite=bool(torch.isfinite(y).all()),
                           loss_vs_target=loss_fn(y[:rows, :spec["n_output_dims"]], ref).item(),
                           trained_steps=trained_steps, first_call_seconds=first_seconds)
            except Exception as e:  # noqa: BLE001 - report and go on
                record(mode, batch, error=f"{type(e).__name__}: {str(e)[:300]}")
    return records


def default_batches(spec, device, override):
    if override:
        return {"training": override, "inference": override}
    return spec["batches"][device.type]


def write_json(doc, path):
    folder = os.path.dirname(os.path.abspath(path)) or "."
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder)
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, path)


def common_arguments(p):
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--workloads", default="all", help="W1,W2,W3,W4,W4e or all")
    p.add_argument("--batches", help="log2 batch sizes for every workload and mode (default: the workload files')")
    p.add_argument("--modes", default="training,inference")
    p.add_argument("--warmup", type=int)
    p.add_argument("--repeats", type=int)
    p.add_argument("--quick", action="store_true", help="cpu: 1 warm-up + 3 timed runs; cuda: 3 + 10")
    p.add_argument("--eikonal-gradient", default="analytic", choices=("analytic", "fd"),
                   help="W4e's grad_x f: double backward, or central differences (six more forwards; "
                        "variant names get '-fd')")
    p.add_argument("--out", required=True)


def plan(a):
    """(device, workloads, batches override, modes, warmup, repeats) from the common arguments, with
    tinyfuse-bench's defaults (cpu 3 + 10, cuda 10 + 50)."""
    device = torch.device(a.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no GPU here")
    modes = a.modes.split(",")
    bad = [m for m in modes if m not in ("training", "inference")]
    if bad:
        raise SystemExit(f"--modes: unknown {', '.join(bad)} (training, inference)")
    gpu = device.type == "cuda"
    warmup = a.warmup if a.warmup is not None else (3 if gpu else 1) if a.quick else (10 if gpu else 3)
    repeats = a.repeats if a.repeats is not None else (10 if gpu else 3) if a.quick else (50 if gpu else 10)
    override = [int(b) for b in a.batches.split(",")] if a.batches else None
    return device, load_workloads(a.workloads.split(",")), override, modes, warmup, repeats


def header(tool, device):
    return {"tool": tool, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(), "torch": torch.__version__,
            "device": device.type, "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "threads": torch.get_num_threads(), "load_average_start": list(os.getloadavg()), "results": []}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common_arguments(p)
    p.add_argument("--variants", default="eager,compile")
    a = p.parse_args()
    device, specs, override, modes, warmup, repeats = plan(a)
    doc = header("torch_workloads.py", device)
    doc["precision"] = "fp32" if device.type == "cpu" else "AMP: fp32 parameters, fp16 autocast, GradScaler"
    for variant in a.variants.split(","):
        if variant not in ("eager", "compile"):
            raise SystemExit(f"--variants: unknown {variant} (eager, compile)")
        for spec in specs:
            doc["results"] += run_workload(spec, torch_model, variant_name("torch-" + variant, spec, a.eikonal_gradient), device,
                                           default_batches(spec, device, override), modes, warmup, repeats,
                                           compiled=variant == "compile", amp=device.type == "cuda",
                                           log=lambda s: print(s, file=sys.stderr, flush=True),
                                           eikonal_gradient=a.eikonal_gradient)
            write_json(doc, a.out)  # after every workload: a run cut short keeps what it measured
    doc["load_average_end"] = list(os.getloadavg())
    write_json(doc, a.out)


if __name__ == "__main__":
    main()
