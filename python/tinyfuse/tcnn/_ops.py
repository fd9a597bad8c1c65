"""The modules' calls as torch.library custom ops, for torch.compile and CUDA graphs.

Under ``torch.compile`` a module's forward is one op, ``tinyfuse::module_forward(x, params,
handle)``, with a fake implementation (output shape and dtype from the module, no native call) and
an autograd formula whose backward is a second op, ``tinyfuse::module_backward``. The graph then
has no break at the module, and the ops' Python implementations run the same native calls the
eager path runs.

The native forward context is a C++ object that cannot live in a compiled graph (nor across a
CUDA-graph replay), so the backward op runs the native forward again before the native backward:
a compiled training step pays one more forward of the module, and its gradients equal eager's
(the forward is deterministic). Second derivatives are not traced (AOTAutograd refuses double
backward through a compiled graph); the eager path has them (_autograd.py).

``handle`` is an integer naming the module (a constant in the graph): the ops find the module,
its native objects and its settings through it. PyTorch without ``torch.library.custom_op``
(before 2.4) keeps the eager path, where a compiled graph breaks at the module.
"""

import itertools
import weakref

import torch

from .._native import Error

_modules = weakref.WeakValueDictionary()
_next_handle = itertools.count(1)


def register(module):
    """A new handle for `module` (each instance, copies included, gets its own)."""
    handle = next(_next_handle)
    _modules[handle] = module
    return handle


def _module(handle):
    module = _modules.get(handle)
    if module is None:
        raise Error(f"tinyfuse.tcnn: the module of compiled call {handle} no longer exists; compile the model again")
    return module


def _dynamo_is_compiling():
    try:
        import torch._dynamo
    except ImportError:  # no dynamo: nothing is ever compiled
        return False
    return torch._dynamo.is_compiling()


AVAILABLE = hasattr(torch.library, "custom_op") and hasattr(torch.library, "register_autograd")
_is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None) or _dynamo_is_compiling


def compiling():
    """True while torch.compile traces (the modules then call the ops below)."""
    return AVAILABLE and _is_compiling()


if AVAILABLE:
    @torch.library.custom_op("tinyfuse::module_forward", mutates_args=())
    def _module_forward(x: torch.Tensor, params: torch.Tensor, handle: int) -> torch.Tensor:
        return _module(handle)._forward_detached(x, params)

    @_module_forward.register_fake
    def _module_forward_fake(x, params, handle):
        return _module(handle)._forward_fake(x, params)

    @torch.library.custom_op("tinyfuse::module_backward", mutates_args=())
    def _module_backward(x: torch.Tensor, params: torch.Tensor, doutput: torch.Tensor, handle: int,
                         need_input: bool, need_params: bool) -> tuple[torch.Tensor, torch.Tensor]:
        dinput, dparams = _module(handle)._recompute_gradients(x, params, doutput, need_input, need_params)
        # An op returns tensors: an empty one stands for "not asked for".
        return (dinput if dinput is not None else x.new_empty(0),
                dparams if dparams is not None else params.new_empty(0))

    @_module_backward.register_fake
    def _module_backward_fake(x, params, doutput, handle, need_input, need_params):
        dinput = x.new_empty(x.shape) if need_input else x.new_empty(0)
        dparams = params.new_empty(params.shape) if need_params else params.new_empty(0)
        return dinput, dparams

    def _setup_context(ctx, inputs, output):
        x, params, handle = inputs
        ctx.save_for_backward(x, params)
        ctx.handle = handle

    def _backward(ctx, doutput):
        x, params = ctx.saved_tensors
        need_input, need_params = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        if not (need_input or need_params):
            return None, None, None
        dinput, dparams = torch.ops.tinyfuse.module_backward(x, params, doutput, ctx.handle, need_input, need_params)
        return (dinput if need_input else None), (dparams if need_params else None), None

    _module_forward.register_autograd(_backward, setup_context=_setup_context)


def module_forward(module, x):
    """The compiled form of ``module(x)``."""
    return torch.ops.tinyfuse.module_forward(x, module.params, module._handle)
