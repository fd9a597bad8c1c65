"""tinyfuse's addition to tinycudann's modules: a module's whole training step in one native call.

Through autograd a step is the module's forward, a loss and an optimizer in PyTorch, and the
module's backward: the loss sits between the two passes, so they cannot be one kernel, and every
PyTorch op between them is a kernel (and host time) of its own. FusedTrainer runs tinyfuse's C++
Trainer instead, with tiny-cuda-nn's loss and optimizer configs: forward, loss, backward and
optimizer in one call (one kernel for forward, loss and backward where the model has the
one-kernel step, as the C++ benchmarks' figures), then copies the FP32 master parameters into the
module's ``params``, so the module's own calls see them.
"""

import contextlib
import json

import torch

from .. import _native
from ._backend import Backend, cuda_stream
from .modules import Module, ShapeError, UnsupportedError

_increment_version = getattr(torch.autograd.graph, "increment_version", None)


class FusedTrainer:
    """Trains ``module`` (a tinyfuse.tcnn Network, Encoding or NetworkWithInputEncoding) with a
    tiny-cuda-nn loss config (e.g. ``{"otype": "RelativeL2"}``) and optimizer config (e.g.
    ``{"otype": "Adam", "learning_rate": 1e-2}``), on the device of the module's parameters.

    ``step(x, target)`` is one training step; the batch must be a multiple of
    ``batch_granularity`` (tiny-cuda-nn's C++ Trainer asks the same). The trainer keeps the FP32
    master parameters and the optimizer state; after each step they are copied into
    ``module.params``. Parameters changed outside (``module.params`` assigned or modified in
    place, a state dict loaded) are taken up by the next step, with the optimizer state kept; the
    trainer sees them through autograd's version counter, which writes through ``params.data``
    bypass (write under ``torch.no_grad()`` instead).
    ``loss_scale``: the module's (tinycudann's default: 128 for 16-bit networks) unless given.
    """

    def __init__(self, module, loss, optimizer, loss_scale=None):
        if not isinstance(module, Module):
            raise TypeError(f"FusedTrainer: module must be a tinyfuse.tcnn module, got {type(module).__name__}")
        for name, config in (("loss", loss), ("optimizer", optimizer)):
            if not isinstance(config, dict):
                raise TypeError(f"FusedTrainer: {name} must be a config dict (tiny-cuda-nn's), got {type(config).__name__}")
        params = module.params
        if params.dtype is not torch.float32:
            raise UnsupportedError(f"FusedTrainer: {module._name}'s parameters are {params.dtype}; the trainer keeps FP32 "
                                   "master parameters (module.float())")
        self.module = module
        self.device = params.device
        if self.device.type == "cpu":
            index, device = None, "cpu"
        elif self.device.type == "cuda":
            index = self.device.index if self.device.index is not None else torch.cuda.current_device()
            device = "cuda"
        else:
            raise UnsupportedError(f"FusedTrainer: tinyfuse runs CPU and CUDA tensors, the parameters are on {self.device}")
        # An object of its own: the C++ Trainer points it at the trainer's parameters once, which
        # the module's calls (that point their object at module.params each time) must not undo.
        with torch.cuda.device(index) if index is not None else contextlib.nullcontext():
            self._backend = Backend(module._build(device, _native.DTYPE_F32), index)
            self._native = _native.Trainer(self._backend.native, json.dumps(loss), json.dumps(optimizer),
                                           float(module.loss_scale if loss_scale is None else loss_scale),
                                           json.dumps(self._checkpoint_config(module, loss, optimizer)))
        self.loss_config, self.optimizer_config = loss, optimizer
        self._seen = None  # (params tensor, its version) last copied into or out of the trainer
        self._take_module_params()

    @staticmethod
    def _checkpoint_config(module, loss, optimizer):
        """What checkpoints record and a load compares: tiny-cuda-nn's config sections and the widths."""
        config = {"module": type(module).__name__, "n_input_dims": module.n_input_dims,
                  "n_output_dims": module.n_output_dims, "loss": loss, "optimizer": optimizer}
        for key in ("encoding_config", "network_config"):
            if isinstance(getattr(module, key, None), dict):
                config[key.split("_")[0]] = getattr(module, key)
        return config

    @property
    def batch_granularity(self):
        """Batches must be a multiple of this (the model's row granularity)."""
        return self._backend.granularity

    @property
    def loss_scale(self):
        return self._native.loss_scale

    def _take_module_params(self):
        p = self.module.params
        if p.device != self.device or p.dtype is not torch.float32 or p.numel() != self._native.n_params:
            raise ShapeError(f"FusedTrainer: {self.module._name}'s params are now {p.dtype} {tuple(p.shape)} on "
                             f"{p.device}; the trainer was made for {self._native.n_params} float32 values on "
                             f"{self.device} (make a new FusedTrainer after moving the module)")
        host = p.detach().to("cpu", torch.float32).contiguous()
        if host.numel():
            self._native.set_params_host(host.data_ptr())
        self._seen = (p, p._version)

    def step(self, x, target, check=True):
        """One training step on ``x`` (batch, n_input_dims) and ``target`` (batch, n_output_dims).

        ``check=True`` waits for the loss and refuses a non-finite loss or gradients (NaN or Inf in
        the batch) with tinyfuse.Error before the optimizer runs, parameters and optimizer state
        unchanged, and returns the loss as a float. ``check=False`` only queues the step on the
        current stream and returns None (as ``optimizer.step()`` does: nothing guards the
        parameters against a non-finite batch); ``loss()`` reads its loss."""
        module = self.module
        name = f"FusedTrainer({module._name})"
        if not isinstance(x, torch.Tensor) or not isinstance(target, torch.Tensor):
            raise TypeError(f"{name}: x and target must be torch.Tensors")
        if x.dim() != 2 or x.shape[1] != module.n_input_dims:
            raise ShapeError(f"{name}: x must have shape (batch, {module.n_input_dims}), got {tuple(x.shape)}")
        rows = x.shape[0]
        if target.dim() != 2 or target.shape[0] != rows or target.shape[1] != module.n_output_dims:
            raise ShapeError(f"{name}: target must have shape ({rows}, {module.n_output_dims}), got {tuple(target.shape)}")
        if x.device != self.device or target.device != self.device:
            raise ShapeError(f"{name}: x is on {x.device} and target on {target.device}; the trainer runs on {self.device}")
        if x.is_complex() or target.is_complex():
            raise ShapeError(f"{name}: x and target must be real, got {x.dtype} and {target.dtype}")
        g = self.batch_granularity
        if rows == 0 or rows % g:
            raise ShapeError(f"{name}: the batch must be a positive multiple of {g} (the model's granularity, as "
                             f"tiny-cuda-nn's Trainer asks), got {rows}")
        self._sync_in()
        p = module.params
        xb = x.to(self._backend.input_dtype).contiguous()
        tb = target.to(torch.float32).contiguous()
        stream = cuda_stream(self._backend.cuda_index) if self._backend.cuda_index is not None else 0
        with self._backend.device_guard():
            loss = self._native.step(xb.data_ptr(), self._backend.input_code, tb.data_ptr(), rows, stream,
                                     p.data_ptr(), bool(check))
        # The parameters were written in place: autograd graphs built on the old values must not
        # use them silently (as after an optimizer's in-place update).
        if _increment_version is not None:
            _increment_version(p)
        self._seen = (p, p._version)
        return float(loss) if check else None

    def loss(self):
        """The last step's mean loss over the batch (waits for it)."""
        return float(self._native.last_loss())

    def save(self, path):
        """Writes a checkpoint (docs/CHECKPOINTS.md): the configs, the FP32 master parameters, the
        optimizer state and the loss scale, atomically (a failed save leaves an earlier file)."""
        self._sync_in()
        self._native.save(str(path))

    def load(self, path):
        """Loads a checkpoint written by ``save`` for the same configs into the trainer and
        ``module.params``. Everything is checked first; on an error (another config, a truncated
        or edited file) tinyfuse.Error names it and nothing changes."""
        self._sync_in()
        self._native.load(str(path))
        p = self.module.params
        stream = cuda_stream(self._backend.cuda_index) if self._backend.cuda_index is not None else 0
        with self._backend.device_guard():
            self._native.copy_params(p.data_ptr(), stream)
        if _increment_version is not None:
            _increment_version(p)
        self._seen = (p, p._version)

    def _sync_in(self):
        """Takes up parameters changed outside since the last step."""
        p = self.module.params
        if self._seen is None or self._seen[0] is not p or self._seen[1] != p._version:
            self._take_module_params()

