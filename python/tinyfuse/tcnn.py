"""tinycudann's PyTorch modules on tinyfuse: ``import tinyfuse.tcnn as tcnn``.

Network, Encoding and NetworkWithInputEncoding take tinycudann's constructor arguments and keep
its conventions: one flat ``params`` Parameter (an FP32 master copy, cast to the backend's
compute dtype on each call), a seed for the initial values, a loss scale of 128 for 16-bit
networks, batches padded to the backend's granularity and sliced back, and outputs in the
backend's dtype (half for the 16-bit GPU networks, as tinycudann returns).

Tensors choose the backend: CPU tensors run on tinyfuse's CPU backend (in float64 when the
parameters are float64, e.g. after ``module.double()``: the reference mode that gradcheck uses),
CUDA tensors on the GPU backend of their device, on the current stream. The compiled core only
sees addresses, row counts, dtype codes and stream handles (``_native``), so one build works with
any PyTorch >= 2.1.
"""

import json
import operator

import torch
from torch.autograd.function import once_differentiable

from . import _native
from ._native import ConfigError, Error, OutOfMemoryError, ShapeError, UnsupportedError  # noqa: F401

__all__ = ["Module", "Network", "Encoding", "NetworkWithInputEncoding",
           "ConfigError", "Error", "OutOfMemoryError", "ShapeError", "UnsupportedError"]

_TORCH_DTYPE = {
    _native.DTYPE_F32: torch.float32,
    _native.DTYPE_F16: torch.float16,
    _native.DTYPE_BF16: torch.bfloat16,
    _native.DTYPE_F64: torch.float64,
}
_DTYPE_CODE = {t: c for c, t in _TORCH_DTYPE.items()}
_SIXTEEN_BIT = (torch.float16, torch.bfloat16)
# What torch raises when a GPU allocation fails (torch.OutOfMemoryError from 2.5 on).
_TORCH_OOM = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)

# The raw handle of the current stream without building a torch.cuda.Stream object (the fast
# private call exists in every PyTorch >= 2.1 with CUDA; the public one is the fallback).
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _cuda_stream(index):
    if _raw_stream is not None:
        return _raw_stream(index)
    return torch.cuda.current_stream(index).cuda_stream


class _Backend:
    """One native object for one device and precision, and what calling it needs."""

    __slots__ = ("native", "cuda_index", "param_dtype", "input_dtype", "output_dtype", "param_code",
                 "input_code", "output_code", "padded_output_width", "granularity", "n_params")

    def __init__(self, native, cuda_index):
        self.native = native
        self.cuda_index = cuda_index  # None on the CPU
        self.param_code, self.input_code, self.output_code = native.param_dtype, native.input_dtype, native.output_dtype
        self.param_dtype = _TORCH_DTYPE[self.param_code]
        self.input_dtype = _TORCH_DTYPE[self.input_code]
        self.output_dtype = _TORCH_DTYPE[self.output_code]
        self.padded_output_width = native.padded_output_width
        self.granularity = native.batch_granularity
        self.n_params = native.n_params

    def stream(self):
        return 0 if self.cuda_index is None else _cuda_stream(self.cuda_index)

    def device_guard(self):
        """Makes the tensors' GPU current for the call (tinyfuse allocates on the current one)."""
        if self.cuda_index is None or torch.cuda.current_device() == self.cuda_index:
            return _NO_GUARD
        return torch.cuda.device(self.cuda_index)

    def compute_params(self, params):
        # Module.forward has checked that params are contiguous.
        return params if params.dtype is self.param_dtype else params.to(self.param_dtype)

    def new_output(self, x):
        return torch.empty((x.shape[0], self.padded_output_width), dtype=self.output_dtype, device=x.device)

    def inference(self, x, params):
        rows = x.shape[0]
        out = torch.empty((rows, self.padded_output_width), dtype=self.output_dtype, device=x.device)
        if rows:
            if params.dtype is not self.param_dtype:
                params = params.to(self.param_dtype)
            if self.cuda_index is None:
                self.native.inference(params.data_ptr(), self.param_code, x.data_ptr(), self.input_code, rows,
                                      out.data_ptr(), self.output_code, 0)
            else:
                with self.device_guard():
                    self.native.inference(params.data_ptr(), self.param_code, x.data_ptr(), self.input_code, rows,
                                          out.data_ptr(), self.output_code, _cuda_stream(self.cuda_index))
        return out


