#!/usr/bin/env python3
"""The cost of the PyTorch binding: tinyfuse.tcnn modules against the C++ API called directly.

For each network and batch, three loops run the same native object on the same buffers:
- C++: `iters` calls of DifferentiableObject::inference (or forward + backward with parameter
  gradients) in a C++ loop (_native.Object.time_inference / time_training, in developer builds
  only: see TIMING_BUILD below), then one wait;
- PyTorch: `iters` calls of the tcnn module under torch.no_grad() (or `out = net(x)`,
  `out.backward(dout)`, `net.params.grad = None`, as a training loop does), then one wait;
- tinycudann model: the same calls through a model of tinycudann's own Python layer (TcnnModel
  below) driving the same native object. tinycudann itself cannot be built here (it needs CUDA
  to run), so its overhead is not measured; this model repeats the PyTorch work its modules do
  per call and leaves out what its C++ binding adds (pybind11 tensor arguments, its CHECKs, the
  stream synchronisation of each call on GPUs), so it is a lower bound of that overhead.
The three alternate for `--repeats` rounds; medians are compared: overhead = torch / C++ - 1, and
the same for the model. The network is tiny-cuda-nn's benchmark MLP: 64 -> 64 x2 -> 64, ReLU.

    python benchmarks/python/binding_overhead.py [--device cpu|cuda] [--batches 10,14,18] [--out F.json]
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time

import torch

import tinyfuse
import tinyfuse.tcnn as tcnn
from tinyfuse import _native

# The C++ loops are compiled into the extension only with the developer option TINYFUSE_PYTHON_TIMING.
TIMING_BUILD = "pip install --no-build-isolation -C cmake.define.TINYFUSE_PYTHON_TIMING=ON ."

# Networks without a training path (their training row is reported as skipped, not failed).
INFERENCE_ONLY = {"Width64FusedMLP", "RocWMMAWidth64MLP"}
DEFAULT_NETWORKS = {"cpu": ["PortableMLP"], "cuda": ["PortableMLP", "BlasLtMLPFP16", "Width64FusedMLP"]}
WIDTH = 64


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_torch(fn, iters, device):
    sync(device)
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    sync(device)
    return time.perf_counter() - t0


class TcnnModel:
    """tinycudann's per-call Python work (bindings/torch/tinycudann/modules.py, tiny-cuda-nn commit
    6ee3546bda615f51abe684ce9edefeb414689135) around a tinyfuse native object, for the comparison
    only: the batch padded to the granularity, the input converted to float and made contiguous,
    the parameters converted to the object's precision and made contiguous on every call, one
    autograd Function whose native call runs a training forward whenever the input or parameters
    require a gradient (even under no_grad, as there), the output sliced; its backward a second
    Function that scales dL/doutput by the loss scale, runs the native backward and divides both
    gradients by it, with 0-d tensors standing for absent gradients."""

    def __init__(self, backend, n_output_dims, loss_scale):
        self.backend, self.n_output_dims, self.loss_scale = backend, n_output_dims, loss_scale

    def __call__(self, x, params):
        rows = x.shape[0]
        g = self.backend.granularity
        padded = -(-rows // g) * g
        x = x if rows == padded else torch.nn.functional.pad(x, [0, 0, 0, padded - rows])
        out = _TcnnModelForward.apply(self, x.to(torch.float).contiguous(),
                                      params.to(self.backend.param_dtype).contiguous(), self.loss_scale)
        return out[:rows, :self.n_output_dims]


class _TcnnModelForward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, model, x, params, loss_scale):
        ctx.set_materialize_grads(False)
        if x.requires_grad or params.requires_grad:
            native_ctx, out = model.backend.forward(x, params, x.requires_grad)
        else:
            native_ctx, out = None, model.backend.inference(x, params)
        ctx.save_for_backward(x, params, out)
        ctx.model, ctx.native_ctx, ctx.loss_scale = model, native_ctx, loss_scale
        return out

    @staticmethod
    def backward(ctx, doutput):
        if doutput is None:
            return None, None, None, None
        x, params, out = ctx.saved_tensors
        dx, dp = _TcnnModelBackward.apply(ctx, doutput, x, params, out)
        return None, (None if dx.dim() == 0 else dx), (None if dp.dim() == 0 else dp), None


class _TcnnModelBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, fwd, doutput, x, params, out):
        with torch.no_grad():
            scaled = doutput * fwd.loss_scale
            dx, dp = fwd.model.backend.backward(fwd.native_ctx, x, params, out, scaled.contiguous(),
                                                fwd.needs_input_grad[1], fwd.needs_input_grad[2])
            dx = torch.empty([], dtype=x.dtype) if dx is None else dx / fwd.loss_scale
            dp = torch.empty([], dtype=params.dtype) if dp is None else dp / fwd.loss_scale
        return dx, dp

    @staticmethod
    def backward(ctx, ddx, ddp):
        raise NotImplementedError


def measure(otype, batch, mode, device, repeats, min_seconds):
    cfg = {"otype": otype, "activation": "ReLU", "output_activation": "None", "n_neurons": WIDTH,
           "n_hidden_layers": 2}
    net = tcnn.Network(WIDTH, WIDTH, cfg).to(device)
    x = torch.rand(batch, WIDTH, device=device)
    with torch.no_grad():
        net(x)  # builds the backend for this device
    backend = net._backends[(x.device, net.params.dtype)]
    if backend.granularity != 1 and batch % backend.granularity:
        raise ValueError(f"batch {batch} is not a multiple of {otype}'s granularity {backend.granularity}")
    x = x.to(backend.input_dtype)  # both loops get the input in the network's dtype
    dout = torch.randn(batch, backend.padded_output_width, device=device).to(backend.output_dtype)
    p = backend.compute_params(net.params.detach())
    out = backend.new_output(x)
    grads = torch.empty_like(p)
    stream = backend.stream()
    native = backend.native

    model = TcnnModel(backend, net.n_output_dims, net.loss_scale)
    dout_sliced = dout[:, :net.n_output_dims]
    if mode == "inference":
        def cpp(iters):
            return native.time_inference(p.data_ptr(), x.data_ptr(), batch, out.data_ptr(), stream, iters)

        def py():
            with torch.no_grad():
                net(x)

        def tcnn_model():
            with torch.no_grad():
                model(x, net.params)
    else:
        def cpp(iters):
            return native.time_training(p.data_ptr(), grads.data_ptr(), x.data_ptr(), batch, out.data_ptr(),
                                        dout.data_ptr(), stream, iters)

        def py():
            net(x).backward(dout_sliced)
            net.params.grad = None

        def tcnn_model():
            model(x, net.params).backward(dout_sliced)
            net.params.grad = None

    # Calibrate: enough calls per round for `min_seconds`, warm both paths.
    cpp(1)
    time_torch(py, 1, device)
    one = max(cpp(1), 1e-7)
    iters = max(1, min(100000, int(min_seconds / one)))
    cpp(iters)
    time_torch(py, iters, device)
    time_torch(tcnn_model, iters, device)
    cpp_times, py_times, model_times = [], [], []
    for _ in range(repeats):
        cpp_times.append(cpp(iters) / iters)
        py_times.append(time_torch(py, iters, device) / iters)
        model_times.append(time_torch(tcnn_model, iters, device) / iters)
    c, t, m = statistics.median(cpp_times), statistics.median(py_times), statistics.median(model_times)
    return {
        "network": otype, "param_dtype": str(backend.param_dtype).replace("torch.", ""), "batch": batch,
        "mode": mode, "iters_per_round": iters, "rounds": repeats,
        "cpp_s_per_call": c, "torch_s_per_call": t, "tcnn_model_s_per_call": m,
        "cpp_min_s": min(cpp_times), "torch_min_s": min(py_times), "tcnn_model_min_s": min(model_times),
        "overhead_pct": 100.0 * (t / c - 1.0), "overhead_us_per_call": 1e6 * (t - c),
        "tcnn_model_overhead_pct": 100.0 * (m / c - 1.0), "tcnn_model_overhead_us_per_call": 1e6 * (m - c),
        "cpp_samples_per_s": batch / c, "torch_samples_per_s": batch / t,
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--batches", default="10,14,18", help="log2 of the batch sizes (default 10,14,18)")
    ap.add_argument("--networks", help="comma-separated otypes (default: cpu PortableMLP; cuda PortableMLP, "
                                       "BlasLtMLPFP16, Width64FusedMLP)")
    ap.add_argument("--modes", default="inference,training")
    ap.add_argument("--repeats", type=int, default=7, help="alternating rounds per measurement (default 7)")
    ap.add_argument("--min-seconds", type=float, default=0.3, help="length of one round (default 0.3 s)")
    ap.add_argument("--out", default=None, help="JSON file (default benchmarks/results/python-overhead-<device>-latest.json)")
    a = ap.parse_args(argv)
    if not (hasattr(_native.Object, "time_inference") and hasattr(_native.Object, "time_training")):
        sys.exit("binding_overhead.py: this tinyfuse was built without the C++ timing loops it compares "
                 "against (Object.time_inference / time_training); rebuild it with them from the "
                 f"repository root: {TIMING_BUILD}")
    device = torch.device(a.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit("binding_overhead.py: --device cuda but torch sees no GPU")
    networks = a.networks.split(",") if a.networks else DEFAULT_NETWORKS[a.device]
    records, failed = [], False
    print(f"{'network':<16}{'batch':>9} {'mode':<10}{'C++ ms':>10}{'torch ms':>10}{'overhead':>10}{'us/call':>9}"
          f"{'tcnn-model':>12}{'us/call':>9}")
    for otype in networks:
        for log2 in (int(b) for b in a.batches.split(",")):
            for mode in a.modes.split(","):
                if mode == "training" and otype in INFERENCE_ONLY:
                    records.append({"network": otype, "batch": 1 << log2, "mode": mode,
                                    "skipped": "inference-only network"})
                    print(f"{otype:<16}{1 << log2:>9} {mode:<10} skipped: inference-only network")
                    continue
                try:
                    r = measure(otype, 1 << log2, mode, device, a.repeats, a.min_seconds)
                except Exception as e:  # reported in its own record; the others still run
                    failed = True
                    records.append({"network": otype, "batch": 1 << log2, "mode": mode,
                                    "error": f"{type(e).__name__}: {e}"})
                    print(f"{otype:<16}{1 << log2:>9} {mode:<10} failed: {type(e).__name__}: {e}")
                    continue
                records.append(r)
                print(f"{otype:<16}{r['batch']:>9} {mode:<10}{r['cpp_s_per_call'] * 1e3:>10.3f}"
                      f"{r['torch_s_per_call'] * 1e3:>10.3f}{r['overhead_pct']:>9.1f}%{r['overhead_us_per_call']:>9.1f}"
                      f"{r['tcnn_model_overhead_pct']:>11.1f}%{r['tcnn_model_overhead_us_per_call']:>9.1f}", flush=True)
    result = {
        "tool": "benchmarks/python/binding_overhead.py",
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "device": a.device,
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "host": {"machine": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version(),
                 "load_average": os.getloadavg()},
        "torch_version": torch.__version__, "torch_threads": torch.get_num_threads(),
        "tinyfuse_version": tinyfuse.__version__, "tinyfuse_built_with_cuda": tinyfuse.built_with_cuda,
        "records": records,
    }
    out = a.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "results",
                                f"python-overhead-{a.device}-latest.json")
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, indent=2)
    os.replace(tmp, out)
    print(f"binding_overhead.py: wrote {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
