#!/usr/bin/env python3
"""PyTorch baselines for tinyfuse-bench on the GPU (or the CPU), and the hardware ceilings, in one run.

Measures the same MLPs tinyfuse-bench measures (n -> n x2 -> n, ReLU, no output activation,
biases as nn.Linear has them) for inference and a full training step (forward, L2 loss, backward,
Adam), in eager mode, torch.compile and (inference) CUDA graphs, FP32 (true FP32: TF32 off) and FP16 (inference: half
weights; training: autocast AMP with an FP32 master). Timed with CUDA events after warm-up, median
of many runs, inputs rotated among several buffers so the L2 cache does not hold them.

Ceilings measured in the same run: device copy bandwidth (bytes read + written) and the matmul
rates of FP16 and FP32 (8192^3).

With --device cpu: FP32 only, eager and torch.compile, each run timed with the wall clock, on
--threads threads (default: torch's); the ceiling is the FP32 matmul rate (1024^3), as
tinyfuse-bench --device cpu measures its sgemm peak. --no-bias drops nn.Linear's biases (tinyfuse's
networks have none).

Usage: torch_mlp.py [--device cuda|cpu] [--widths 64,128] [--batches 14,...,22] [--modes inference,training]
                   [--precisions fp32,fp16] [--queue-runs] [--out FILE.json] [--quick] [--threads N] [--no-bias]
"""
import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile
import time

import torch