class _NoGuard:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


_NO_GUARD = _NoGuard()


class _NativeFunction(torch.autograd.Function):
    """Forward through the native object, keeping its context for one backward."""

    @staticmethod
    def forward(ctx, backend, x, params, loss_scale):
        ctx.set_materialize_grads(False)
        p = backend.compute_params(params)
        out = backend.new_output(x)
        native_ctx = None
        if x.shape[0]:
            with backend.device_guard():
                native_ctx = backend.native.forward(p.data_ptr(), backend.param_code, x.data_ptr(), backend.input_code,
                                                    x.shape[0], out.data_ptr(), backend.output_code, backend.stream(),
                                                    bool(ctx.needs_input_grad[1]))
        ctx.backend, ctx.native_ctx, ctx.loss_scale, ctx.params_dtype = backend, native_ctx, loss_scale, params.dtype
        ctx.save_for_backward(x, p, out)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, doutput):
        need_input, need_params = ctx.needs_input_grad[1], ctx.needs_input_grad[2]
        if doutput is None or not (need_input or need_params):
            return None, None, None, None
        backend = ctx.backend
        x, p, out = ctx.saved_tensors
        dinput = torch.empty_like(x) if need_input else None
        dparams = torch.empty_like(p) if need_params else None
        if x.shape[0]:
            # tinycudann's loss scaling: 16-bit networks see the output gradient times 128.
            if doutput.dtype != out.dtype:
                doutput = doutput.to(out.dtype)
            if ctx.loss_scale != 1.0:
                doutput = doutput * ctx.loss_scale
            if not doutput.is_contiguous():  # e.g. the expanded gradient of out.sum()
                doutput = doutput.contiguous()
            with backend.device_guard():
                backend.native.backward(ctx.native_ctx, p.data_ptr(), backend.param_code,
                                        dparams.data_ptr() if need_params else 0, x.data_ptr(), backend.input_code,
                                        out.data_ptr(), backend.output_code, doutput.data_ptr(),
                                        dinput.data_ptr() if need_input else 0, backend.stream())
        elif need_params:
            dparams.zero_()
        if dparams is not None:
            if dparams.dtype != ctx.params_dtype:
                dparams = dparams.to(ctx.params_dtype)
            if ctx.loss_scale != 1.0:
                dparams /= ctx.loss_scale
        if dinput is not None and ctx.loss_scale != 1.0:
            dinput /= ctx.loss_scale
        return None, dinput, dparams, None


# Network otypes whose native object has no training forward (C++: Width64FusedMLP's forward()
# raises UnsupportedError). Their modules still run with autograd enabled, as the seed's usage
# (parameters requiring grad, no torch.no_grad) does: the output comes from the inference path
# and only a backward through it raises.
_INFERENCE_ONLY_OTYPES = frozenset({"Width64FusedMLP", "RocWMMAWidth64MLP"})


class _InferenceOnlyFunction(torch.autograd.Function):
    """Inference under autograd for an inference-only network; its backward is refused."""

    @staticmethod
    def forward(ctx, backend, x, params, otype):
        ctx.otype = otype
        return backend.inference(x, params)

    @staticmethod
    @once_differentiable
    def backward(ctx, doutput):
        raise UnsupportedError(f"{ctx.otype} is inference-only: no gradients flow through it. Train BlasLtMLPFP16 "
                               "(or PortableMLP) with the same config and load its parameters (the layout is the "
                               "same, docs/PARAMETERS.md), or call this module under torch.no_grad().")


