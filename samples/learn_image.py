#!/usr/bin/env python3
"""learn-image in PyTorch: the CLI's main job (`tinyfuse learn-image`) through tinyfuse.tcnn.

Fits a network to a picture (pixel position in [0, 1]^2 -> RGB) with the CLI's default config
(hash grid + 64-wide MLP, L2 loss, tiny-cuda-nn's Adam: TcnnAdam below), on the CLI's built-in
256x256 test pattern or an --image (PNG/JPEG, needs Pillow). Each step trains on a batch of uniform random positions with
bilinearly interpolated target colours. Writes OUT/reconstruction.png, OUT/target.png,
OUT/loss.png, OUT/log.json and OUT/checkpoint.pt (model and optimizer state dicts).

    python samples/learn_image.py [--steps 1000] [--batch 8192] [--device cpu|cuda] [--out DIR]
                                  [--n-levels 16] [--log2-hashmap-size 15]
"""

import argparse
import json
import math
import os
import struct
import sys
import time
import zlib

import torch

import tinyfuse
import tinyfuse.tcnn as tcnn
from tinyfuse import _native


def save_png(rgb, path):
    """(height, width, 3) floats in [0, 1] -> 8-bit RGB PNG, written through a temporary file."""
    h, w, _ = rgb.shape
    pixels = (rgb.clamp(0, 1) * 255 + 0.5).to(torch.uint8).cpu()
    rows = torch.cat([torch.zeros(h, 1, dtype=torch.uint8), pixels.reshape(h, w * 3)], dim=1)  # filter 0
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(bytes(rows.reshape(-1).tolist()), 6))
           + chunk(b"IEND", b""))
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(png)
    os.replace(tmp, path)


def floats_to_image(data, width, height):
    return torch.frombuffer(bytearray(data), dtype=torch.float32).reshape(height, width, 3)


def load_image(path):
    try:
        from PIL import Image
    except ImportError:
        sys.exit("learn_image.py: --image needs Pillow (pip install pillow)")
    img = Image.open(path).convert("RGB")
    return torch.frombuffer(bytearray(img.tobytes()), dtype=torch.uint8).reshape(img.height, img.width, 3).float() / 255


def sample_bilinear(image, xy):
    """Colours at positions xy (x right, y down, in [0, 1]) between pixel centres, clamped at borders."""
    h, w, _ = image.shape
    u = (xy[:, 0] * w - 0.5).clamp(0, w - 1)
    v = (xy[:, 1] * h - 0.5).clamp(0, h - 1)
    x0, y0 = u.long().clamp(max=w - 1), v.long().clamp(max=h - 1)
    x1, y1 = (x0 + 1).clamp(max=w - 1), (y0 + 1).clamp(max=h - 1)
    fx, fy = (u - x0).unsqueeze(1), (v - y0).unsqueeze(1)
    top = image[y0, x0] + (image[y0, x1] - image[y0, x0]) * fx
    bottom = image[y1, x0] + (image[y1, x1] - image[y1, x0]) * fx
    return top + (bottom - top) * fy


@torch.no_grad()
def render(model, width, height, device, chunk=1 << 16):
    ys, xs = torch.meshgrid((torch.arange(height) + 0.5) / height, (torch.arange(width) + 0.5) / width, indexing="ij")
    xy = torch.stack([xs.reshape(-1), ys.reshape(-1)], dim=1).to(device)
    out = torch.cat([model(xy[i:i + chunk]).float() for i in range(0, xy.shape[0], chunk)])
    return out.cpu().reshape(height, width, 3)


def psnr(image, reference):
    image = torch.nan_to_num(image, nan=0.0).clamp(0, 1).double()
    mse = (image - reference.double()).square().mean().item()
    return 10 * math.log10(1 / mse) if mse > 0 else math.inf


