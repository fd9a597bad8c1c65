"""One native object for one device and precision, and the calls every path makes through it.

The compiled core (``_native``) takes addresses, row counts, dtype codes and a stream handle; this
file turns tensors into those. Inputs arrive here already converted to the object's dtypes,
contiguous and padded to its batch granularity (modules.py prepares them); outputs and gradients
are new PyTorch tensors of the padded batch.
"""

import torch

from .. import _native

TORCH_DTYPE = {
    _native.DTYPE_F32: torch.float32,
    _native.DTYPE_F16: torch.float16,
    _native.DTYPE_BF16: torch.bfloat16,
    _native.DTYPE_F64: torch.float64,
}
DTYPE_CODE = {t: c for c, t in TORCH_DTYPE.items()}
SIXTEEN_BIT = (torch.float16, torch.bfloat16)

# The raw handle of the current stream without building a torch.cuda.Stream object (the fast
# private call exists in every PyTorch >= 2.1 with CUDA; the public one is the fallback).
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def cuda_stream(index):
    if _raw_stream is not None:
        return _raw_stream(index)
    return torch.cuda.current_stream(index).cuda_stream


class _NoGuard:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


NO_GUARD = _NoGuard()


class Backend:
    """A native object and what calling it needs (its dtypes, widths, granularity, device)."""

    __slots__ = ("native", "cuda_index", "param_dtype", "input_dtype", "output_dtype", "param_code",
                 "input_code", "output_code", "padded_output_width", "granularity", "n_params")

    def __init__(self, native, cuda_index):
        self.native = native
        self.cuda_index = cuda_index  # None on the CPU
        self.param_code, self.input_code, self.output_code = native.param_dtype, native.input_dtype, native.output_dtype
        self.param_dtype = TORCH_DTYPE[self.param_code]
        self.input_dtype = TORCH_DTYPE[self.input_code]
        self.output_dtype = TORCH_DTYPE[self.output_code]
        self.padded_output_width = native.padded_output_width
        self.granularity = native.batch_granularity
        self.n_params = native.n_params

    def stream(self):
        return 0 if self.cuda_index is None else cuda_stream(self.cuda_index)

    def device_guard(self):
        """Makes the tensors' GPU current for the call (tinyfuse allocates on the current one)."""
        if self.cuda_index is None or torch.cuda.current_device() == self.cuda_index:
            return NO_GUARD
        return torch.cuda.device(self.cuda_index)

    def compute_params(self, params):
        # The caller has checked that params are contiguous.
        return params if params.dtype is self.param_dtype else params.to(self.param_dtype)

    def new_output(self, x):
        return torch.empty((x.shape[0], self.padded_output_width), dtype=self.output_dtype, device=x.device)

    # -- the native calls ----------------------------------------------------------------------
    # `p` below is compute_params(params); `x` the prepared input.

    def inference(self, x, p):
        out = self.new_output(x)
        rows = x.shape[0]
        if not rows:
            return out
        if self.cuda_index is None:  # the CPU: no device to make current, no stream
            self.native.inference(p.data_ptr(), self.param_code, x.data_ptr(), self.input_code, rows, out.data_ptr(),
                                  self.output_code, 0)
            return out
        with self.device_guard():
            self.native.inference(p.data_ptr(), self.param_code, x.data_ptr(), self.input_code, rows, out.data_ptr(),
                                  self.output_code, cuda_stream(self.cuda_index))
        return out

    def forward(self, x, p, prepare_input_gradients):
        """The output and the native context a backward needs (None for an empty batch)."""
        out = self.new_output(x)
        native_ctx = None
        if x.shape[0]:
            with self.device_guard():
                native_ctx = self.native.forward(p.data_ptr(), self.param_code, x.data_ptr(), self.input_code,
                                                 x.shape[0], out.data_ptr(), self.output_code, self.stream(),
                                                 bool(prepare_input_gradients))
        return native_ctx, out

    def backward(self, native_ctx, x, p, out, doutput, need_input, need_params):
        """dL/dinput and dL/dparams (each None unless asked for) from `doutput`, which must be
        contiguous and of the output's dtype and shape."""
        dinput = torch.empty_like(x) if need_input else None
        dparams = torch.empty_like(p) if need_params else None
        if native_ctx is None:  # an empty batch
            if dparams is not None:
                dparams.zero_()
            return dinput, dparams
        with self.device_guard():
            self.native.backward(native_ctx, p.data_ptr(), self.param_code,
                                 dparams.data_ptr() if need_params else 0, x.data_ptr(), self.input_code,
                                 out.data_ptr(), self.output_code, doutput.data_ptr(),
                                 dinput.data_ptr() if need_input else 0, self.stream())
        return dinput, dparams

    def backward_backward_input(self, native_ctx, x, p, dL_ddLdinput, doutput, need_doutput, need_params,
                                need_input):
        """Second derivatives from dL2/d(dL/dinput): (dL2/d(dL/doutput), dL2/dparams, dL2/dinput),
        each None unless asked for. Objects without them raise tinyfuse.UnsupportedError."""
        d_doutput = torch.empty_like(doutput) if need_doutput else None
        dparams = torch.empty_like(p) if need_params else None
        dinput = torch.empty_like(x) if need_input else None
        if native_ctx is None:
            for t in (d_doutput, dparams, dinput):
                if t is not None:
                    t.zero_()
            return d_doutput, dparams, dinput
        with self.device_guard():
            self.native.backward_backward_input(
                native_ctx, p.data_ptr(), self.param_code, dparams.data_ptr() if need_params else 0, x.data_ptr(),
                self.input_code, dL_ddLdinput.data_ptr(), doutput.data_ptr(), self.output_code,
                d_doutput.data_ptr() if need_doutput else 0, dinput.data_ptr() if need_input else 0, self.stream())
        return d_doutput, dparams, dinput
