"""The eager autograd path: forward keeps the native context for the backward passes.

Orders of differentiation, one Function each:
- ``NativeFunction``: output from (input, params); its backward gives dL/dinput and dL/dparams.
- ``NativeBackward``: that backward as a differentiable function of (dL/doutput, input, params),
  used only when the backward itself is recorded (``create_graph=True``, e.g. an eikonal loss on
  dL/dinput). Its backward is the object's ``backward_backward_input``; objects without second
  derivatives raise there, naming the module, so nothing is silently zero.
- Differentiating further raises (``_refuse``).
When more objects gain second derivatives in C++ nothing here changes: the native call decides.

Loss scaling as tinycudann: dL/doutput is multiplied by ``loss_scale`` before the native backward
and the gradients divided by it (the 16-bit networks use 128, so small gradients survive FP16).
"""

import torch
from torch.autograd.function import once_differentiable

from .._native import UnsupportedError


def _contiguous_as(t, dtype):
    if t.dtype != dtype:
        t = t.to(dtype)
    return t if t.is_contiguous() else t.contiguous()  # e.g. the expanded gradient of out.sum()


def _scaled_as(t, dtype, scale):
    """`t * scale` as a contiguous tensor of `dtype`, in one elementwise pass (none when `t` is
    already that): the loss scale, the dtype conversion and the copy of an expanded gradient
    (out.sum()'s) are one kernel on GPUs."""
    if scale == 1.0:
        return _contiguous_as(t, dtype)
    return torch.mul(t, scale, out=torch.empty(t.shape, dtype=dtype, device=t.device))


def _unscaled_as(t, dtype, scale):
    """`t / scale` as a tensor of `dtype`, in one pass (none when scale is 1 and the dtype equal).
    `t` is a gradient the native call has just written and nothing else holds: of the same dtype,
    it is divided in place (a parameter gradient is as large as the hash table)."""
    if scale == 1.0:
        return t if t.dtype == dtype else t.to(dtype)
    if t.dtype == dtype:
        return t.div_(scale)
    return torch.div(t, scale, out=torch.empty(t.shape, dtype=dtype, device=t.device))


def _used_by_this_pass(node):
    """Whether the backward pass now running will use a gradient sent along the edge to `node` (an
    entry of the running node's next_functions): torch.autograd.grad(y, x) runs the nodes on the
    way to x only, so a parameter gradient it would discard need not be formed. True where PyTorch
    cannot tell (a leaf that autograd.grad captures, an older PyTorch)."""
    if node is None:
        return False
    try:
        return bool(torch._C._will_engine_execute_node(node))
    except (AttributeError, RuntimeError, TypeError):
        return True


def _needs(ctx, index, edge):
    """ctx.needs_input_grad[index], less what the running pass discards. `edge`: that argument's
    position among the forward's tensor arguments (next_functions counts only those)."""
    if not ctx.needs_input_grad[index]:
        return False
    edges = ctx.next_functions
    return edge >= len(edges) or _used_by_this_pass(edges[edge][0])


def first_order_gradients(backend, native_ctx, scale, params_dtype, x, p, out, doutput, need_input, need_params):
    """dL/dinput and dL/dparams (as asked; None otherwise) in the dtypes of x and of the module's
    parameters (`params_dtype`), `p` being those parameters in the object's dtype."""
    dinput, dparams = backend.backward(native_ctx, x, p, out, _scaled_as(doutput, out.dtype, scale), need_input,
                                       need_params)
    if dparams is not None:
        dparams = _unscaled_as(dparams, params_dtype, scale)
    if dinput is not None and scale != 1.0:
        dinput /= scale
    return dinput, dparams


class NativeFunction(torch.autograd.Function):
    """Forward through the native object, keeping its context for the backward passes."""

    @staticmethod
    def forward(ctx, backend, x, params, loss_scale, module):
        ctx.set_materialize_grads(False)
        p = backend.compute_params(params)
        native_ctx, out = backend.forward(x, p, ctx.needs_input_grad[1])
        ctx.backend, ctx.native_ctx, ctx.loss_scale, ctx.params_dtype = backend, native_ctx, loss_scale, params.dtype
        ctx.name, ctx.linear_in_params = module._name, module._linear_in_params
        ctx.compute_params = p  # params converted to the object's dtype (params itself when equal)
        ctx.save_for_backward(x, params, out)
        return out

    @staticmethod
    def backward(ctx, doutput):
        need_input, need_params = _needs(ctx, 1, 0), _needs(ctx, 2, 1)
        if doutput is None or not (need_input or need_params):
            return None, None, None, None, None
        x, params, out = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph=True: the gradients must be differentiable
            dinput, dparams = NativeBackward.apply(ctx, doutput, x, params, need_input, need_params)
        else:
            dinput, dparams = first_order_gradients(ctx.backend, ctx.native_ctx, ctx.loss_scale, ctx.params_dtype, x,
                                                    ctx.compute_params, out, doutput, need_input, need_params)
        return None, dinput, dparams, None, None


