"""Second derivatives: a loss on a module's gradients (an eikonal term through
torch.autograd.grad(..., create_graph=True)) is differentiated where the object has second
derivatives (the Grid encodings: gradgradcheck in float64) and is an error naming the module
everywhere else, never a silent zero."""
import pytest
import torch
from torch.func import functional_call

import tinyfuse
import tinyfuse.tcnn as tcnn

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


@pytest.mark.parametrize("make", [
    lambda: tcnn.Network(3, 1, MLP),
    lambda: tcnn.NetworkWithInputEncoding(3, 1, GRID, MLP),
    lambda: tcnn.Encoding(3, {"otype": "Frequency", "n_frequencies": 2}),
], ids=["Network", "NetworkWithInputEncoding", "Encoding_Frequency"])
def test_differentiating_twice_elsewhere_is_an_error_naming_the_module(make):
    m = make()
    head = torch.nn.Linear(m.n_output_dims, 1)
    x = torch.rand(8, 3, requires_grad=True)
    (grad,) = torch.autograd.grad(head(m(x)).sum(), x, create_graph=True)
    with pytest.raises(tinyfuse.UnsupportedError, match=rf"{type(m).__name__}\(.*cannot differentiate twice") as e:
        ((grad.norm(dim=1) - 1) ** 2).mean().backward()
    assert isinstance(e.value, NotImplementedError)


def test_eikonal_with_nothing_trainable_after_the_module_is_no_longer_silent():
    # The case: the module's output feeds the loss directly (no PyTorch op after it).
    net = tcnn.NetworkWithInputEncoding(3, 1, GRID, MLP)
    x = torch.rand(8, 3, requires_grad=True)
    (grad,) = torch.autograd.grad(net(x).sum(), x, create_graph=True)
    assert grad.requires_grad
    with pytest.raises(tinyfuse.UnsupportedError, match="NetworkWithInputEncoding"):
        (grad.square().sum() + net(x).sum()).backward()


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