def wall_time(fn, warmup, repeats):
    """Median, min and max wall-clock seconds of fn() on the CPU over `repeats` runs after `warmup`."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times), max(times)


def cpu_ceilings(warmup, repeats):
    m, k = torch.randn(1024, 1024), torch.randn(1024, 1024)
    med, _, _ = wall_time(lambda: m @ k, warmup, repeats)
    return {"matmul_flops_per_s": {"fp32": 2 * 1024 ** 3 / med}}


def event_time(fn, warmup, repeats, queue_runs=False):
    """Median, min and max seconds of fn() over `repeats` runs after `warmup` runs, each run between
    its own pair of events. The host waits for each run before queuing the next (as tinyfuse-bench
    does by default), or with queue_runs queues them back to back (tinyfuse-bench --queue-runs)."""
    for _ in range(warmup):
        fn()
        if not queue_runs:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    events = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        if not queue_runs:
            end.synchronize()
        events.append((start, end))
    torch.cuda.synchronize()
    times = [start.elapsed_time(end) / 1e3 for start, end in events]
    return statistics.median(times), min(times), max(times)


def ceilings(warmup, repeats):
    n = 1 << 30  # 2 GiB of fp16 per buffer: far past the L2
    a = torch.empty(n, dtype=torch.float16, device="cuda").uniform_()
    b = torch.empty_like(a)
    med, _, _ = event_time(lambda: b.copy_(a), warmup, repeats)
    copy_bw = 2 * a.numel() * a.element_size() / med
    del a, b
    rates = {}
    for name, dtype in (("fp16", torch.float16), ("fp32", torch.float32)):
        m = torch.randn(8192, 8192, device="cuda", dtype=dtype)
        k = torch.randn(8192, 8192, device="cuda", dtype=dtype)
        med, _, _ = event_time(lambda: m @ k, warmup, repeats)
        rates[name] = 2 * 8192 ** 3 / med
    return {"copy_bytes_per_s": copy_bw, "matmul_flops_per_s": rates}


def make_mlp(width, dtype, device="cuda", bias=True):
    layers = [torch.nn.Linear(width, width, bias=bias), torch.nn.ReLU(), torch.nn.Linear(width, width, bias=bias),
              torch.nn.ReLU(), torch.nn.Linear(width, width, bias=bias)]
    return torch.nn.Sequential(*layers).to(device).to(dtype)


def bench_case(width, batch, precision, mode, variant, warmup, repeats, queue_runs=False, n_inputs=4, device="cuda",
               bias=True):
    torch.manual_seed(0)
    io_dtype = torch.float16 if precision == "fp16" else torch.float32
    model = make_mlp(width, torch.float16 if (precision == "fp16" and mode == "inference") else torch.float32, device,
                     bias)
    xs = [torch.randn(batch, width, device=device, dtype=io_dtype) for _ in range(n_inputs)]
    ys = [torch.randn(batch, width, device=device, dtype=torch.float32) for _ in range(n_inputs)]
    i = [0]
    if mode == "inference" and variant == "graph":
        # One CUDA graph per rotated input: launch overhead gone, the kernels are eager's.
        model.eval()
        graphs = []
        with torch.inference_mode():
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for x in xs:
                    model(x)  # warm-up on a side stream, as capture requires
            torch.cuda.current_stream().wait_stream(side)
            for x in xs:
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    model(x)
                graphs.append(g)

        def run():
            graphs[i[0] % n_inputs].replay()
            i[0] += 1
    elif mode == "inference":
        model.eval()
        f = torch.compile(model) if variant == "compile" else model

        def run():
            with torch.inference_mode():
                f(xs[i[0] % n_inputs])
            i[0] += 1
    else:
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        scaler = torch.amp.GradScaler(device, enabled=precision == "fp16")

        def step(x, y):
            with torch.autocast(device, dtype=torch.float16, enabled=precision == "fp16"):
                loss = ((model(x).float() - y) ** 2).mean()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)

        f = torch.compile(step) if variant == "compile" else step

        def run():
            f(xs[i[0] % n_inputs], ys[i[0] % n_inputs])
            i[0] += 1
    med, lo, hi = wall_time(run, warmup, repeats) if device == "cpu" else event_time(run, warmup, repeats, queue_runs)
    return {"median_s": med, "min_s": lo, "max_s": hi, "samples_per_s": batch / med}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--threads", type=int, help="cpu: torch.set_num_threads (default: torch's)")
    p.add_argument("--no-bias", action="store_true", help="nn.Linear without biases, as tinyfuse's networks")
    p.add_argument("--widths", help="default cuda 64,128; cpu 64")
    p.add_argument("--batches", help="default cuda 14,16,18,20,22; cpu 14,16")
    p.add_argument("--out", default="torch-mlp.json")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--no-graph", action="store_true", help="skip the CUDA-graph inference variant")
    p.add_argument("--modes", default="inference,training")
    p.add_argument("--precisions", help="default cuda fp32,fp16; cpu fp32")
    p.add_argument("--queue-runs", action="store_true",
                   help="queue the timed runs back to back instead of waiting for each one")
    a = p.parse_args()
    cpu = a.device == "cpu"
    a.widths = a.widths or ("64" if cpu else "64,128")
    a.batches = a.batches or ("14,16" if cpu else "14,16,18,20,22")
    a.precisions = a.precisions or ("fp32" if cpu else "fp32,fp16")
    if cpu and a.threads:
        torch.set_num_threads(a.threads)
    for flag, given, known in (("--modes", a.modes, ("inference", "training")), ("--precisions", a.precisions, ("fp32", "fp16"))):
        unknown = [x for x in given.split(",") if x not in known]
        if unknown:
            p.error(f"{flag}: unknown {', '.join(unknown)} (known: {', '.join(known)})")
    torch.backends.cuda.matmul.allow_tf32 = False  # FP32 means FP32
    torch.backends.cudnn.allow_tf32 = False
    warmup, repeats = ((1, 3) if a.quick else (3, 10)) if cpu else ((3, 10) if a.quick else (10, 50))
    results = []
    ceil = cpu_ceilings(warmup, repeats) if cpu else ceilings(warmup, repeats)
    if cpu:
        print(f"ceiling: fp32 matmul {ceil['matmul_flops_per_s']['fp32'] / 1e9:.1f} GFLOP/s on {torch.get_num_threads()} "
              "threads", file=sys.stderr)
    else:
        print(f"ceilings: copy {ceil['copy_bytes_per_s'] / 1e12:.2f} TB/s, fp16 matmul "
          f"{ceil['matmul_flops_per_s']['fp16'] / 1e12:.0f} TFLOP/s, fp32 {ceil['matmul_flops_per_s']['fp32'] / 1e12:.1f}",
          file=sys.stderr)
    doc = {"tool": "torch_mlp.py", "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
           "timing": "wall clock per run" if cpu else "runs queued back to back" if a.queue_runs else "host waits for each run",
           "torch": torch.__version__, "device": "cpu" if cpu else torch.cuda.get_device_name(),
           "threads": torch.get_num_threads() if cpu else None, "bias": not a.no_bias, "ceilings": ceil, "results": results}
    variants = ["eager"] + ([] if a.no_compile else ["compile"]) + ([] if a.no_graph or cpu else ["graph"])
    for width in [int(w) for w in a.widths.split(",")]:
        for lb in [int(b) for b in a.batches.split(",")]:
            for mode in [m for m in ("inference", "training") if m in a.modes.split(",")]:
                for precision in [q for q in ("fp32", "fp16") if q in a.precisions.split(",")]:
                    for variant in variants:
                        if variant == "graph" and mode == "training":
                            continue  # graphs of a whole Adam step need capturable optimizers: not measured
                        name = f"torch {variant} {precision} {mode} width {width} batch 2^{lb}"
                        print(name, file=sys.stderr, flush=True)
                        try:
                            r = bench_case(width, 1 << lb, precision, mode, variant, warmup, repeats, a.queue_runs,
                                           device=a.device, bias=not a.no_bias)
                        except Exception as e:  # noqa: BLE001 - report and go on
                            r = {"error": str(e)[:300]}
                        print(f"  {r.get('samples_per_s', 0) / 1e3:,.1f} k samples/s" if "error" not in r else r["error"],
                              file=sys.stderr, flush=True)
                        r.update({"framework": "torch", "variant": variant,
                                  "precision": precision, "mode": mode, "width": width, "batch": 1 << lb})
                        results.append(r)
                        write_json(doc, a.out)  # after every case: a run cut short keeps what it measured


def write_json(doc, path):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)) or ".")
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, path)

if __name__ == "__main__":
    main()
