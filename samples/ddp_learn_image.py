#!/usr/bin/env python3
"""learn-image under PyTorch's DistributedDataParallel: samples/learn_image.py's job on several processes.

Every rank draws the same global batch (same seed, same generator) and trains on its contiguous
share of it (rank r: rows [r*B/W, (r+1)*B/W)), so the ranks' samples together are exactly the
batch one process would draw; DDP averages the gradients, so each step is the single-process step
on the whole batch, up to float32 summation order. Rank 0 prints the loss averaged over the ranks
(the whole batch's loss) and the samples/s, and writes OUT/log.json, OUT/reconstruction.png; each
rank writes OUT/final_params_rank<r>.pt (its parameters after the last step, for comparison).

    python samples/ddp_learn_image.py --backend gloo --nproc 2 [--steps 200] [--batch 8192] [--out DIR]
    python samples/ddp_learn_image.py --backend nccl --nproc 2     # one GPU per process
    torchrun --nproc-per-node 2 samples/ddp_learn_image.py --backend nccl

--backend gloo trains on the CPU, nccl on CUDA (rank r on GPU LOCAL_RANK). Without torchrun's
variables it starts --nproc processes itself, meeting at 127.0.0.1 on a free port.
"""

import argparse
import gc
import json
import math
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import learn_image as job  # noqa: E402  (the image, config, model, optimizer and batch code)

import tinyfuse  # noqa: E402


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    job.add_job_args(p)  # --batch is the global batch, split over the ranks
    p.add_argument("--backend", choices=["gloo", "nccl"],
                   help="gloo: train on the CPU; nccl: on CUDA (default: nccl when a GPU is visible)")
    p.add_argument("--nproc", type=int, default=2, help="processes to start (ignored under torchrun)")
    p.add_argument("--threads", type=int,
                   help="CPU threads per process for gloo (default: the cores divided by the processes)")
    p.add_argument("--log-every", type=int, help="print the loss every N steps (default: steps/10)")
    p.add_argument("--init-seed-per-rank", action="store_true",
                   help="rank r initialises with seed+r: DDP's broadcast of rank 0's parameters must undo it")
    p.add_argument("--out", default="ddp-learn-image-out")
    p.add_argument("--quiet", action="store_true")
    a = p.parse_args(argv)
    if a.backend is None:
        a.backend = "nccl" if torch.cuda.is_available() else "gloo"
    return a


