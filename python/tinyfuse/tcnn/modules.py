"""tinycudann's PyTorch modules on tinyfuse (``tinycudann.modules``): ``import tinyfuse.tcnn as tcnn``.

Network, Encoding and NetworkWithInputEncoding take tinycudann's constructor arguments and keep
its conventions: one flat ``params`` Parameter (an FP32 master copy, cast to the backend's
compute dtype on each call), a seed for the initial values, a loss scale of 128 for 16-bit
networks, inputs converted to float, made contiguous and padded to the backend's batch
granularity, outputs sliced back and in the backend's dtype (half for the 16-bit GPU networks, as
tinycudann returns). A Network pads its input width to the network's alignment as tinycudann's
does (16 for FullyFusedMLP and CutlassMLP, with ones), so parameter counts and layouts are
tinycudann's.

Tensors choose the backend: CPU tensors run on tinyfuse's CPU backend (in float64 when the
parameters are float64, e.g. after ``module.double()``: the reference mode that gradcheck uses),
CUDA tensors on the GPU backend of their device, on the current stream. The compiled core only
sees addresses, row counts, dtype codes and stream handles (``_native``), so one build works with
any PyTorch >= 2.1. Beyond tinycudann: configs keys tinyfuse does not read are warnings, not
errors (``strict=True`` restores the error); second derivatives where the object has them (Grid
encodings) and a clear error elsewhere; torch.compile without graph breaks (``_ops.py``).
"""

import gc
import json
import operator
import os
import tempfile
import warnings

import torch

from .. import _native
from .._native import ConfigError, Error, OutOfMemoryError, ShapeError, UnsupportedError  # noqa: F401
from . import _ops
from ._autograd import INFERENCE_ONLY_OTYPES, InferenceOnlyFunction, NativeFunction, first_order_gradients
from ._backend import DTYPE_CODE, Backend
from ._config_keys import IgnoredConfigKeyWarning, warn_ignored  # noqa: F401
from ._native_module import NativeModule, Precision, loss_scale_of  # noqa: F401

__all__ = ["Module", "Network", "Encoding", "NetworkWithInputEncoding", "supports_jit_fusion",
           "free_temporary_memory", "rtc_set_cache_dir", "null_tensor_like", "null_tensor_to_none", "Precision",
           "IgnoredConfigKeyWarning", "ConfigError", "Error", "OutOfMemoryError", "ShapeError", "UnsupportedError"]

# What torch raises when a GPU allocation fails (torch.OutOfMemoryError from 2.5 on).
_TORCH_OOM = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)

# Host allocations of a call below this need no check against the machine's memory (_prepare).
_UNCHECKED_HOST_BYTES = 1 << 26

# FullyFusedMLP's tensor-core kernels need compute capability 7.5 (docs/CONFIG.md).
_FUSED_MIN_CAPABILITY = (7, 5)


# -- tinycudann's module-level functions ------------------------------------------------------------

def supports_jit_fusion():
    """Whether tinyfuse's fused kernels (FullyFusedMLP's tensor-core kernels) run here: a CUDA
    build of tinyfuse and a GPU of compute capability 7.5 or newer.

    tinycudann compiles fused kernels at run time when this is true and ``module.jit_fusion`` is
    set; tinyfuse builds its fused kernels ahead of time and uses them whenever they apply, so
    this only reports whether they can run.
    """
    if not (_native.built_with_cuda and torch.cuda.is_available() and _native.gpu_count() > 0):
        return False
    return torch.cuda.get_device_capability() >= _FUSED_MIN_CAPABILITY


def free_temporary_memory():
    """Frees what earlier calls left behind, as tinycudann's: collects Python garbage (autograd
    graphs holding forward contexts), then gives the GPU memory tinyfuse's stream-ordered pools
    keep for reuse back to the driver and the host scratch blocks the CPU backend keeps between
    calls back to the system. Memory in use stays."""
    gc.collect()
    _native.free_temporary_memory()


_rtc_cache_dir = None


