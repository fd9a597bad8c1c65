#!/usr/bin/env python3
"""The learn-image job in plain PyTorch, beside `tinyfuse learn-image`: steps/s and PSNR of the same model.

The CLI's default config (or --config): its hash grid and MLP written with ordinary tensor ops
(torch_workloads.py's HashGrid and bias-free nn.Linear stack, FP32), trained with the L2 loss and
torch.optim.Adam (the config's learning rate, betas and epsilon; its l2_reg as weight decay on the
MLP's weights only, as tiny-cuda-nn applies it), on batches drawn as samples/learn_image.py draws
them from the same built-in picture, eager or under torch.compile. After the steps the picture is
rendered at full resolution and its PSNR against the target reported, as the CLI does.

Timing: the wall clock over the training steps only (torch.compile's first-step compilation is
reported apart and left out), on --threads threads.

Usage: torch_learn_image.py [--variant eager|compile] [--steps 1000] [--batch 8192] [--threads N]
                            [--seed 1337] [--config FILE] [--out FILE.json]
"""
import argparse
import datetime
import json
import math
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "samples"))
import learn_image as sample  # noqa: E402  the sample's picture, batches, rendering and PSNR
import torch_workloads as tw  # noqa: E402  the PyTorch hash grid and MLP

from tinyfuse import _native  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--variant", default="eager", choices=["eager", "compile"])
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--batch", type=int, default=1 << 13)
    p.add_argument("--threads", type=int)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--config", help="tiny-cuda-nn JSON config (default: the CLI's)")
    p.add_argument("--out", default="torch-learn-image.json")
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    if a.config:
        with open(a.config) as f:
            config = json.load(f)
    else:
        config = json.loads(_native.learn_image_default_config())
    if config["loss"].get("otype", "L2") != "L2" or config["optimizer"].get("otype", "Adam") != "Adam":
        sys.exit("torch_learn_image.py: L2 and Adam only, as the CLI's default")
    target = sample.floats_to_image(_native.test_pattern(256), 256, 256)
    enc, width = tw.encoding(config["encoding"], 2, "cpu")
    net = tw.mlp(width, 3, config["network"], "cpu")
    model = torch.nn.Sequential(enc, net)
    opt = config["optimizer"]
    optimizer = torch.optim.Adam(
        [{"params": list(enc.parameters()), "weight_decay": 0.0},
         {"params": list(net.parameters()), "weight_decay": opt.get("l2_reg", 0.0)}],
        lr=opt.get("learning_rate", 1e-3), betas=(opt.get("beta1", 0.9), opt.get("beta2", 0.999)),
        eps=opt.get("epsilon", 1e-8))
    gen = torch.Generator().manual_seed(a.seed)

    def step(xy, colours):
        loss = (model(xy) - colours).square().mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss

    run = torch.compile(step) if a.variant == "compile" else step
    losses, train_s, first_s = [], 0.0, 0.0
    for i in range(a.steps):
        xy, colours = sample.sample_batch(gen, target, a.batch)
        t0 = time.perf_counter()
        value = run(xy, colours).item()
        dt = time.perf_counter() - t0
        if i == 0:
            first_s = dt  # compilation under torch.compile
        else:
            train_s += dt
        losses.append(value)
        if not math.isfinite(value):
            break
    with torch.no_grad():
        reconstruction = sample.render(model, target.shape[1], target.shape[0], torch.device("cpu"))
    quality = sample.psnr(reconstruction, target)
    steps_per_s = (len(losses) - 1) / train_s if train_s else 0.0
    doc = {"tool": "torch_learn_image.py", "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
           "torch": torch.__version__, "threads": torch.get_num_threads(), "variant": a.variant, "config": config,
           "steps": a.steps, "steps_done": len(losses), "batch": a.batch, "seed": a.seed,
           "first_step_s": first_s, "train_time_s": train_s, "steps_per_s": steps_per_s,
           "samples_per_s": steps_per_s * a.batch, "final_loss": losses[-1] if losses else None,
           "psnr_db": quality if math.isfinite(quality) else None}
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"torch {a.variant}: {len(losses)} steps x {a.batch} in {train_s:.1f} s after a first step of "
          f"{first_s:.1f} s ({steps_per_s:.1f} steps/s), final loss {losses[-1]:.4e}, PSNR {quality:.2f} dB")


if __name__ == "__main__":
    main()
