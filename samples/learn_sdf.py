#!/usr/bin/env python3
"""learn-sdf in PyTorch: the CLI's second job (`tinyfuse learn-sdf`) through tinyfuse.tcnn.

Fits a network f: [0, 1]^3 -> R to the signed distance of a surface (negative inside): the CLI's
built-in torus or union (exact distances known), or a points file ('x y z nx ny nz' per line,
Open3D's .xyzn, scaled into the cube, a tenth held out). Each step takes --batch surface points
and as many other points (half uniform, half near the surface) and minimises
    surface * mean |f| on the surface + eikonal * mean (|grad f| - 1)^2 elsewhere
    + normal * mean (1 - cos(grad f, n)) on the surface,
with grad f from torch.autograd.grad(..., create_graph=True): the loss's backward runs tinyfuse's
second derivatives. A few first steps fit the distance to the cube's centre (the CLI's
initialisation). Writes OUT/slices.png, OUT/loss.png, OUT/log.json (with the held-out mean
absolute distance error) and OUT/checkpoint.pt.

    python samples/learn_sdf.py [--shape torus|union | --points FILE] [--steps 500] [--batch 2048]
                                [--device cpu|cuda] [--out DIR]
"""

import argparse
import json
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from learn_image import floats_to_image, make_optimizer, save_png  # noqa: E402

import tinyfuse  # noqa: E402
import tinyfuse.tcnn as tcnn  # noqa: E402
from tinyfuse import _native  # noqa: E402

# ---- shapes: exact signed distances in unit-cube coordinates (as tools/cli/sdf_source.cpp) ----


def torus(p):
    q = p - 0.5
    ring = torch.sqrt(q[:, 0] ** 2 + q[:, 2] ** 2) - 0.25
    return torch.sqrt(ring ** 2 + q[:, 1] ** 2) - 0.1


def union(p):
    sphere = (p - p.new_tensor([0.32, 0.34, 0.5])).norm(dim=1) - 0.16
    q = (p - p.new_tensor([0.68, 0.64, 0.5])).abs() - p.new_tensor([0.13, 0.11, 0.15])
    box = q.clamp(min=0).norm(dim=1) + q.max(dim=1).values.clamp(max=0)
    a, b = p.new_tensor([0.3, 0.74, 0.3]), p.new_tensor([0.3, 0.74, 0.7])
    t = ((p - a) @ (b - a) / (b - a).dot(b - a)).clamp(0, 1)
    capsule = (p - a - t[:, None] * (b - a)).norm(dim=1) - 0.07
    return torch.minimum(torch.minimum(sphere, box), capsule)


SHAPES = {"torus": torus, "union": union}


def sample_surface(sdf, n, gen):
    """n points on the surface with outward normals: points of a thin band moved onto it along
    the distance's gradient (float64)."""
    points = []
    while sum(len(p) for p in points) < n:
        p = torch.rand(1 << 18, 3, dtype=torch.float64, generator=gen)
        p = p[sdf(p).abs() < 0.02]
        for _ in range(2):
            p.requires_grad_(True)
            d = sdf(p)
            (g,) = torch.autograd.grad(d.sum(), p)
            p = (p - d[:, None] * g / g.norm(dim=1, keepdim=True)).detach()
        points.append(p[sdf(p).abs() < 1e-9])
    p = torch.cat(points)[:n].requires_grad_(True)
    (g,) = torch.autograd.grad(sdf(p).sum(), p)
    return p.detach().float(), (g / g.norm(dim=1, keepdim=True)).float()


def read_points(path):
    """A points file: (training points, normals), (held-out points, normals), to-unit-cube info."""
    rows = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            words = line.split()
            if not words or words[0].startswith("#"):
                continue
            try:
                values = [float(w) for w in words]
            except ValueError:
                sys.exit(f"learn_sdf.py: {path} line {number}: not a number")
            if len(values) != 6 or not all(math.isfinite(v) for v in values):
                sys.exit(f"learn_sdf.py: {path} line {number}: expected 6 finite numbers 'x y z nx ny nz'")
            rows.append(values)
    if len(rows) < 20:
        sys.exit(f"learn_sdf.py: {path} holds {len(rows)} points; at least 20 are needed")
    data = torch.tensor(rows, dtype=torch.float64)
    lo, hi = data[:, :3].min(dim=0).values, data[:, :3].max(dim=0).values
    centre, scale = (lo + hi) / 2, 0.8 / (hi - lo).max().item()
    points = (0.5 + (data[:, :3] - centre) * scale).float()
    normals = data[:, 3:] / data[:, 3:].norm(dim=1, keepdim=True)
    if not torch.isfinite(normals).all():
        sys.exit(f"learn_sdf.py: {path}: a normal is zero")
    held = torch.arange(len(rows)) % 10 == 9
    return ((points[~held], normals[~held].float()), (points[held], normals[held].float()),
            {"centre_in_file": centre.tolist(), "scale": scale})


