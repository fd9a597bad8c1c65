"""``module.native_tcnn_module``: tinycudann's native-module methods, on the module's objects.

tinycudann exposes the compiled object behind each module; client code calls its query methods
(``param_precision()``, ``hyperparams()``, ``n_params()``), ``initial_params(seed)`` to reset a
module (``layer.params.data = layer.native_tcnn_module.initial_params(layer.seed)``) and, rarely,
``fwd`` / ``bwd`` / ``bwd_bwd_input`` directly. Here each method runs on the tinyfuse object of
the tensors' device and the parameters' dtype, with tinycudann's conventions: inputs already of the
object's dtypes, contiguous, their batch a multiple of the granularity; outputs padded to
``n_output_dims()`` columns; ``fwd`` returns a context only when a gradient is wanted; ``bwd``
returns a gradient only for the tensors that require one (None otherwise).
"""

import enum
import weakref

import torch

from .._native import ShapeError
from ._backend import SIXTEEN_BIT


class Precision(enum.Enum):
    """tinycudann's precision names (``_C.Precision``), plus the two tinyfuse adds."""

    Fp32 = "Fp32"
    Fp16 = "Fp16"
    Bf16 = "Bf16"  # FullyFusedMLP with "precision": "bf16" on CUDA
    Fp64 = "Fp64"  # the CPU backend's reference mode


_PRECISION = {torch.float32: Precision.Fp32, torch.float16: Precision.Fp16, torch.bfloat16: Precision.Bf16,
              torch.float64: Precision.Fp64}


def precision_of(dtype):
    return _PRECISION[dtype]


class NativeContext:
    """What ``fwd`` hands to ``bwd`` (tinycudann's ``_C.Context``)."""

    __slots__ = ("backend", "native_ctx", "rows")

    def __init__(self, backend, native_ctx, rows):
        self.backend, self.native_ctx, self.rows = backend, native_ctx, rows


class NativeModule:
    """tinycudann's ``native_tcnn_module`` of one tinyfuse.tcnn module (held weakly)."""

    def __init__(self, module):
        self._module = weakref.ref(module)

    def _owner(self):
        m = self._module()
        if m is None:
            raise ReferenceError("native_tcnn_module: its module no longer exists")
        return m

    def _home(self):
        return next(iter(self._owner()._backends.values()))

    def _backend(self, tensor, params):
        m = self._owner()
        if tensor.device != params.device:
            raise ShapeError(f"native_tcnn_module: tensors on {tensor.device} and {params.device}; use one device")
        return m._backend_for(tensor.device, params.dtype)

    def _check(self, what, t, rows, cols, dtype):
        if t.dim() != 2 or t.shape[0] != rows or t.shape[1] != cols or t.dtype != dtype or not t.is_contiguous():
            raise ShapeError(f"native_tcnn_module: {what} must be a contiguous ({rows}, {cols}) {dtype} tensor, got "
                             f"{tuple(t.shape)} {t.dtype} strides {tuple(t.stride())}")

    def _check_call(self, x, params):
        backend = self._backend(x, params)
        rows = x.shape[0] if x.dim() == 2 else -1
        self._check("input", x, rows, self.n_input_dims(), backend.input_dtype)
        if rows % backend.granularity:
            raise ShapeError(f"native_tcnn_module: the batch ({rows}) must be a multiple of {backend.granularity} "
                             "(the module's forward pads it)")
        if params.dim() != 1 or params.numel() != self.n_params() or params.dtype != backend.param_dtype \
                or not params.is_contiguous():
            raise ShapeError(f"native_tcnn_module: params must be {self.n_params()} contiguous {backend.param_dtype} "
                             f"values, got {tuple(params.shape)} {params.dtype}")
        return backend, rows

    # -- queries ---------------------------------------------------------------------------------
    def n_input_dims(self):
        return self._owner().n_input_dims

    def n_output_dims(self):
        """The padded output width (tinycudann's native modules report it; the module slices)."""
        return self._home().padded_output_width

    def n_params(self):
        return self._owner().n_params

    def param_precision(self):
        return precision_of(self._owner().dtype)

    def output_precision(self):
        m = self._owner()
        dtype = getattr(m, "output_dtype", None) or self._home().output_dtype
        return precision_of(dtype)

    def hyperparams(self):
        return dict(self._owner().hyperparams)

    def name(self):
        return self._home().native.name

    @property
    def jit_fusion(self):
        return self._owner().jit_fusion

    @jit_fusion.setter
    def jit_fusion(self, value):
        self._owner().jit_fusion = value

    def initial_params(self, seed):
        """FP32 initial parameters for `seed` (a new tensor on the module's parameters' device)."""
        m = self._owner()
        return m._initial_params(seed).to(m.params.device)

    # -- calls -----------------------------------------------------------------------------------
    def fwd(self, input, params):
        backend, rows = self._check_call(input, params)
        if not (input.requires_grad or params.requires_grad):
            return None, backend.inference(input, params)
        with torch.no_grad():
            native_ctx, out = backend.forward(input, params, input.requires_grad)
        return NativeContext(backend, native_ctx, rows), out

    def bwd(self, ctx, input, params, output, dL_doutput):
        if not isinstance(ctx, NativeContext):
            raise ShapeError("native_tcnn_module.bwd: called with invalid context (fwd ran in inference mode: "
                             "neither input nor params required a gradient)")
        backend, rows = self._check_call(input, params)
        self._check("output", output, rows, backend.padded_output_width, backend.output_dtype)
        self._check("dL_doutput", dL_doutput, rows, backend.padded_output_width, backend.output_dtype)
        with torch.no_grad():
            return backend.backward(ctx.native_ctx, input, params, output, dL_doutput, input.requires_grad,
                                    params.requires_grad)

    def bwd_bwd_input(self, ctx, input, params, dL_ddLdinput, dL_doutput):
        """(dL/d(dL_doutput), dL/dparams, dL/dinput) from dL/d(dL_dinput), as tinycudann's."""
        if not isinstance(ctx, NativeContext):
            raise ShapeError("native_tcnn_module.bwd_bwd_input: called with invalid context")
        backend, rows = self._check_call(input, params)
        self._check("dL_ddLdinput", dL_ddLdinput, rows, self.n_input_dims(), backend.input_dtype)
        self._check("dL_doutput", dL_doutput, rows, backend.padded_output_width, backend.output_dtype)
        with torch.no_grad():
            return backend.backward_backward_input(ctx.native_ctx, input, params, dL_ddLdinput, dL_doutput,
                                                   dL_doutput.requires_grad, params.requires_grad,
                                                   input.requires_grad)


def loss_scale_of(dtype):
    """tinycudann's default loss scale of a precision: 128 for 16-bit, 1 otherwise."""
    return 128.0 if dtype in SIXTEEN_BIT else 1.0