def add_job_args(p):
    """The job's arguments that samples/ddp_learn_image.py shares."""
    p.add_argument("--config", help="tiny-cuda-nn JSON config {loss, optimizer, encoding, network} (default: the CLI's)")
    p.add_argument("--n-levels", type=int, help="override the encoding's n_levels (fewer: a smaller, faster model)")
    p.add_argument("--log2-hashmap-size", type=int, help="override the encoding's log2_hashmap_size")
    p.add_argument("--image", help="target picture (default: the CLI's built-in 256x256 test pattern)")
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--batch", type=int, default=1 << 13)
    p.add_argument("--seed", type=int, default=1337)


def load_config(a):
    """The config from --config or the CLI's default, with the command line's overrides; L2 + Adam only."""
    if a.config:
        with open(a.config) as f:
            config = json.load(f)
    else:
        config = json.loads(_native.learn_image_default_config())
    for key, value in (("n_levels", a.n_levels), ("log2_hashmap_size", a.log2_hashmap_size)):
        if value is not None:
            config["encoding"][key] = value
    if config.get("loss", {}).get("otype", "L2") != "L2":
        sys.exit("learn_image.py: this sample trains with the L2 loss only")
    if config.get("optimizer", {}).get("otype", "Adam") != "Adam":
        sys.exit("learn_image.py: this sample trains with Adam only (torch.optim.Adam)")
    return config


def load_target(a):
    return load_image(a.image) if a.image else floats_to_image(_native.test_pattern(256), 256, 256)


def make_model(config, seed):
    return tcnn.NetworkWithInputEncoding(2, 3, config["encoding"], config["network"], seed=seed)


class TcnnAdam(torch.optim.Optimizer):
    """tiny-cuda-nn's Adam, the one the CLI trains with, on tinyfuse.tcnn modules' flat ``params``.

    Where it differs from torch.optim.Adam (and changes what a hash grid learns):
    - l2_reg acts on the MLP's weight matrices only (the module's "matrix" param_segments), not on
      the hash-grid table or biases;
    - a non-matrix entry whose gradient is zero (a grid entry no sample of the batch touched) is
      skipped: its moments stay and it does not move; each entry keeps its own step counter, so its
      bias correction follows the steps it was trained in;
    - epsilon is added to sqrt(v) before the bias correction.
    All arithmetic in float32, as the C++ optimizer (core/optimizers/adam.h).
    """

    def __init__(self, modules, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, l2_reg=1e-8):
        modules = list(modules)
        super().__init__([m.params for m in modules], dict(lr=lr, betas=betas, eps=eps, l2_reg=l2_reg))
        self._segments = {id(m.params): m.param_segments() for m in modules}

    def _init_state(self, p):
        matrix = torch.zeros(p.numel(), dtype=torch.bool)
        for offset, count, kind in self._segments[id(p)]:
            if kind == "matrix":
                matrix[offset:offset + count] = True
        state = self.state[p]
        state["matrix"] = matrix.to(p.device)
        for key in ("exp_avg", "exp_avg_sq", "step"):
            state[key] = torch.zeros_like(p, dtype=torch.float32)
        return state

    @torch.no_grad()
    def step(self, closure=None):
        loss = None if closure is None else closure()
        for group in self.param_groups:
            lr, (beta1, beta2), eps, l2_reg = group["lr"], group["betas"], group["eps"], group["l2_reg"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p] or self._init_state(p)
                matrix, m, v, t = state["matrix"], state["exp_avg"], state["exp_avg_sq"], state["step"]
                w = p.float()
                g = p.grad.float()
                trained = matrix | (g != 0)
                g = torch.where(matrix, g + l2_reg * w, g)
                m.copy_(torch.where(trained, beta1 * m + (1 - beta1) * g, m))
                v.copy_(torch.where(trained, beta2 * v + (1 - beta2) * (g * g), v))
                t.add_(trained.float())
                tc = t.clamp(min=1)
                correction = torch.sqrt(1 - torch.pow(beta2, tc)) / (1 - torch.pow(beta1, tc))
                update = lr * correction / (torch.sqrt(v) + eps) * m
                p.copy_(torch.where(trained, w - update, w).to(p.dtype))
        return loss