# ---- the model's field ---------------------------------------------------------------------------


def field(model, x):
    return model(x)[:, 0].float()


def field_and_gradient(model, x, create_graph):
    x = x.detach().requires_grad_(True)
    f = field(model, x)
    (g,) = torch.autograd.grad(f.sum(), x, create_graph=create_graph)
    return f, g.float()


@torch.no_grad()
def values(model, x, chunk=1 << 15):
    return torch.cat([field(model, x[i:i + chunk]) for i in range(0, len(x), chunk)])


def normal_angle_degrees(model, points, normals):
    _, g = field_and_gradient(model, points, create_graph=False)
    cos = (g * normals).sum(dim=1) / g.norm(dim=1).clamp_min(1e-30)
    return torch.rad2deg(torch.acos(cos.clamp(-1, 1))).mean().item()


def slices(model, sdf, device, size=256):
    """z, y and x = 0.5 side by side: orange outside, blue inside, the learned zero level set black
    and a built-in shape's exact one white (the CLI's picture, without its labels)."""
    t = (torch.arange(size, dtype=torch.float32) + 0.5) / size
    up, right = torch.meshgrid(1 - t, t, indexing="ij")
    panels = []
    for fixed, r, u in ((2, 0, 1), (1, 0, 2), (0, 2, 1)):
        p = torch.full((size * size, 3), 0.5)
        p[:, r], p[:, u] = right.reshape(-1), up.reshape(-1)
        d = values(model, p.to(device)).cpu().reshape(size, size)
        base = torch.where(d[..., None] >= 0, torch.tensor([0.95, 0.6, 0.25]), torch.tensor([0.3, 0.55, 0.95]))
        shade = (1 - torch.exp(-8 * d.abs())) * (0.85 + 0.15 * torch.cos(2 * math.pi * d / 0.04))
        rgb = 0.25 + 0.75 * base * shade[..., None]
        for level, colour in ((sdf(p.double()).float().reshape(size, size) if sdf else None, 1.0), (d, 0.0)):
            if level is None:
                continue
            s = level < 0
            edge = torch.zeros_like(s)
            edge[1:] |= s[1:] != s[:-1]
            edge[:-1] |= s[1:] != s[:-1]
            edge[:, 1:] |= s[:, 1:] != s[:, :-1]
            edge[:, :-1] |= s[:, 1:] != s[:, :-1]
            rgb[edge] = colour
        panels += [rgb, torch.ones(size, 8, 3)]
    return torch.cat([torch.ones(size, 8, 3)] + panels, dim=1)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", choices=sorted(SHAPES), help="a built-in shape (default torus)")
    p.add_argument("--points", help="a points file 'x y z nx ny nz' per line instead")
    p.add_argument("--config", help="tiny-cuda-nn JSON config {optimizer, encoding, network} (default: the CLI's)")
    p.add_argument("--steps", type=int, default=500)
    p.add_argument("--init-steps", type=int, default=50)
    p.add_argument("--batch", type=int, default=2048)
    p.add_argument("--surface-weight", type=float, default=1.0)
    p.add_argument("--eikonal-weight", type=float, default=1.0)
    p.add_argument("--normal-weight", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--out", default="learn-sdf-py-out")
    p.add_argument("--quiet", action="store_true")
    a = p.parse_args(argv)
    if a.shape and a.points:
        p.error("give --shape or --points, not both")
    t_start = time.perf_counter()

    if a.config:
        with open(a.config) as f:
            config = json.load(f)
    else:
        config = json.loads(_native.learn_sdf_default_config())
    if config.get("optimizer", {}).get("otype", "Adam") != "Adam":
        sys.exit("learn_sdf.py: this sample trains with Adam only (torch.optim.Adam)")
    device = torch.device(a.device)
    gen = torch.Generator().manual_seed(42)  # the shapes' point sets: the same for every run
    sdf = None
    if a.points:
        (train_p, train_n), (held_p, held_n), to_cube = read_points(a.points)
        surface_log = {"source": a.points, "training_points": len(train_p), "heldout_surface_points": len(held_p),
                       "to_unit_cube": to_cube}
    else:
        name = a.shape or "torus"
        sdf = SHAPES[name]
        train_p, train_n = sample_surface(sdf, 1 << 16, gen)
        held_p, held_n = sample_surface(sdf, 4096, gen)
        surface_log = {"source": f"built-in {name}", "training_points": len(train_p),
                       "heldout_surface_points": len(held_p)}
    train_p, train_n = train_p.to(device), train_n.to(device)

    model = tcnn.NetworkWithInputEncoding(3, 1, config["encoding"], config["network"], seed=a.seed).to(device)
    optimizer = make_optimizer(model, config)
    rng = torch.Generator(device=device).manual_seed(a.seed)

    def step(loss):
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    for _ in range(a.init_steps):  # towards the distance to the cube's centre
        x = torch.rand(2 * a.batch, 3, generator=rng, device=device)
        step((field(model, x) - (x - 0.5).norm(dim=1)).abs().mean())

    losses, train_seconds = [], 0.0
    for i in range(1, a.steps + 1):
        t0 = time.perf_counter()
        pick = torch.randint(len(train_p), (a.batch,), generator=rng, device=device)
        near = torch.randint(len(train_p), (a.batch // 2,), generator=rng, device=device)
        near = (train_p[near] + 0.05 * torch.randn(a.batch // 2, 3, generator=rng, device=device)).clamp(0, 1)
        uniform = torch.rand(a.batch - a.batch // 2, 3, generator=rng, device=device)
        f, g = field_and_gradient(model, torch.cat([train_p[pick], near, uniform]), create_graph=True)
        fs, gs, ge = f[:a.batch], g[:a.batch], g[a.batch:]
        cos = (gs * train_n[pick]).sum(dim=1) / gs.norm(dim=1).clamp_min(1e-30)
        loss = (a.surface_weight * fs.abs().mean() + a.eikonal_weight * (ge.norm(dim=1) - 1).square().mean()
                + a.normal_weight * (1 - cos).mean())
        step(loss)
        value = loss.item()
        train_seconds += time.perf_counter() - t0
        losses.append(value)
        if not math.isfinite(value):
            break
        if not a.quiet and (i % max(1, a.steps // 10) == 0 or i == a.steps):
            print(f"step {i}/{a.steps}  loss {value:.4e}  {i * 2 * a.batch / train_seconds:,.0f} points/s", flush=True)

    # Held-out: as the CLI, |learned - exact| in the volume and near the surface for a built-in shape,
    # |learned| on the held-out surface points, and the normals' angle there.
    held_p, held_n = held_p.to(device), held_n.to(device)
    heldout = {"surface_mae": values(model, held_p).abs().mean().item(),
               "normal_angle_deg": normal_angle_degrees(model, held_p, held_n)}
    if sdf:
        hg = torch.Generator().manual_seed(7)
        volume = torch.rand(16384, 3, generator=hg)
        near = (held_p.cpu().repeat_interleave(4, 0) + 0.03 * torch.randn(4 * len(held_p), 3, generator=hg)).clamp(0, 1)
        errors = [(values(model, q.to(device)).cpu().double() - sdf(q.double())).abs() for q in (volume, near)]
        heldout.update({"mae": torch.cat(errors).mean().item(), "volume_mae": errors[0].mean().item(),
                        "near_surface_mae": errors[1].mean().item()})
    else:
        heldout["mae"] = heldout["surface_mae"]

    os.makedirs(a.out, exist_ok=True)
    paths = {"slices": os.path.join(a.out, "slices.png"), "loss_plot": os.path.join(a.out, "loss.png")}
    save_png(slices(model, sdf, device), paths["slices"])
    w, h, plot = _native.loss_plot(losses)
    save_png(floats_to_image(plot, w, h), paths["loss_plot"])
    torch.save({"config": config, "model": model.state_dict(), "optimizer": optimizer.state_dict()},
               os.path.join(a.out, "checkpoint.pt"))
    log = {
        "tinyfuse_version": tinyfuse.__version__, "torch_version": torch.__version__, "command": "samples/learn_sdf.py",
        "config_source": a.config or "built-in default", "config": config, "device": a.device, "surface": surface_log,
        "seed": a.seed, "steps": a.steps, "steps_done": len(losses),
        "batch": {"surface_points": a.batch, "eikonal_points": a.batch},
        "loss_weights": {"surface": a.surface_weight, "eikonal": a.eikonal_weight, "normal": a.normal_weight},
        "n_params": model.params.numel(),
        "final_loss": losses[-1] if losses and math.isfinite(losses[-1]) else None, "heldout": heldout,
        "samples_per_second": len(losses) * 2 * a.batch / train_seconds if train_seconds else 0.0,
        "train_time_s": train_seconds, "wall_time_s": time.perf_counter() - t_start, "outputs": paths,
        "loss_per_step": [v if math.isfinite(v) else None for v in losses],
    }
    with open(os.path.join(a.out, "log.json"), "w") as f:
        json.dump(log, f, indent=2)
    if losses and not math.isfinite(losses[-1]):
        sys.exit(f"learn_sdf.py: training diverged at step {len(losses)} (try a lower learning_rate)")
    print(f"learn_sdf.py: {len(losses)} steps x {2 * a.batch} points in {train_seconds:.1f} s, final loss "
          f"{losses[-1]:.4e}, held-out mean |SDF error| {heldout['mae']:.4f}; wrote {a.out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