def rtc_set_cache_dir(dir):
    """tinycudann's cache directory for kernels compiled at run time. tinyfuse compiles no kernels
    at run time, so nothing is ever written there; the directory is checked as tinycudann checks
    it (it must exist and be writable; an empty value resets) and remembered."""
    global _rtc_cache_dir
    if not dir:
        _rtc_cache_dir = None
        return
    if not os.path.isdir(dir):
        raise OSError(f"Missing RTC cache directory {dir}")
    try:
        with tempfile.TemporaryFile(dir=dir):
            pass
    except OSError as err:
        raise OSError(f"Invalid RTC cache directory {dir}") from err
    _rtc_cache_dir = str(dir)


def null_tensor_like(tensor):
    """A 0-dimensional tensor of `tensor`'s dtype and device: tinycudann's stand-in for None."""
    return torch.empty([], dtype=tensor.dtype, device=tensor.device)


def null_tensor_to_none(tensor):
    return None if len(tensor.shape) == 0 else tensor


def __getattr__(name):
    # tinycudann computes this at import (and refuses to import without a GPU); here it is asked
    # for when read, and None without a GPU.
    if name == "system_compute_capability":
        if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
            return None
        return min(a * 10 + b for a, b in (torch.cuda.get_device_capability(i)
                                           for i in range(torch.cuda.device_count())))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# -- the modules ------------------------------------------------------------------------------------

def _linear_in_params(hyperparams):
    """Whether an encoding's output is linear in its parameters (its parameter gradient can then be
    differentiated again, _autograd.py): a grid is (corner weights times table entries), encodings
    without parameters trivially are, a Composite is when its parts are and it does not multiply
    them (Product)."""
    if hyperparams.get("otype") == "Composite":
        return hyperparams.get("reduction", "Concatenation") != "Product" and all(
            _linear_in_params(h) for h in hyperparams.get("nested", []))
    return True