def make_optimizer(model, config):
    """tiny-cuda-nn's Adam with the config's values, on `model` (a tinyfuse.tcnn module, or a
    DistributedDataParallel around one)."""
    opt_cfg = config.get("optimizer", {})
    return TcnnAdam([getattr(model, "module", model)], lr=opt_cfg.get("learning_rate", 1e-3),
                    betas=(opt_cfg.get("beta1", 0.9), opt_cfg.get("beta2", 0.999)),
                    eps=opt_cfg.get("epsilon", 1e-8), l2_reg=opt_cfg.get("l2_reg", 1e-8))


def sample_batch(gen, target, batch):
    """One step's batch: uniform random positions (from gen, on its device) and their target colours."""
    xy = torch.rand(batch, 2, generator=gen, device=target.device)
    return xy, sample_bilinear(target, xy)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_job_args(p)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--out", default="learn-image-py-out")
    p.add_argument("--quiet", action="store_true")
    a = p.parse_args(argv)
    t_start = time.perf_counter()

    config = load_config(a)
    device = torch.device(a.device)
    target = load_target(a)
    os.makedirs(a.out, exist_ok=True)
    paths = {"reconstruction": os.path.join(a.out, "reconstruction.png"), "loss_plot": os.path.join(a.out, "loss.png")}
    if not a.image:
        paths["target"] = os.path.join(a.out, "target.png")
        save_png(target, paths["target"])

    model = make_model(config, a.seed).to(device)
    optimizer = make_optimizer(model, config)
    target_dev = target.to(device)
    gen = torch.Generator(device=device).manual_seed(a.seed)

    losses, train_seconds = [], 0.0
    for step in range(1, a.steps + 1):
        t0 = time.perf_counter()
        xy, colours = sample_batch(gen, target_dev, a.batch)
        loss = (model(xy).float() - colours).square().mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        value = loss.item()
        train_seconds += time.perf_counter() - t0
        losses.append(value)
        if not math.isfinite(value):
            break
        if not a.quiet and (step % max(1, a.steps // 10) == 0 or step == a.steps):
            print(f"step {step}/{a.steps}  loss {value:.4e}  {step * a.batch / train_seconds:,.0f} samples/s", flush=True)

    reconstruction = render(model, target.shape[1], target.shape[0], device)
    quality = psnr(reconstruction, target)
    save_png(reconstruction, paths["reconstruction"])
    w, h, plot = _native.loss_plot(losses)
    save_png(floats_to_image(plot, w, h), paths["loss_plot"])
    torch.save({"config": config, "model": model.state_dict(), "optimizer": optimizer.state_dict()},
               os.path.join(a.out, "checkpoint.pt"))
    log = {
        "tinyfuse_version": tinyfuse.__version__, "torch_version": torch.__version__, "command": "samples/learn_image.py",
        "config_source": a.config or "built-in default", "config": config, "device": a.device,
        "image": {"source": a.image or "built-in test pattern", "width": target.shape[1], "height": target.shape[0]},
        "seed": a.seed, "steps": a.steps, "steps_done": len(losses), "batch": a.batch,
        "n_params": model.params.numel(),
        "final_loss": losses[-1] if losses and math.isfinite(losses[-1]) else None,
        "psnr_db": quality if math.isfinite(quality) else None,
        "samples_per_second": len(losses) * a.batch / train_seconds if train_seconds else 0.0,
        "train_time_s": train_seconds, "wall_time_s": time.perf_counter() - t_start, "outputs": paths,
        "loss_per_step": [v if math.isfinite(v) else None for v in losses],
    }
    with open(os.path.join(a.out, "log.json"), "w") as f:
        json.dump(log, f, indent=2)
    if losses and not math.isfinite(losses[-1]):
        sys.exit(f"learn_image.py: training diverged at step {len(losses)} (try a lower learning_rate)")
    print(f"learn_image.py: {len(losses)} steps x {a.batch} samples in {train_seconds:.1f} s "
          f"({log['samples_per_second']:,.0f} samples/s), final loss {losses[-1]:.4e}, PSNR {quality:.2f} dB; "
          f"wrote {a.out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