def free_port():
    """A port free on 127.0.0.1 now (the OS's pick); the rendezvous binds it moments later."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def set_thread_env(a, world):
    """Before any rank starts: gloo ranks share the machine's cores (OpenBLAS and tinyfuse's pool
    read these at start-up); NVLink SHARP (NVLS) off for NCCL, as the GPU hosts here need."""
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    if a.backend == "gloo":
        threads = a.threads or max(1, (os.cpu_count() or 1) // world)
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TINYFUSE_NUM_THREADS"):
            os.environ.setdefault(var, str(threads))


def train(rank, world, local_rank, a):
    if a.backend == "gloo":
        torch.set_num_threads(int(os.environ["TINYFUSE_NUM_THREADS"]))
        device = torch.device("cpu")
    else:
        if not torch.cuda.is_available() or local_rank >= torch.cuda.device_count():
            sys.exit(f"ddp_learn_image.py: --backend nccl needs a GPU per process; rank {rank} wants GPU "
                     f"{local_rank}, {torch.cuda.device_count()} visible")
        torch.cuda.set_device(local_rank)  # before the module: its objects and pool live on this GPU
        device = torch.device("cuda", local_rank)
    dist.init_process_group(a.backend, rank=rank, world_size=world)
    try:
        return run(rank, world, device, a)
    finally:
        # Free the DDP wrapper (its reference cycles hold the process group and the last
        # collective's tensors) while the interpreter is whole: else gloo's worker thread may
        # release those tensors during interpreter shutdown, and taking the GIL then ends the
        # thread mid-destructor, which aborts the process (torch 2.15: 3 of 19 test runs here).
        gc.collect()
        dist.destroy_process_group()


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run(rank, world, device, a):
    if a.batch % world:
        sys.exit(f"ddp_learn_image.py: --batch {a.batch} must be a multiple of the {world} processes")
    config = job.load_config(a)
    target = job.load_target(a)
    model = job.make_model(config, a.seed + (rank if a.init_seed_per_rank else 0)).to(device)
    initial_sums = [torch.zeros(1, dtype=torch.float64, device=device) for _ in range(world)]
    dist.all_gather(initial_sums, model.params.detach().double().sum().reshape(1))
    # DDP broadcasts rank 0's parameters into every rank's `params` in place; tinyfuse's native
    # objects read the parameters from that tensor on each call, so they follow.
    ddp = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = job.make_optimizer(ddp, config)
    target_dev = target.to(device)
    gen = torch.Generator(device=device).manual_seed(a.seed)
    share = a.batch // world
    rows = slice(rank * share, (rank + 1) * share)
    log_every = a.log_every or max(1, a.steps // 10)

    losses, pending = [], []  # the whole batch's loss per step; this rank's losses not yet reduced
    t_first = t_rest = time.perf_counter()
    for step in range(1, a.steps + 1):
        xy, colours = job.sample_batch(gen, target_dev, a.batch)
        loss = (ddp(xy[rows]).float() - colours[rows]).square().mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()  # DDP all-reduces the gradients (their mean over the ranks) here
        optimizer.step()
        pending.append(loss.detach())
        if step == 1:  # the first step builds native objects and DDP's buckets: timed apart
            sync(device)
            t_rest = time.perf_counter()
            t_first = t_rest - t_first
        if step % log_every == 0 or step == a.steps:
            mean = torch.stack(pending)
            dist.all_reduce(mean)
            losses += (mean / world).tolist()
            pending = []
            if rank == 0 and not a.quiet:
                rate = (step - 1) * a.batch / (time.perf_counter() - t_rest) if step > 1 else 0.0
                print(f"step {step}/{a.steps}  loss {losses[-1]:.6e}  {rate:,.0f} samples/s", flush=True)
            if not math.isfinite(losses[-1]):
                break
    sync(device)
    t_rest = time.perf_counter() - t_rest
    steps_done = len(losses)

    params = model.params.detach().cpu()
    os.makedirs(a.out, exist_ok=True)
    torch.save(params, os.path.join(a.out, f"final_params_rank{rank}.pt"))
    # Bitwise agreement across ranks, checked by rank 0 (all_gather works on both backends).
    gathered = [torch.empty_like(model.params) for _ in range(world)]
    dist.all_gather(gathered, model.params.detach())
    if rank != 0:
        return 0

    identical = all(torch.equal(g.cpu(), params) for g in gathered)
    reconstruction = job.render(model, target.shape[1], target.shape[0], device)
    quality = job.psnr(reconstruction, target)
    job.save_png(reconstruction, os.path.join(a.out, "reconstruction.png"))
    rate = (steps_done - 1) * a.batch / t_rest if steps_done > 1 and t_rest > 0 else 0.0
    log = {
        "tinyfuse_version": tinyfuse.__version__, "torch_version": torch.__version__,
        "command": "samples/ddp_learn_image.py", "backend": a.backend, "world_size": world,
        "device": str(device) if device.type == "cpu" else f"cuda (one GPU per rank, {torch.cuda.get_device_name(device)})",
        "threads_per_rank": torch.get_num_threads() if device.type == "cpu" else None,
        "config": config, "seed": a.seed, "init_seed_per_rank": a.init_seed_per_rank,
        "steps": a.steps, "steps_done": steps_done, "global_batch": a.batch, "batch_per_rank": share,
        "n_params": params.numel(), "params_identical_across_ranks": identical,
        "initial_param_sums_before_broadcast": [t.item() for t in initial_sums],
        "first_step_s": t_first, "train_time_s_after_first_step": t_rest,
        "samples_per_second": rate,  # over the steps after the first, all ranks together
        "final_loss": losses[-1] if losses and math.isfinite(losses[-1]) else None,
        "psnr_db": quality if math.isfinite(quality) else None,
        "loss_per_step": [v if math.isfinite(v) else None for v in losses],
    }
    with open(os.path.join(a.out, "log.json"), "w") as f:
        json.dump(log, f, indent=2)
    print(f"ddp_learn_image.py: {world} x {a.backend}, {steps_done} steps x {a.batch} samples ({share} per rank), "
          f"{rate:,.0f} samples/s after the first step, final loss {losses[-1]:.6e}, PSNR {quality:.2f} dB, "
          f"parameters {'identical' if identical else 'DIFFERENT'} across ranks; wrote {a.out}/", flush=True)
    if not identical:
        return 1
    return 0 if losses and math.isfinite(losses[-1]) else 1


def spawned(index, world, a):
    """mp.spawn's entry: process `index` of `world`, on one host."""
    code = train(index, world, index, a)
    if code:
        sys.exit(code)


def main(argv=None):
    a = parse(argv)
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # started by torchrun (or alike)
        world = int(os.environ["WORLD_SIZE"])
        set_thread_env(a, int(os.environ.get("LOCAL_WORLD_SIZE", world)))
        return train(int(os.environ["RANK"]), world, int(os.environ.get("LOCAL_RANK", 0)), a)
    if a.nproc < 1:
        sys.exit("ddp_learn_image.py: --nproc must be at least 1")
    set_thread_env(a, a.nproc)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(free_port())
    if a.backend == "gloo" and os.path.exists("/sys/class/net/lo"):
        # gloo's rank-to-rank links pick the host name's interface otherwise: keep them on loopback.
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    mp.spawn(spawned, args=(a.nproc, a), nprocs=a.nproc, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
