#!/usr/bin/env python3
"""The workload suite through tinycudann's PyTorch API: tinyfuse.tcnn, or upstream tinycudann.

The same workloads as tinyfuse-bench --workloads and benchmarks/torch/torch_workloads.py
(whose data, timing and rows this uses), built as tinycudann's users build them:
tcnn.NetworkWithInputEncoding for W1, W2, W4 and W4e (its eikonal step through the module's
double backward, torch_workloads.eikonal_loss; upstream tinycudann has none, and its row says so;
--eikonal-gradient fd: the finite-difference workaround its users train with instead, six more
forward passes, variant "...-fd"); for W3 a NetworkWithInputEncoding (density), a
tcnn.Encoding (the direction's harmonics) and a tcnn.Network (colour) joined by torch.cat, as
nerfstudio does. The loss is computed in PyTorch on the module's output and the parameters are
stepped by torch.optim.Adam (the config's learning rate, betas, epsilon), as tiny-cuda-nn's own
PyTorch sample does; the modules scale their loss themselves (no autocast, no GradScaler).

--module tinyfuse.tcnn (default; variant "tinyfuse.tcnn") measures this project's binding: with
tinyfuse-bench's C++ figure of the same run, how much the Python layer costs (goal: within 10 % at
2^18). --module tinycudann (upstream, built and installed outside this repository; variants
"tinycudann" and, with --jit-fusion on, "tinycudann-jit") fills the upstream tiny-cuda-nn columns
on a GPU where upstream's own programs do not cover a row (scripts/gpu/tinyfuse-gpu workloads).

--fused-trainer (tinyfuse.tcnn only; variant "tinyfuse.tcnn-fused"): the training rows step with
tinyfuse.tcnn.FusedTrainer (the config's loss and optimizer in tinyfuse's C++ Trainer, one native
call per step, unchecked as torch.optim's steps are) instead of a PyTorch loss and torch.optim.Adam.
It trains one module: W3's three joined modules and W4e's eikonal step are rows that say so.

Usage: tcnn_workloads.py [--module tinyfuse.tcnn|tinycudann] [--jit-fusion on|off] [--fused-trainer] [--device cpu|cuda]
                         [--workloads W1,W3] [--batches 18] [--modes training] [--quick]
                         [--eikonal-gradient analytic|fd] --out F.json
"""
import argparse
import importlib
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "torch"))
import torch_workloads as tw  # noqa: E402


def tcnn_model(tcnn, spec, device, jit_fusion):
    cfg = spec["config"]
    if "density" in cfg:
        d = cfg["density"]
        density = tcnn.NetworkWithInputEncoding(3, d["n_output_dims"], d["encoding"], d["network"])
        direction = tcnn.Encoding(3, cfg["direction_encoding"])
        color = tcnn.Network(d["n_output_dims"] + direction.n_output_dims, spec["n_output_dims"], cfg["color_network"])
        model = tw.NerfField(density, direction, color)
    else:
        model = tcnn.NetworkWithInputEncoding(spec["n_input_dims"], spec["n_output_dims"], cfg["encoding"], cfg["network"])
    for m in model.modules():
        if hasattr(m, "jit_fusion") and not isinstance(m, tw.NerfField):
            m.jit_fusion = jit_fusion
    return model.to(device)


def fused_step(tcnn):
    """run_workload's fused_step for tinyfuse.tcnn.FusedTrainer."""
    def make(model, spec):
        if not isinstance(model, tcnn.Module):
            raise tcnn.UnsupportedError("FusedTrainer trains one module; this workload joins several")
        if tw.eikonal_weight(spec) is not None:
            raise tcnn.UnsupportedError("FusedTrainer's step is supervised (loss on the output); the eikonal "
                                        "step differentiates the input gradient")
        cfg = spec["config"]
        trainer = tcnn.FusedTrainer(model, cfg["loss"], cfg["optimizer"])

        class LastLoss:
            item = staticmethod(trainer.loss)

        def step(x, y):
            trainer.step(x, y, check=False)
            return LastLoss
        return step
    return make


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    tw.common_arguments(p)
    p.add_argument("--module", default="tinyfuse.tcnn", choices=("tinyfuse.tcnn", "tinycudann"))
    p.add_argument("--jit-fusion", default="off", choices=("on", "off"))
    p.add_argument("--fused-trainer", action="store_true", help="train with tinyfuse.tcnn.FusedTrainer")
    a = p.parse_args()
    if a.fused_trainer and a.module != "tinyfuse.tcnn":
        raise SystemExit("--fused-trainer: tinyfuse.tcnn only (tinycudann has no such trainer)")
    device, specs, override, modes, warmup, repeats = tw.plan(a)
    tcnn = importlib.import_module(a.module)
    jit = a.jit_fusion == "on"
    if jit and not tcnn.supports_jit_fusion():
        raise SystemExit(f"--jit-fusion on: {a.module}.supports_jit_fusion() is False here")
    if a.module == "tinyfuse.tcnn":
        variant, via = "tinyfuse.tcnn", "tinyfuse.tcnn"
        if a.fused_trainer:
            variant, via = "tinyfuse.tcnn-fused", "tinyfuse.tcnn.FusedTrainer"
    else:
        variant, via = ("tinycudann-jit" if jit else "tinycudann"), f"tinycudann Python, JIT fusion {a.jit_fusion}"
    doc = tw.header("tcnn_workloads.py", device)
    doc.update({"module": a.module, "module_file": getattr(tcnn, "__file__", None), "jit_fusion": jit, "via": via})
    for spec in specs:
        records = tw.run_workload(spec, lambda s, dev: tcnn_model(tcnn, s, dev, jit),
                                  tw.variant_name(variant, spec, a.eikonal_gradient), device, tw.default_batches(spec, device, override), modes, warmup, repeats,
                                  log=lambda s: print(s, file=sys.stderr, flush=True), eikonal_gradient=a.eikonal_gradient,
                                  fused_step=fused_step(tcnn) if a.fused_trainer else None)
        for r in records:
            r["via"] = via
        doc["results"] += records
        tw.write_json(doc, a.out)
    doc["load_average_end"] = list(os.getloadavg())
    tw.write_json(doc, a.out)


if __name__ == "__main__":
    main()
