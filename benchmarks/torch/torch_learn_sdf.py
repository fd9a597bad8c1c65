#!/usr/bin/env python3
"""The learn-sdf job with the model in plain PyTorch, beside `tinyfuse learn-sdf`: steps/s and held-out error.

samples/learn_sdf.py's loop (the same shapes, batches, eikonal + surface + normal loss, held-out
errors and outputs), its model replaced by the CLI's default config written with ordinary tensor
ops: torch_workloads.py's hash grid (3-D, Smoothstep interpolation) and bias-free MLP (Softplus
with tiny-cuda-nn's sharpness 10), trained with torch.optim.Adam (the config's learning rate,
betas and epsilon). The eikonal term differentiates through torch.autograd.grad(...,
create_graph=True): PyTorch's own double backward, where the sample runs tinyfuse's second
derivatives. Eager mode only: torch.compile does not trace double backward.

Usage: torch_learn_sdf.py [--threads N] [sample options: --shape, --steps, --batch, --seed, --device, --out DIR, --quiet]
"""
import argparse
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "samples"))
import learn_sdf as sample  # noqa: E402
import torch_workloads as tw  # noqa: E402


class TorchSdfModel(torch.nn.Module):
    """encoding -> MLP, called as the sample calls tinyfuse.tcnn's NetworkWithInputEncoding."""

    def __init__(self, n_input_dims, n_output_dims, encoding_config, network_config, seed=1337):
        super().__init__()
        torch.manual_seed(seed)
        self.encoding, width = tw.encoding(encoding_config, n_input_dims, "cpu")
        self.network = tw.mlp(width, n_output_dims, network_config, "cpu")

    def forward(self, x):
        return self.network(self.encoding(x))

    @property
    def params(self):  # the sample logs params.numel()
        return torch.empty(sum(p.numel() for p in self.parameters()), device="meta")


def make_optimizer(model, config):
    opt = config.get("optimizer", {})
    return torch.optim.Adam(model.parameters(), lr=opt.get("learning_rate", 1e-3),
                            betas=(opt.get("beta1", 0.9), opt.get("beta2", 0.999)), eps=opt.get("epsilon", 1e-8))


def main():
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--threads", type=int)
    a, rest = p.parse_known_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    sample.tcnn.NetworkWithInputEncoding = TorchSdfModel
    sample.make_optimizer = make_optimizer
    if "--out" not in rest:
        rest += ["--out", "learn-sdf-torch-out"]
    code = sample.main(rest)
    out = rest[rest.index("--out") + 1]
    with open(os.path.join(out, "log.json")) as f:
        log = json.load(f)
    log["command"] = "benchmarks/torch/torch_learn_sdf.py (PyTorch model, eager)"
    log["torch_threads"] = torch.get_num_threads()
    with open(os.path.join(out, "log.json"), "w") as f:
        json.dump(log, f, indent=2)
    return code


if __name__ == "__main__":
    sys.exit(main())
