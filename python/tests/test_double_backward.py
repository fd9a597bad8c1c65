"""Second derivatives: a loss on a module's gradients (an eikonal term through
torch.autograd.grad(..., create_graph=True)) is differentiated through every module type on the
CPU (gradgradcheck in float64; eikonal gradients equal PyTorch's own double backward of the same
MLP), and is an error naming the module where it cannot be formed (a network's parameter gradient
differentiated again, third derivatives, CUDA networks: test_cuda.py), never a silent zero."""
import pytest
import torch
from torch.func import functional_call

import tinyfuse
import tinyfuse.tcnn as tcnn
from conftest import pure_torch_mlp

GRID = {"otype": "HashGrid", "n_levels": 3, "n_features_per_level": 2, "log2_hashmap_size": 8,
        "base_resolution": 3, "per_level_scale": 1.7}
MLP = {"otype": "FullyFusedMLP", "activation": "ReLU", "output_activation": "None", "n_neurons": 16,
       "n_hidden_layers": 1}


def random_grid(dims, interpolation="Linear", seed=0):
    enc = tcnn.Encoding(dims, dict(GRID, interpolation=interpolation)).double()
    with torch.no_grad():
        enc.params.uniform_(-1, 1, generator=torch.Generator().manual_seed(seed))
    return enc


def inside_cells(n, dims, seed):
    # Away from every level's cell borders, where the interpolation is smooth (finite differences).
    return (torch.rand(n, dims, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)) * 0.8 + 0.1)


@pytest.mark.parametrize("dims", [1, 2, 3])
@pytest.mark.parametrize("interpolation", ["Linear", "Smoothstep"])
def test_grid_gradgradcheck_float64(dims, interpolation):
    enc = random_grid(dims, interpolation, seed=dims)

    def f(x, params):
        return functional_call(enc, {"params": params}, (x,))

    x = inside_cells(5, dims, seed=10 + dims).requires_grad_(True)
    params = enc.params.detach().clone().requires_grad_(True)
    assert torch.autograd.gradcheck(f, (x, params), eps=1e-6, atol=1e-7, rtol=1e-5)
    assert torch.autograd.gradgradcheck(f, (x, params), eps=1e-6, atol=1e-7, rtol=1e-5)


def eikonal_setup(dims=3, seed=4):
    torch.manual_seed(seed)
    enc = random_grid(dims, "Smoothstep", seed)
    head = torch.nn.Sequential(torch.nn.Linear(enc.n_output_dims, 16), torch.nn.Softplus(),
                               torch.nn.Linear(16, 1)).double()
    x = inside_cells(12, dims, seed + 1)
    return enc, head, x


def eikonal_loss(enc, head, x, params=None):
    # NeuS-style: the SDF's gradient from autograd, differentiable, its norm pulled towards 1.
    x = x.clone().requires_grad_(True)
    h = enc(x) if params is None else functional_call(enc, {"params": params}, (x,))
    sdf = head(h)
    (grad,) = torch.autograd.grad(sdf.sum(), x, create_graph=True)
    return ((grad.norm(dim=1) - 1) ** 2).mean()


def test_eikonal_loss_through_a_grid_trains_its_parameters():
    enc, head, x = eikonal_setup()
    loss = eikonal_loss(enc, head, x)
    loss.backward()
    g = enc.params.grad.clone()
    assert g.abs().sum() > 0, "the eikonal term's gradient must reach the grid"

    # Against central differences of the loss in a few touched parameters.
    touched = torch.nonzero(g).flatten()
    for i in touched[torch.randperm(len(touched), generator=torch.Generator().manual_seed(1))[:6]]:
        p = enc.params.detach().clone()
        h = 1e-6
        p[i] += h
        up = eikonal_loss(enc, head, x, p).item()
        p[i] -= 2 * h
        down = eikonal_loss(enc, head, x, p).item()
        assert g[i].item() == pytest.approx((up - down) / (2 * h), rel=1e-5, abs=1e-9), int(i)


def test_eikonal_term_changes_the_parameter_gradient():
    # The symptom: with the term, gradients were bit-identical to those without it.
    enc, head, x = eikonal_setup(seed=5)
    target = torch.rand(12, 1, dtype=torch.float64)
    xa = x.clone().requires_grad_(True)
    data = (head(enc(xa)) - target).square().mean()
    data.backward()
    without = enc.params.grad.clone()
    enc.params.grad = None
    head.zero_grad()
    (data.detach() * 0 + (head(enc(x)) - target).square().mean() + 0.1 * eikonal_loss(enc, head, x)).backward()
    assert not torch.equal(enc.params.grad, without)