class Module(torch.nn.Module):
    """What Network, Encoding and NetworkWithInputEncoding share (tinycudann's Module).

    Subclasses set n_input_dims, n_output_dims and their configs, then call this constructor;
    they build native objects through ``_create(device, cpu_precision, strict)``, which returns
    the object and the config keys it ignored. ``strict``: keys no object reads are ConfigErrors
    (otherwise warnings, once per key, as tinycudann ignores them).
    """

    output_dtype = None  # the dtype outputs are converted to (Encoding's dtype); None: the backend's

    def __init__(self, seed=1337, strict=False):
        super().__init__()
        try:
            seed = operator.index(seed)  # Python and NumPy integers
        except TypeError:
            raise TypeError(f"{type(self).__name__}: seed must be an integer, got {seed!r}") from None
        if not 0 <= seed < 2**64:
            raise ValueError(f"{type(self).__name__}: seed must be in [0, 2^64), got {seed}")
        self.seed = seed
        self._strict = bool(strict)
        self._jit_fusion = False
        self._backends = {}
        home, key = self._home_backend()
        self._backends[key] = home
        self._n_params = home.n_params
        self.hyperparams = json.loads(home.native.hyperparams)
        self._name = self._describe()
        self._linear_in_params = _linear_in_params(self.hyperparams) if isinstance(self, Encoding) else False
        self.params = torch.nn.Parameter(self._initial_params(seed), requires_grad=True)
        # tinycudann's names: the compute precision, and the loss scale that goes with it.
        self.dtype = home.param_dtype
        self.loss_scale = loss_scale_of(self.dtype)
        self._handle = _ops.register(self)

    # -- tinycudann's attributes ---------------------------------------------------------------------
    @property
    def n_params(self):
        """The number of parameters (tinycudann's ``native_tcnn_module.n_params()``)."""
        return self._n_params

    def param_segments(self):
        """tinyfuse's addition: the runs of ``params`` as the C++ optimizers see them, a list of
        (offset, count, kind) with kind "matrix" (a network's weights), "vector" (biases) or "grid"
        (an encoding's table). tiny-cuda-nn's Adam applies l2_reg to the "matrix" runs only, and
        skips non-matrix entries whose gradient is zero (samples/learn_image.py follows both)."""
        home = next(iter(self._backends.values()))
        return [tuple(s) for s in home.native.param_segments]

    @property
    def native_tcnn_module(self):
        """tinycudann's native module: its query methods, ``initial_params(seed)`` and
        ``fwd`` / ``bwd`` / ``bwd_bwd_input`` on this module's tinyfuse objects (_native_module.py)."""
        native = self.__dict__.get("_native_module")
        if native is None:
            native = self.__dict__["_native_module"] = NativeModule(self)
        return native

    @property
    def jit_fusion(self):
        """tinycudann's switch for kernels fused at run time. tinyfuse compiles nothing at run time:
        its fused kernels are built ahead of time and used wherever they apply, whatever this
        says. Setting it is accepted; it reads True only when set and supports_jit_fusion()."""
        return self._jit_fusion and supports_jit_fusion()

    @jit_fusion.setter
    def jit_fusion(self, value):
        self._jit_fusion = bool(value)

    @jit_fusion.deleter
    def jit_fusion(self):
        raise AttributeError("`jit_fusion` can not be deleted")

    def _apply(self, fn, *args, **kwargs):
        result = super()._apply(fn, *args, **kwargs)
        self._follow_params()
        return result

    def _follow_params(self):
        """tinycudann's ``dtype`` is the precision the module computes in, with the loss scale that
        goes with it; here that depends on where the parameters are (a FullyFusedMLP computes in
        float32 on the CPU, in float16 on a GPU; float64 parameters select the CPU's reference
        mode), so both follow a move (.to, .cuda, .double). A loss scale the caller set stays; an
        Encoding's explicit dtype stays; a device the module cannot run on changes nothing here
        (the call will say why)."""
        if self.output_dtype is not None and isinstance(self, Encoding):
            return
        try:
            backend = self._backend_for(self.params.device, self.params.dtype)
        except Error:
            return
        if self.loss_scale == loss_scale_of(self.dtype):
            self.loss_scale = loss_scale_of(backend.param_dtype)
        self.dtype = backend.param_dtype

    # -- building native objects ---------------------------------------------------------------
    def _create(self, device, cpu_precision, strict):
        raise NotImplementedError

    def _describe(self):
        """The module as errors name it, e.g. "Network(FullyFusedMLP)"."""
        parts = [c.get("otype", "?") for c in (getattr(self, "encoding_config", None),
                                                 getattr(self, "network_config", None)) if isinstance(c, dict)]
        return f"{type(self).__name__}({' -> '.join(map(str, parts))})"

    def _build(self, device, precision):
        native, ignored = self._create(device, precision, self._strict)
        if ignored:
            warn_ignored(f"tinyfuse.tcnn.{type(self).__name__}", ignored, stacklevel=5)
        return native

    def _initial_params(self, seed):
        """FP32 initial values for `seed`, on the CPU (PCG32, as the C++ Trainer)."""
        home = next(iter(self._backends.values()))
        # A model too large for the machine is refused before torch is asked for its memory:
        # the parameters and the gradients backward will make (docs/ERRORS.md).
        _native.check_module_memory(home.native, type(self).__name__)
        initial = torch.empty(home.n_params, dtype=torch.float32)
        if home.n_params:
            home.native.initial_params(int(seed), initial.data_ptr())
        return initial

    def _home_backend(self):
        """The object that gives the parameter count and initial values: a CPU one, or for an
        otype that runs only on GPUs, one on the current GPU when there is one."""
        try:
            return Backend(self._build("cpu", _native.DTYPE_F32), None), (torch.device("cpu"), torch.float32)
        except (ConfigError, UnsupportedError):
            if not (_native.built_with_cuda and torch.cuda.is_available()):
                raise
            # On a GPU machine the GPU's refusal is the one that matters (it raises here, with
            # the CPU's in its context).
            index = torch.cuda.current_device()
            with torch.cuda.device(index):
                native = self._build("cuda", _native.DTYPE_F32)
            return Backend(native, index), (torch.device("cuda", index), torch.float32)

    def _backend_for(self, device, params_dtype):
        backend = self._backends.get((device, params_dtype))
        return backend if backend is not None else self._backend(device, params_dtype)

    def _backend(self, device, params_dtype):
        if device.type == "cpu":
            precision = _native.DTYPE_F64 if params_dtype == torch.float64 else _native.DTYPE_F32
            backend = Backend(self._build("cpu", precision), None)
        elif device.type == "cuda":
            if params_dtype == torch.float64:
                raise UnsupportedError(
                    f"{type(self).__name__}: float64 parameters run only on the CPU backend (its FP64 reference "
                    "mode); on CUDA use float32 parameters (module.float())")
            index = device.index if device.index is not None else torch.cuda.current_device()
            with torch.cuda.device(index):
                backend = Backend(self._build("cuda", _native.DTYPE_F32), index)
        else:
            raise UnsupportedError(f"{type(self).__name__}: tinyfuse runs CPU and CUDA tensors, got a tensor on "
                                   f"{device}")
        if backend.n_params != self._n_params:
            raise Error(f"internal: {device} object has {backend.n_params} parameters, expected {self._n_params}")
        self._backends[(device, params_dtype)] = backend
        return backend

    # -- the call --------------------------------------------------------------------------------
    def _check_input(self, x, params):
        """Checks `x` and the parameters; returns `x`, moved to the parameters' GPU when it is a CPU
        tensor (as tinycudann moves it, with a warning)."""
        name = type(self).__name__
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name}: input must be a torch.Tensor, got {type(x).__name__}")
        if x.dim() != 2 or x.shape[1] != self.n_input_dims:
            raise ShapeError(f"{name}: input must have shape (batch, {self.n_input_dims}), got {tuple(x.shape)}")
        if x.is_complex():
            raise ShapeError(f"{name}: input must be real (floating-point, integer or boolean values are converted "
                             f"to float as tinycudann converts them), got {x.dtype}; pass x.real or x.abs()")
        if x.device != params.device:
            if x.device.type != "cpu" or params.device.type != "cuda":
                raise ShapeError(f"{name}: input is on {x.device} but the parameters are on {params.device}; "
                                 f"move the module (module.to('{x.device}')) or the input")
            warnings.warn(f"{name}: input is on the CPU but the parameters are on {params.device}: it is copied "
                          "there on every call, as tinycudann does (slow; pass a CUDA tensor)", stacklevel=5)
            x = x.to(params.device)
        if (params.dim() != 1 or params.numel() != self._n_params or not params.is_floating_point()
                or not params.is_contiguous()):
            raise ShapeError(f"{name}: params must be {self._n_params} contiguous floating-point values, got "
                             f"{tuple(params.shape)} {params.dtype} strides {tuple(params.stride())}")
        return x

    def _prepare(self, x, backend):
        """`x` in the backend's input dtype, contiguous, its batch padded to the granularity."""
        rows = x.shape[0]
        g = backend.granularity
        padded_rows = rows if g == 1 else -(-rows // g) * g
        converts = x.dtype is not backend.input_dtype
        if x.device.type == "cpu":
            # The tensors this call asks torch for (the output, a converted or padded copy of the
            # input) are checked as the library checks its scratch: a batch that cannot fit is
            # an OutOfMemoryError before anything is allocated (docs/ERRORS.md).
            per_row = backend.padded_output_width * backend.output_dtype.itemsize
            if converts or padded_rows != rows or not x.is_contiguous():
                per_row += self.n_input_dims * backend.input_dtype.itemsize
            if padded_rows * per_row > _UNCHECKED_HOST_BYTES:
                _native.check_host_bytes(padded_rows, per_row, f"{type(self).__name__}'s output of a batch of {rows}")
        if converts:
            x = x.to(backend.input_dtype)
        if not x.is_contiguous():  # views (transposed, strided, expanded) are copied, as tinycudann does
            x = x.contiguous()
        if padded_rows != rows:
            x = torch.nn.functional.pad(x, (0, 0, 0, padded_rows - rows))
        return x, rows

    def _finish(self, out, rows):
        if out.shape[0] != rows or out.shape[1] != self.n_output_dims:
            out = out[:rows, :self.n_output_dims]
        if self.output_dtype is not None and out.dtype is not self.output_dtype:
            out = out.to(self.output_dtype)
        return out

    def forward(self, x):
        if _ops.compiling():
            return _ops.module_forward(self, x)
        params = self.params
        x = self._check_input(x, params)
        backend = self._backend_for(x.device, params.dtype)
        try:
            return self._call(x, params, backend, differentiable=True)
        except _TORCH_OOM as e:  # torch's own allocations for this call (GPU)
            raise OutOfMemoryError(f"out of memory: {type(self).__name__} on {x.device}, a batch of {x.shape[0]}: "
                                   f"{str(e).splitlines()[0]}; nothing was changed") from e

    def _call(self, x, params, backend, differentiable):
        xp, rows = self._prepare(x, backend)
        if differentiable and torch.is_grad_enabled() and (xp.requires_grad or params.requires_grad):
            otype = getattr(self, "network_config", {}).get("otype")
            if otype in INFERENCE_ONLY_OTYPES:
                out = InferenceOnlyFunction.apply(backend, xp, params, otype)
            else:
                out = NativeFunction.apply(backend, xp, params, self.loss_scale, self)
        else:
            out = backend.inference(xp, backend.compute_params(params))
        return self._finish(out, rows)

    # -- the custom ops' implementations (_ops.py) ------------------------------------------------
    def _forward_detached(self, x, params):
        with torch.no_grad():
            x = self._check_input(x, params)
            out = self._call(x, params, self._backend_for(x.device, params.dtype), differentiable=False)
        return out.contiguous()  # an op's output is a new tensor, laid out as the fake one

    def _forward_fake(self, x, params):
        x = self._check_input(x, params)
        backend = self._backend_for(x.device, params.dtype)
        return x.new_empty((x.shape[0], self.n_output_dims), dtype=self.output_dtype or backend.output_dtype)

    def _recompute_gradients(self, x, params, doutput, need_input, need_params):
        """dL/dinput and dL/dparams of a forward run again (the compiled path keeps no context)."""
        with torch.no_grad():
            given = x
            x = self._check_input(x, params)
            backend = self._backend_for(x.device, params.dtype)
            xp, rows = self._prepare(x, backend)
            p = backend.compute_params(params)
            native_ctx, out = backend.forward(xp, p, need_input)
            full = torch.zeros_like(out)  # padding rows and columns get no gradient
            full[:rows, :self.n_output_dims] = doutput
            dinput, dparams = first_order_gradients(backend, native_ctx, self.loss_scale, params.dtype, xp, p, out,
                                                    full, need_input, need_params)
        if dinput is not None:
            dinput = dinput[:rows].to(dtype=given.dtype, device=given.device).contiguous()
        return dinput, dparams

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
        state.pop("_native_module", None)
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        self._backends = {}
        self.__dict__.setdefault("_strict", False)
        self.__dict__.setdefault("_jit_fusion", False)
        if "_name" not in self.__dict__:
            self._name = self._describe()
            self._linear_in_params = _linear_in_params(self.hyperparams) if isinstance(self, Encoding) else False
        self._handle = _ops.register(self)  # a copy is another module for the compiled ops

    def extra_repr(self):
        return (f"n_input_dims={self.n_input_dims}, n_output_dims={self.n_output_dims}, seed={self.seed}, "
                f"dtype={self.dtype}, hyperparams={self.hyperparams}")


class Network(Module):
    """A network (tinycudann.Network): (batch, n_input_dims) -> (batch, n_output_dims).

    As tinycudann's, the input is padded with ones to the network's input alignment (16 for
    FullyFusedMLP and CutlassMLP), so any input width works and the parameters are those of the
    padded network. ``strict``: unknown config keys are errors instead of warnings.
    """

    def __init__(self, n_input_dims, n_output_dims, network_config, seed=1337, strict=False):
        self.n_input_dims = n_input_dims
        self.n_output_dims = n_output_dims
        self.network_config = network_config
        super().__init__(seed=seed, strict=strict)

    def _create(self, device, cpu_precision, strict):
        return _native.create_network(self.n_input_dims, self.n_output_dims, json.dumps(self.network_config),
                                      device, cpu_precision, strict)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        # Before tinyfuse padded Network inputs as tinycudann does, a CutlassMLP Network of an
        # input width that is not a multiple of 16 had a narrower first matrix; such a state dict
        # cannot load, and says how to convert it rather than only that the sizes differ.
        p = state_dict.get(prefix + "params")
        old = self._unpadded_n_params()
        if isinstance(p, torch.Tensor) and p.dim() == 1 and old is not None and p.numel() == old:
            error_msgs.append(
                f"'{prefix}params' holds {old} values: {self._name}'s layout before tinyfuse padded Network inputs "
                f"to 16 as tinycudann does (now {self._n_params}). To convert: the first matrix (n_neurons x "
                f"{self.n_input_dims}, row-major, at the start) gets {self._padded_input() - self.n_input_dims} zero "
                "columns appended to each row (they multiply the padding ones, so outputs stay the same); "
                "docs/PARAMETERS.md")
            return
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    def _padded_input(self):
        return -(-self.n_input_dims // 16) * 16

    def _unpadded_n_params(self):
        """The parameter count of the unpadded CutlassMLP layout, where it differs; else None."""
        h = self.hyperparams.get("network", self.hyperparams)
        if h.get("otype") != "CutlassMLP" or self.n_input_dims % 16 == 0:
            return None
        extra = self._padded_input() - self.n_input_dims
        rows = h["n_neurons"] if h["n_hidden_layers"] > 0 else -(-self.n_output_dims // 16) * 16
        return self._n_params - rows * extra


class NetworkWithInputEncoding(Module):
    """An encoding followed by a network (tinycudann.NetworkWithInputEncoding); parameters are
    the network's, then the encoding's. ``strict``: unknown config keys are errors."""

    def __init__(self, n_input_dims, n_output_dims, encoding_config, network_config, seed=1337, strict=False):
        self.n_input_dims = n_input_dims
        self.n_output_dims = n_output_dims
        self.encoding_config = encoding_config
        self.network_config = network_config
        super().__init__(seed=seed, strict=strict)

    def _create(self, device, cpu_precision, strict):
        return _native.create_network_with_input_encoding(
            self.n_input_dims, self.n_output_dims, json.dumps(self.encoding_config),
            json.dumps(self.network_config), device, cpu_precision, strict)


class Encoding(Module):
    """An input encoding (tinycudann.Encoding): (batch, n_input_dims) -> (batch, n_output_dims).

    ``dtype`` as tinycudann's: the precision of the output and of the parameters the encoding
    computes with, reported by ``module.dtype``, with tinycudann's loss scale (128 for
    torch.float16). None: the backend's own (float32; tinycudann picks float16 on GPUs).
    torch.float16 on CUDA computes and stores in FP16 as tinycudann does; the CPU backend computes
    in float32 and rounds its output to float16. tinyfuse adds torch.bfloat16 and torch.float64
    (outputs converted). The parameters stay an FP32 master copy either way.
    """

    def __init__(self, n_input_dims, encoding_config, seed=1337, dtype=None, strict=False):
        if dtype not in (None, torch.float32, torch.float16, torch.bfloat16, torch.float64):
            raise ValueError(f"Encoding: dtype must be None, torch.float32, torch.float16, torch.bfloat16 or "
                             f"torch.float64, got {dtype}")
        self.n_input_dims = n_input_dims
        self.encoding_config = encoding_config
        self.output_dtype = dtype
        super().__init__(seed=seed, strict=strict)
        self.n_output_dims = self._backends[next(iter(self._backends))].native.output_width
        if dtype is not None:
            self.dtype = dtype
            self.loss_scale = loss_scale_of(dtype)

    def _create(self, device, cpu_precision, strict):
        # Only GPU encodings write 16-bit features themselves; the CPU's are converted (_finish).
        output = DTYPE_CODE[self.output_dtype] if self.output_dtype in (torch.float16, torch.float32) else -1
        return _native.create_encoding(self.n_input_dims, json.dumps(self.encoding_config), device, cpu_precision,
                                       output, strict)
