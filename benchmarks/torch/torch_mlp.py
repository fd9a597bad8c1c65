#!/usr/bin/env python3
"""PyTorch baselines for tinyfuse-bench on the GPU, and the hardware ceilings, in one run.

Measures the same MLPs tinyfuse-bench measures (n -> n x2 -> n, ReLU, no output activation,
biases as nn.Linear has them) for inference and a full training step (forward, L2 loss, backward,
Adam), in eager mode, torch.compile and (inference) CUDA graphs, FP32 (true FP32: TF32 off) and FP16 (inference: half
weights; training: autocast AMP with an FP32 master). Timed with CUDA events after warm-up, median
of many runs, inputs rotated among several buffers so the L2 cache does not hold them.

Ceilings measured in the same run: device copy bandwidth (bytes read + written) and the matmul
rates of FP16 and FP32 (8192^3).

Usage: torch_mlp.py [--widths 64,128] [--batches 14,...,22] [--modes inference,training]
                   [--precisions fp32,fp16] [--queue-runs] [--out FILE.json] [--quick]
"""
import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile

import torch


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


def make_mlp(width, dtype):
    layers = [torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, width), torch.nn.ReLU(),
              torch.nn.Linear(width, width)]
    return torch.nn.Sequential(*layers).cuda().to(dtype)


def bench_case(width, batch, precision, mode, variant, warmup, repeats, queue_runs=False, n_inputs=4):
    torch.manual_seed(0)
    io_dtype = torch.float16 if precision == "fp16" else torch.float32
    model = make_mlp(width, torch.float16 if (precision == "fp16" and mode == "inference") else torch.float32)
    xs = [torch.randn(batch, width, device="cuda", dtype=io_dtype) for _ in range(n_inputs)]
    ys = [torch.randn(batch, width, device="cuda", dtype=torch.float32) for _ in range(n_inputs)]
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
        scaler = torch.amp.GradScaler("cuda", enabled=precision == "fp16")

        def step(x, y):
            with torch.autocast("cuda", dtype=torch.float16, enabled=precision == "fp16"):
                loss = ((model(x).float() - y) ** 2).mean()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)

        f = torch.compile(step) if variant == "compile" else step

        def run():
            f(xs[i[0] % n_inputs], ys[i[0] % n_inputs])
            i[0] += 1
    med, lo, hi = event_time(run, warmup, repeats, queue_runs)
    return {"median_s": med, "min_s": lo, "max_s": hi, "samples_per_s": batch / med}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--widths", default="64,128")
    p.add_argument("--batches", default="14,16,18,20,22")
    p.add_argument("--out", default="torch-mlp.json")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--no-graph", action="store_true", help="skip the CUDA-graph inference variant")
    p.add_argument("--modes", default="inference,training")
    p.add_argument("--precisions", default="fp32,fp16")
    p.add_argument("--queue-runs", action="store_true",
                   help="queue the timed runs back to back instead of waiting for each one")
    a = p.parse_args()
    for flag, given, known in (("--modes", a.modes, ("inference", "training")), ("--precisions", a.precisions, ("fp32", "fp16"))):
        unknown = [x for x in given.split(",") if x not in known]
        if unknown:
            p.error(f"{flag}: unknown {', '.join(unknown)} (known: {', '.join(known)})")
    torch.backends.cuda.matmul.allow_tf32 = False  # FP32 means FP32
    torch.backends.cudnn.allow_tf32 = False
    warmup, repeats = (3, 10) if a.quick else (10, 50)
    results = []
    ceil = ceilings(warmup, repeats)
    print(f"ceilings: copy {ceil['copy_bytes_per_s'] / 1e12:.2f} TB/s, fp16 matmul "
          f"{ceil['matmul_flops_per_s']['fp16'] / 1e12:.0f} TFLOP/s, fp32 {ceil['matmul_flops_per_s']['fp32'] / 1e12:.1f}",
          file=sys.stderr)
    doc = {"tool": "torch_mlp.py", "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
           "timing": "runs queued back to back" if a.queue_runs else "host waits for each run",
           "torch": torch.__version__, "device": torch.cuda.get_device_name(), "ceilings": ceil, "results": results}
    variants = ["eager"] + ([] if a.no_compile else ["compile"]) + ([] if a.no_graph else ["graph"])
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
                            r = bench_case(width, 1 << lb, precision, mode, variant, warmup, repeats, a.queue_runs)
                        except Exception as e:  # noqa: BLE001 - report and go on
                            r = {"error": str(e)[:300]}
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