def test_parameter_gradient_of_a_network_cannot_be_differentiated():
    net = tcnn.Network(3, 1, dict(MLP, otype="CutlassMLP"))
    x = torch.rand(8, 3)
    (gp,) = torch.autograd.grad(net(x).sum(), net.params, create_graph=True)
    with pytest.raises(tinyfuse.UnsupportedError, match=r"Network\(CutlassMLP\).*parameter gradient"):
        gp.square().sum().backward()


def test_third_derivatives_are_refused():
    enc = random_grid(2)
    x = inside_cells(4, 2, 3).requires_grad_(True)
    (g1,) = torch.autograd.grad(enc(x).sum(), x, create_graph=True)
    (g2,) = torch.autograd.grad(g1.square().sum(), x, create_graph=True)
    with pytest.raises(tinyfuse.UnsupportedError, match="beyond the second"):
        g2.sum().backward()


def test_first_order_training_keeps_the_fast_path(monkeypatch):
    # Without create_graph the backward runs the native backward directly (no second Function).
    def refuse(*args, **kwargs):
        raise AssertionError("the differentiable backward ran without create_graph")

    monkeypatch.setattr(tcnn._autograd.NativeBackward, "apply", refuse)
    net = tcnn.NetworkWithInputEncoding(3, 1, GRID, MLP)
    x = torch.rand(8, 3, requires_grad=True)
    net(x).sum().backward()
    assert x.grad is not None and net.params.grad is not None


# ---- every module type ---------------------------------------------------------------------------

def mlp(otype="CutlassMLP", activation="Softplus", output_activation="None", n_neurons=16, n_hidden_layers=2):
    return {"otype": otype, "activation": activation, "output_activation": output_activation, "n_neurons": n_neurons,
            "n_hidden_layers": n_hidden_layers}


SMOOTH_GRID = dict(GRID, interpolation="Smoothstep")
# (id, constructor, input range): grids read [0, 1], kept away from the outer faces.
MODULES = [
    ("Encoding_Identity", lambda: tcnn.Encoding(3, {"otype": "Identity", "scale": 2.0, "offset": 0.5}), (-1, 1)),
    ("Encoding_Frequency", lambda: tcnn.Encoding(3, {"otype": "Frequency", "n_frequencies": 3}), (-1, 1)),
    ("Encoding_TriangleWave", lambda: tcnn.Encoding(2, {"otype": "TriangleWave", "n_frequencies": 3}), (-1, 1)),
    ("Encoding_OneBlob", lambda: tcnn.Encoding(2, {"otype": "OneBlob", "n_bins": 8}), (0, 1)),
    ("Encoding_SphericalHarmonics", lambda: tcnn.Encoding(3, {"otype": "SphericalHarmonics", "degree": 4}), (0, 1)),
    ("Encoding_Composite", lambda: tcnn.Encoding(4, {"otype": "Composite", "nested": [
        {"otype": "SphericalHarmonics", "degree": 3, "n_dims_to_encode": 3},
        {"otype": "Frequency", "n_frequencies": 2}]}), (0, 1)),
    ("Encoding_CompositeProduct", lambda: tcnn.Encoding(2, {"otype": "Composite", "reduction": "Product", "nested": [
        {"otype": "OneBlob", "n_bins": 2, "n_dims_to_encode": 2},
        {"otype": "Frequency", "n_frequencies": 1, "n_dims_to_encode": 2, "dims_to_encode_begin": 0}]}), (0, 1)),
    ("Encoding_HashGrid", lambda: tcnn.Encoding(3, SMOOTH_GRID), (0.1, 0.9)),
    ("Network_PortableMLP_Tanh", lambda: tcnn.Network(3, 2, mlp("PortableMLP", "Tanh", "Sigmoid")), (-1, 1)),
    ("Network_CutlassMLP_Softplus", lambda: tcnn.Network(3, 1, mlp("CutlassMLP", "Softplus")), (-1, 1)),
    ("Network_FullyFusedMLP_ReLU", lambda: tcnn.Network(3, 1, mlp("FullyFusedMLP", "ReLU")), (-1, 1)),
    ("Network_FullyFusedMLP_SiLU", lambda: tcnn.Network(16, 3, mlp("FullyFusedMLP", "SiLU", "Squareplus")), (-1, 1)),
    ("NetworkWithInputEncoding_HashGrid", lambda: tcnn.NetworkWithInputEncoding(3, 1, SMOOTH_GRID,
                                                                                mlp("FullyFusedMLP", "Softplus")),
     (0.1, 0.9)),
    ("NetworkWithInputEncoding_Frequency", lambda: tcnn.NetworkWithInputEncoding(
        2, 2, {"otype": "Frequency", "n_frequencies": 2}, mlp("CutlassMLP", "Sine", n_neurons=16)), (-1, 1)),
]