class NativeBackward(torch.autograd.Function):
    """NativeFunction's backward as a function of (dL/doutput, input, params), so that a loss on
    the gradients can be differentiated (backward_backward_input)."""

    @staticmethod
    def forward(ctx, fwd, doutput, x, params, need_input, need_params):
        ctx.set_materialize_grads(False)
        ctx.fwd = fwd
        out = fwd.saved_tensors[2]
        ctx.out = out.detach()  # for its dtype; fwd's saved tensors may be freed before the second pass
        dinput, dparams = first_order_gradients(fwd.backend, fwd.native_ctx, fwd.loss_scale, fwd.params_dtype, x,
                                                fwd.compute_params, out, doutput, need_input, need_params)
        ctx.save_for_backward(doutput, x, params)
        return dinput, dparams

    @staticmethod
    def backward(ctx, ddinput, ddparams):
        fwd = ctx.fwd
        doutput, x_saved, params = ctx.saved_tensors
        need_doutput, need_input, need_params = _needs(ctx, 1, 0), _needs(ctx, 2, 1), _needs(ctx, 3, 2)
        if (ddinput is None and ddparams is None) or not (need_doutput or need_input or need_params):
            return None, None, None, None, None, None
        x = x_saved.detach()
        d_doutput = dinput = dparams = None
        if ddinput is not None:
            d_doutput, dinput, dparams = _through_input_gradient(fwd, ctx.out, x, doutput, ddinput, need_doutput,
                                                                 need_input, need_params)
        if ddparams is not None:
            dd_out, dd_in = _through_param_gradient(fwd, ctx.out, x, doutput, ddparams, need_doutput, need_input)
            d_doutput, dinput = _add(d_doutput, dd_out), _add(dinput, dd_in)
        if torch.is_grad_enabled():  # create_graph again: these depend on the inputs, but not differentiably here
            d_doutput, dinput, dparams = _refuse(fwd.name, (d_doutput, dinput, dparams),
                                                 (doutput, x_saved, params, ddinput, ddparams))
        return None, d_doutput, dinput, dparams, None, None


def _add(a, b):
    return b if a is None else a if b is None else a + b


def _scaled(doutput, dtype, scale):
    # The native passes see what the first-order one saw: dL/doutput times the loss scale.
    return _scaled_as(doutput.detach(), dtype, scale)


def _through_input_gradient(fwd, out, x, doutput, ddinput, need_doutput, need_input, need_params):
    """A loss on dL/dinput, differentiated: the object's backward_backward_input."""
    scale = fwd.loss_scale
    try:
        d_doutput, dparams, dinput = fwd.backend.backward_backward_input(
            fwd.native_ctx, x, fwd.compute_params, _contiguous_as(ddinput, x.dtype), _scaled(doutput, out.dtype, scale),
            need_doutput, need_params, need_input)
    except UnsupportedError as e:
        raise UnsupportedError(
            f"{fwd.name}: cannot differentiate twice (a loss on its gradients, e.g. torch.autograd.grad(..., "
            f"create_graph=True) followed by backward): {e}") from e
    # dL2/d(dL/doutput) does not involve dL/doutput; the other two are linear in it.
    if dparams is not None:
        dparams = _unscaled_as(dparams, fwd.params_dtype, scale)
    if dinput is not None and scale != 1.0:
        dinput /= scale
    return d_doutput, dinput, dparams


def _through_param_gradient(fwd, out, x, doutput, ddparams, need_doutput, need_input):
    """A loss on dL/dparams, differentiated. Only for objects linear in their parameters (grids:
    output = sum of corner weights times table entries): dL/dparams is then the transposed
    forward applied to dL/doutput, so with v = dL2/d(dL/dparams) as a table, dL2/d(dL/doutput) is
    the forward with parameters v and dL2/dinput the input gradient with parameters v; dL/dparams
    does not depend on the parameters. Other objects refuse."""
    if not fwd.linear_in_params:
        raise UnsupportedError(
            f"{fwd.name}: cannot differentiate its parameter gradient (dL/dparams) again (as tinycudann cannot); "
            "only the Grid encodings, which are linear in their parameters, can")
    backend = fwd.backend
    v = backend.compute_params(_contiguous_as(ddparams, ddparams.dtype))
    d_doutput = dinput = None
    native_ctx, out_v = backend.forward(x, v, need_input)
    if need_doutput:
        d_doutput = out_v
    if need_input:
        dinput, _ = first_order_gradients(backend, native_ctx, fwd.loss_scale, fwd.params_dtype, x, v, out_v,
                                          doutput.detach(), True, False)
    return d_doutput, dinput


class _Refuse(torch.autograd.Function):
    """Returns copies of the first `n` tensors, attached to all of them in the graph; differentiating
    through the copies raises, naming the module."""

    @staticmethod
    def forward(ctx, name, n, *tensors):
        ctx.name = name
        return tuple(t.clone() if t is not None else None for t in tensors[:n])

    @staticmethod
    @once_differentiable
    def backward(ctx, *grads):
        raise UnsupportedError(f"{ctx.name}: derivatives beyond the second are not supported")


def _refuse(name, outputs, inputs):
    """`outputs` computed from `inputs` without a graph: where an input wants a gradient, they get
    one that raises when used, so a third derivative is an error, not a silent zero."""
    if not any(t is not None and t.requires_grad for t in inputs):
        return outputs
    return _Refuse.apply(name, len(outputs), *outputs, *inputs)


# Network otypes whose native object has no training forward (C++: Width64FusedMLP's forward()
# raises UnsupportedError). Their modules still run with autograd enabled, as the seed's usage
# (parameters requiring grad, no torch.no_grad) does: the output comes from the inference path
# and only a backward through it raises.
INFERENCE_ONLY_OTYPES = frozenset({"Width64FusedMLP", "RocWMMAWidth64MLP"})


class InferenceOnlyFunction(torch.autograd.Function):
    """Inference under autograd for an inference-only network; its backward is refused."""

    @staticmethod
    def forward(ctx, backend, x, params, otype):
        ctx.otype = otype
        return backend.inference(x, backend.compute_params(params))

    @staticmethod
    @once_differentiable
    def backward(ctx, doutput):
        raise UnsupportedError(f"{ctx.otype} is inference-only: no gradients flow through it. Train BlasLtMLPFP16 "
                               "(or PortableMLP) with the same config and load its parameters (the layout is the "
                               "same, docs/PARAMETERS.md), or call this module under torch.no_grad().")