class Module(torch.nn.Module):
    """What Network, Encoding and NetworkWithInputEncoding share (tinycudann's Module).

    Subclasses set n_input_dims, n_output_dims and their configs, then call this constructor;
    they build native objects through ``_create(device, cpu_precision)``.
    """

    def __init__(self, seed=1337):
        super().__init__()
        try:
            seed = operator.index(seed)  # Python and NumPy integers
        except TypeError:
            raise TypeError(f"{type(self).__name__}: seed must be an integer, got {seed!r}") from None
        if not 0 <= seed < 2**64:
            raise ValueError(f"{type(self).__name__}: seed must be in [0, 2^64), got {seed}")
        self.seed = seed
        self._backends = {}
        home, key = self._home_backend()
        self._backends[key] = home
        self._n_params = home.n_params
        self.hyperparams = json.loads(home.native.hyperparams)
        # A model too large for the machine is refused before torch is asked for its memory:
        # the parameters and the gradients backward will make (docs/ERRORS.md).
        _native.check_module_memory(home.native, type(self).__name__)
        initial = torch.empty(home.n_params, dtype=torch.float32)
        if home.n_params:
            home.native.initial_params(int(seed), initial.data_ptr())
        self.params = torch.nn.Parameter(initial, requires_grad=True)
        # tinycudann's names: the compute precision, and the loss scale that goes with it.
        self.dtype = home.param_dtype
        self.loss_scale = 128.0 if self.dtype in _SIXTEEN_BIT else 1.0

    # -- building native objects ---------------------------------------------------------------
    def _create(self, device, cpu_precision):
        raise NotImplementedError

    def _home_backend(self):
        """The object that gives the parameter count and initial values: a CPU one, or for an
        otype that runs only on GPUs, one on the current GPU when there is one."""
        try:
            return _Backend(self._create("cpu", _native.DTYPE_F32), None), (torch.device("cpu"), torch.float32)
        except (ConfigError, UnsupportedError):
            if not (_native.built_with_cuda and torch.cuda.is_available()):
                raise
            # On a GPU machine the GPU's refusal is the one that matters (it raises here, with
            # the CPU's in its context).
            index = torch.cuda.current_device()
            with torch.cuda.device(index):
                native = self._create("cuda", _native.DTYPE_F32)
            return _Backend(native, index), (torch.device("cuda", index), torch.float32)

    def _backend(self, device, params_dtype):
        if device.type == "cpu":
            precision = _native.DTYPE_F64 if params_dtype == torch.float64 else _native.DTYPE_F32
            backend = _Backend(self._create("cpu", precision), None)
        elif device.type == "cuda":
            if params_dtype == torch.float64:
                raise UnsupportedError(
                    f"{type(self).__name__}: float64 parameters run only on the CPU backend (its FP64 reference "
                    "mode); on CUDA use float32 parameters (module.float())")
            index = device.index if device.index is not None else torch.cuda.current_device()
            with torch.cuda.device(index):
                backend = _Backend(self._create("cuda", _native.DTYPE_F32), index)
        else:
            raise UnsupportedError(f"{type(self).__name__}: tinyfuse runs CPU and CUDA tensors, got a tensor on "
                                   f"{device}")
        if backend.n_params != self._n_params:
            raise Error(f"internal: {device} object has {backend.n_params} parameters, expected {self._n_params}")
        self._backends[(device, params_dtype)] = backend
        return backend

    # -- the call --------------------------------------------------------------------------------
    def _check_input(self, x, params):
        name = type(self).__name__
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name}: input must be a torch.Tensor, got {type(x).__name__}")
        if x.dim() != 2 or x.shape[1] != self.n_input_dims:
            raise ShapeError(f"{name}: input must have shape (batch, {self.n_input_dims}), got {tuple(x.shape)}")
        if not x.is_floating_point():
            raise ShapeError(f"{name}: input must be a floating-point tensor (float32 as tinycudann; float16, "
                             f"bfloat16 and float64 are converted), got {x.dtype}")
        if x.device != params.device:
            raise ShapeError(f"{name}: input is on {x.device} but the parameters are on {params.device}; "
                             f"move the module (module.to('{x.device}')) or the input")
        if not x.is_contiguous():
            raise ShapeError(f"{name}: input must be contiguous (row-major (batch, features)), got strides "
                             f"{tuple(x.stride())}; call x.contiguous()")
        if (params.dim() != 1 or params.numel() != self._n_params or not params.is_floating_point()
                or not params.is_contiguous()):
            raise ShapeError(f"{name}: params must be {self._n_params} contiguous floating-point values, got "
                             f"{tuple(params.shape)} {params.dtype} strides {tuple(params.stride())}")

    def forward(self, x):
        params = self.params
        self._check_input(x, params)
        backend = self._backends.get((x.device, params.dtype))
        if backend is None:
            backend = self._backend(x.device, params.dtype)
        rows = x.shape[0]
        g = backend.granularity
        padded_rows = rows if g == 1 else -(-rows // g) * g
        try:
            return self._call(x, params, backend, rows, padded_rows)
        except _TORCH_OOM as e:  # torch's own allocations for this call (GPU)
            raise OutOfMemoryError(f"out of memory: {type(self).__name__} on {x.device}, a batch of {rows}: "
                                   f"{str(e).splitlines()[0]}; nothing was changed") from e

    def _call(self, x, params, backend, rows, padded_rows):
        if x.device.type == "cpu":
            # The tensors this call asks torch for (the output, a converted or padded copy of the
            # input) are checked as the library checks its scratch: a batch that cannot fit is
            # an OutOfMemoryError before anything is allocated (docs/ERRORS.md).
            copies_input = x.dtype != backend.input_dtype or padded_rows != rows
            per_row = backend.padded_output_width * backend.output_dtype.itemsize
            if copies_input:
                per_row += self.n_input_dims * backend.input_dtype.itemsize
            _native.check_host_bytes(padded_rows, per_row,
                                     f"{type(self).__name__}'s output of a batch of {rows}")
        if x.dtype != backend.input_dtype:
            x = x.to(backend.input_dtype)
        if padded_rows != rows:
            x = torch.nn.functional.pad(x, (0, 0, 0, padded_rows - rows))
        if torch.is_grad_enabled() and (x.requires_grad or params.requires_grad):
            otype = getattr(self, "network_config", {}).get("otype")
            if otype in _INFERENCE_ONLY_OTYPES:
                out = _InferenceOnlyFunction.apply(backend, x, params, otype)
            else:
                out = _NativeFunction.apply(backend, x, params, self.loss_scale)
        else:
            out = backend.inference(x, params)
        if padded_rows != rows or backend.padded_output_width != self.n_output_dims:
            out = out[:rows, :self.n_output_dims]
        return out

    # -- torch.nn.Module conventions ---------------------------------------------------------------
    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        # As load_checkpoint in C++ (docs/ERRORS.md): parameters that torch would cast silently
        # (integers, booleans) or that are not finite are refused before anything is copied.
        # The rest is torch's own: this module's other buffers and children (of a subclass), shapes,
        # missing and unexpected keys. (PyTorch calls this with strict=True whatever the caller
        # asked for, and applies strict=False itself afterwards.)
        p = state_dict.get(prefix + "params")
        if isinstance(p, torch.Tensor) and p.shape == self.params.shape:
            name = f"{type(self).__name__}.load_state_dict"
            if not p.is_floating_point():
                raise ShapeError(f"{name}: '{prefix}params' holds {p.dtype}; parameters must be floating-point "
                                 "(float32; float16, bfloat16 and float64 are converted); the module was left unchanged")
            if p.device.type != "meta" and not bool(torch.isfinite(p).all()):
                bad = int((~torch.isfinite(p)).sum())
                raise Error(f"{name}: '{prefix}params' holds {bad} values that are not finite (NaN or Inf); "
                            "the module was left unchanged")
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    def load_state_dict(self, state_dict, strict=True, *args, **kwargs):
        # strict=True: keys that do not match this module's (its own and its children's) are
        # refused before anything is copied; torch alone would copy what matches, then raise.
        if strict:
            expected = self.state_dict(keep_vars=True).keys()
            missing = [k for k in expected if k not in state_dict]
            unexpected = [k for k in state_dict if k not in expected]
            if missing or unexpected:
                msgs = []
                if missing:
                    msgs.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ")
                if unexpected:
                    msgs.append("Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ". ")
                raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                                   + "\n\t".join(msgs) + "\nNothing was loaded.")
        return super().load_state_dict(state_dict, strict, *args, **kwargs)

    def __getstate__(self):
        # Native objects are not pickled; forward() rebuilds them for the device it meets.
        state = self.__dict__.copy()
        state["_backends"] = {}
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        self._backends = {}

    def extra_repr(self):
        return (f"n_input_dims={self.n_input_dims}, n_output_dims={self.n_output_dims}, seed={self.seed}, "
                f"dtype={self.dtype}, hyperparams={self.hyperparams}")


class Network(Module):
    """A network (tinycudann.Network): (batch, n_input_dims) -> (batch, n_output_dims)."""

    def __init__(self, n_input_dims, n_output_dims, network_config, seed=1337):
        self.n_input_dims = n_input_dims
        self.n_output_dims = n_output_dims
        self.network_config = network_config
        super().__init__(seed=seed)

    def _create(self, device, cpu_precision):
        return _native.create_network(self.n_input_dims, self.n_output_dims, json.dumps(self.network_config),
                                      device, cpu_precision)


class NetworkWithInputEncoding(Module):
    """An encoding followed by a network (tinycudann.NetworkWithInputEncoding); parameters are
    the network's, then the encoding's."""

    def __init__(self, n_input_dims, n_output_dims, encoding_config, network_config, seed=1337):
        self.n_input_dims = n_input_dims
        self.n_output_dims = n_output_dims
        self.encoding_config = encoding_config
        self.network_config = network_config
        super().__init__(seed=seed)

    def _create(self, device, cpu_precision):
        return _native.create_network_with_input_encoding(
            self.n_input_dims, self.n_output_dims, json.dumps(self.encoding_config),
            json.dumps(self.network_config), device, cpu_precision)


class Encoding(Module):
    """An input encoding (tinycudann.Encoding): (batch, n_input_dims) -> (batch, n_output_dims).

    ``dtype``: the dtype of the output (None: the backend's own, float32 on the CPU). The
    parameters stay an FP32 master copy.
    """

    def __init__(self, n_input_dims, encoding_config, seed=1337, dtype=None):
        if dtype not in (None, torch.float32, torch.float16, torch.bfloat16, torch.float64):
            raise ValueError(f"Encoding: dtype must be None, torch.float32, torch.float16, torch.bfloat16 or "
                             f"torch.float64, got {dtype}")
        self.n_input_dims = n_input_dims
        self.encoding_config = encoding_config
        self.output_dtype = dtype
        super().__init__(seed=seed)
        self.n_output_dims = self._backends[next(iter(self._backends))].native.output_width

    def _create(self, device, cpu_precision):
        return _native.create_encoding(self.n_input_dims, json.dumps(self.encoding_config), device, cpu_precision)

    def forward(self, x):
        out = super().forward(x)
        if self.output_dtype is not None and out.dtype != self.output_dtype:
            out = out.to(self.output_dtype)
        return out