def float64_module(make, seed):
    torch.manual_seed(seed)
    m = make().double()
    if m.params.numel():
        with torch.no_grad():  # grids start near zero: give their features some weight
            m.params.add_(torch.empty_like(m.params).uniform_(-0.3, 0.3, generator=torch.Generator().manual_seed(seed)))
    return m


def random_inputs(n, dims, lo, hi, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(n, dims, dtype=torch.float64, generator=g) * (hi - lo) + lo).requires_grad_(True)


@pytest.mark.parametrize("name,make,bounds", MODULES, ids=[m[0] for m in MODULES])
def test_gradgradcheck_float64_every_module_type(name, make, bounds):
    m = float64_module(make, seed=len(name))
    x = random_inputs(5, m.n_input_dims, *bounds, seed=3)
    assert torch.autograd.gradcheck(m, (x,), eps=1e-6, atol=1e-7, rtol=1e-5)
    assert torch.autograd.gradgradcheck(m, (x,), eps=1e-6, atol=1e-6, rtol=1e-5), name


@pytest.mark.parametrize("name,make,bounds", MODULES, ids=[m[0] for m in MODULES])
def test_input_gradient_is_differentiable_in_input_params_and_upstream(name, make, bounds):
    # The eikonal path: dL/dinput as a function of (input, params, dL/doutput), checked against
    # differences (it covers dL2/dparams, which gradgradcheck over the input alone does not).
    m = float64_module(make, seed=len(name) + 1)
    x = random_inputs(4, m.n_input_dims, *bounds, seed=4)
    params = m.params.detach().clone().requires_grad_(m.params.numel() > 0)
    w = torch.randn(4, m.n_output_dims, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    w.requires_grad_(True)

    def input_gradient(x, params, w):
        y = functional_call(m, {"params": params}, (x,))
        (gx,) = torch.autograd.grad(y, x, grad_outputs=w, create_graph=True)
        return gx

    inputs = (x, params, w) if params.requires_grad else (x, w)
    f = input_gradient if params.requires_grad else (lambda x, w: input_gradient(x, params, w))
    assert torch.autograd.gradcheck(f, inputs, eps=1e-6, atol=1e-6, rtol=1e-5), name


@pytest.mark.parametrize("otype,activation,biases", [("PortableMLP", "Tanh", True), ("CutlassMLP", "Sigmoid", False),
                                                     ("FullyFusedMLP", "ReLU", False)])
def test_eikonal_gradients_equal_pytorchs_double_backward(otype, activation, biases):
    # The same MLP in plain PyTorch ops (conftest.pure_torch_mlp, docs/PARAMETERS.md's layout) is
    # the independent reference: its double backward through autograd gives the same gradients.
    torch.manual_seed(7)
    net = tcnn.Network(16, 1, mlp(otype, activation, n_neurons=16)).double()
    padded_out = 1 if otype == "PortableMLP" else 16  # the fused semantics pad the output to 16
    x = torch.rand(32, 16, dtype=torch.float64) * 2 - 1

    def eikonal(f, params):
        xr = x.clone().requires_grad_(True)
        sdf = f(params, xr)
        (grad,) = torch.autograd.grad(sdf.sum(), xr, create_graph=True)
        loss = ((grad.norm(dim=1) - 1) ** 2).mean() + sdf.abs().mean()
        (dp,) = torch.autograd.grad(loss, params)
        return loss.detach(), dp

    ours = eikonal(lambda p, xr: functional_call(net, {"params": p}, (xr,)), net.params.detach().clone().requires_grad_())
    ref = eikonal(lambda p, xr: pure_torch_mlp(p, xr, 16, 1, 16, 2, activation, "None", biases=biases,
                                               padded_out=padded_out),
                  net.params.detach().clone().requires_grad_())
    assert ours[0].item() == pytest.approx(ref[0].item(), rel=1e-12)
    assert ours[1].abs().max() > 0
    torch.testing.assert_close(ours[1], ref[1], rtol=1e-9, atol=1e-12)


def test_eikonal_loss_through_a_network_with_input_encoding_trains_its_parameters():
    # The case: the module's output feeds the loss directly (no PyTorch op after it); the
    # gradient of loss + eikonal term reaches both the network and the grid, and equals central
    # differences of the loss.
    net = float64_module(lambda: tcnn.NetworkWithInputEncoding(3, 1, SMOOTH_GRID, mlp("FullyFusedMLP", "Softplus")), 11)
    x = inside_cells(16, 3, seed=12)

    def loss_of(params):
        xr = x.clone().requires_grad_(True)
        sdf = functional_call(net, {"params": params}, (xr,))
        (grad,) = torch.autograd.grad(sdf.sum(), xr, create_graph=True)
        return sdf.abs().mean() + ((grad.norm(dim=1) - 1) ** 2).mean()

    params = net.params.detach().clone().requires_grad_(True)
    loss_of(params).backward()
    g = params.grad
    n_network = net.n_params - tcnn.Encoding(3, SMOOTH_GRID).n_params
    assert g[:n_network].abs().max() > 0 and g[n_network:].abs().max() > 0
    picks = torch.cat([torch.randperm(n_network, generator=torch.Generator().manual_seed(1))[:4],
                       n_network + torch.nonzero(g[n_network:]).flatten()[:4]])
    for i in picks:
        p = params.detach().clone()
        h = 1e-6
        p[i] += h
        up = loss_of(p).item()
        p[i] -= 2 * h
        down = loss_of(p).item()
        assert g[i].item() == pytest.approx((up - down) / (2 * h), rel=1e-5, abs=1e-9), int(i)


def test_eikonal_in_float32_agrees_with_float64():
    torch.manual_seed(2)
    net32 = tcnn.NetworkWithInputEncoding(3, 1, SMOOTH_GRID, mlp("FullyFusedMLP", "Softplus", n_neurons=16))
    with torch.no_grad():
        net32.params.add_(torch.empty_like(net32.params).uniform_(-0.3, 0.3))
    net64 = tcnn.NetworkWithInputEncoding(3, 1, SMOOTH_GRID, mlp("FullyFusedMLP", "Softplus", n_neurons=16)).double()
    with torch.no_grad():
        net64.params.copy_(net32.params.double())
    x = inside_cells(64, 3, seed=3)
    grads = []
    for net, dtype in ((net32, torch.float32), (net64, torch.float64)):
        xr = x.to(dtype).requires_grad_(True)
        (g,) = torch.autograd.grad(net(xr).sum(), xr, create_graph=True)
        net.params.grad = None
        ((g.norm(dim=1) - 1) ** 2).mean().backward()
        grads.append(net.params.grad.double())
    assert grads[1].abs().max() > 0
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-3, atol=1e-5 * grads[1].abs().max().item())


@pytest.mark.skipif(not hasattr(torch._C, "_will_engine_execute_node"),
                    reason="this PyTorch cannot say which gradients a backward pass uses (all are formed)")
def test_the_native_passes_form_only_the_gradients_the_running_pass_uses(monkeypatch):
    # torch.autograd.grad(sdf, x, create_graph=True) needs dsdf/dx only: the module's backward forms
    # no parameter gradient (as large as the hash table). backward(inputs=params) of the eikonal
    # term then needs no dL/dx from backward_backward_input; plain backward() fills x.grad, so it
    # does. The gradients reaching the parameters are the same either way.
    from tinyfuse.tcnn import _backend
    calls = []
    first, second = _backend.Backend.backward, _backend.Backend.backward_backward_input

    def spy_first(self, native_ctx, x, p, out, doutput, need_input, need_params):
        calls.append(("backward", need_input, need_params))
        return first(self, native_ctx, x, p, out, doutput, need_input, need_params)

    def spy_second(self, native_ctx, x, p, v, doutput, need_doutput, need_params, need_input):
        calls.append(("backward_backward_input", need_doutput, need_params, need_input))
        return second(self, native_ctx, x, p, v, doutput, need_doutput, need_params, need_input)

    monkeypatch.setattr(_backend.Backend, "backward", spy_first)
    monkeypatch.setattr(_backend.Backend, "backward_backward_input", spy_second)
    net = float64_module(lambda: tcnn.NetworkWithInputEncoding(3, 1, SMOOTH_GRID, mlp("FullyFusedMLP", "Softplus")), 5)
    grads = []
    for only_params in (True, False):
        calls.clear()
        net.zero_grad(set_to_none=True)
        x = inside_cells(16, 3, seed=6).requires_grad_(True)
        sdf = net(x)
        (grad,) = torch.autograd.grad(sdf.sum(), x, create_graph=True)
        assert calls == [("backward", True, False)]
        loss = ((grad.norm(dim=1) - 1) ** 2).mean()
        loss.backward(inputs=[net.params] if only_params else None)
        assert calls[1:] == [("backward_backward_input", False, True, not only_params)]
        assert (x.grad is None) == only_params
        grads.append(net.params.grad.clone())
    assert grads[0].abs().max() > 0
    torch.testing.assert_close(grads[0], grads[1], rtol=0, atol=0)
