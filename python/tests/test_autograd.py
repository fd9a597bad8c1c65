"""Gradients: gradcheck in float64 on the CPU backend (its FP64 reference mode), against plain
PyTorch in float32, and tinycudann's loss scaling."""
import pytest
import torch
from torch.func import functional_call

import tinyfuse.tcnn as tcnn
from conftest import pure_torch_mlp

SMOOTH_MLP = {"otype": "PortableMLP", "activation": "Tanh", "output_activation": "Sigmoid", "n_neurons": 8,
              "n_hidden_layers": 2}


def gradcheck_module(module, x):
    """gradcheck with respect to the input and the flat parameters."""
    def f(inp, params):
        return functional_call(module, {"params": params}, (inp,))

    params = module.params.detach().clone().requires_grad_(True)
    assert torch.autograd.gradcheck(f, (x, params), eps=1e-6, atol=1e-7, rtol=1e-5)


def test_network_gradcheck_float64():
    net = tcnn.Network(3, 2, SMOOTH_MLP, seed=5).double()
    assert net.params.dtype == torch.float64
    x = torch.rand(6, 3, dtype=torch.float64, requires_grad=True)
    assert net(x).dtype == torch.float64  # the FP64 CPU object, not FP32 behind a cast
    gradcheck_module(net, x)


def test_network_with_frequency_encoding_gradcheck_float64():
    net = tcnn.NetworkWithInputEncoding(2, 3, {"otype": "Frequency", "n_frequencies": 3}, SMOOTH_MLP).double()
    x = torch.rand(5, 2, dtype=torch.float64, requires_grad=True)
    gradcheck_module(net, x)


def test_hash_grid_gradcheck_float64():
    # Grid outputs are linear in the parameters; away from cell borders, smooth in the input.
    enc = tcnn.Encoding(2, {"otype": "HashGrid", "n_levels": 2, "n_features_per_level": 2, "log2_hashmap_size": 8,
                            "base_resolution": 4, "per_level_scale": 2.0}).double()
    with torch.no_grad():
        enc.params.uniform_(-1, 1)
    x = (torch.rand(4, 2, dtype=torch.float64) * 0.8 + 0.1).requires_grad_(True)
    gradcheck_module(enc, x)


def test_float32_gradients_match_plain_pytorch():
    net = tcnn.Network(3, 2, SMOOTH_MLP, seed=3)
    x = torch.rand(50, 3, requires_grad=True)
    w = torch.rand(50, 2)
    (net(x) * w).sum().backward()
    xr = x.detach().double().requires_grad_(True)
    pr = net.params.detach().double().requires_grad_(True)
    (pure_torch_mlp(pr, xr, 3, 2, 8, 2, "Tanh", "Sigmoid") * w.double()).sum().backward()
    torch.testing.assert_close(x.grad.double(), xr.grad, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(net.params.grad.double(), pr.grad, rtol=1e-4, atol=1e-6)


def test_gradients_flow_only_where_asked():
    net = tcnn.Network(3, 2, SMOOTH_MLP)
    x = torch.rand(4, 3)
    net(x).sum().backward()
    assert net.params.grad is not None and net.params.grad.abs().sum() > 0
    net.params.grad = None
    net.params.requires_grad_(False)
    x.requires_grad_(True)
    net(x).sum().backward()
    assert net.params.grad is None and x.grad.abs().sum() > 0


def test_padded_batch_gradients_ignore_padding_rows(monkeypatch):
    # Pretend the backend works on whole tiles of 8 rows: 5 rows are padded to 8 and sliced back.
    net = tcnn.Network(3, 2, SMOOTH_MLP)
    x = torch.rand(5, 3, requires_grad=True)
    net(x).sum().backward()
    expected_dx, expected_dp = x.grad.clone(), net.params.grad.clone()
    backend = next(iter(net._backends.values()))
    monkeypatch.setattr(backend, "granularity", 8)
    calls = []
    real = tcnn._autograd.NativeFunction.forward

    def spy(ctx, b, xin, params, loss_scale, module):
        calls.append(xin.shape[0])
        return real(ctx, b, xin, params, loss_scale, module)

    monkeypatch.setattr(tcnn._autograd.NativeFunction, "forward", staticmethod(spy))
    x.grad, net.params.grad = None, None
    out = net(x)
    assert out.shape == (5, 2) and calls == [8]
    out.sum().backward()
    # 8-row products round differently from 5-row ones (BLAS blocking), hence not bitwise.
    torch.testing.assert_close(x.grad, expected_dx, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(net.params.grad, expected_dp, rtol=1e-6, atol=1e-7)


def test_loss_scale_is_divided_back_out(monkeypatch):
    net = tcnn.Network(3, 2, SMOOTH_MLP)
    x = torch.rand(7, 3, requires_grad=True)
    net(x).square().sum().backward()
    dx, dp = x.grad.clone(), net.params.grad.clone()
    x.grad, net.params.grad = None, None
    net.loss_scale = 128.0  # what a 16-bit network uses; the gradients must not change
    net(x).square().sum().backward()
    torch.testing.assert_close(x.grad, dx, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(net.params.grad, dp, rtol=1e-6, atol=1e-7)
    # out.sum() hands backward an expanded (stride 0) gradient.
    x.grad, net.params.grad = None, None
    net(x).sum().backward()
    scaled_dp = net.params.grad.clone()
    net.loss_scale, x.grad, net.params.grad = 1.0, None, None
    net(x).sum().backward()
    torch.testing.assert_close(scaled_dp, net.params.grad, rtol=1e-6, atol=1e-7)


def test_backward_twice_needs_retain_graph_and_no_double_backward():
    net = tcnn.Network(3, 2, SMOOTH_MLP)
    x = torch.rand(4, 3, requires_grad=True)
    out = net(x).sum()
    out.backward(retain_graph=True)
    first = net.params.grad.clone()
    out.backward()
    torch.testing.assert_close(net.params.grad, 2 * first)
    (g,) = torch.autograd.grad(net(x).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError):
        g.sum().backward()


def test_training_reduces_the_loss():
    torch.manual_seed(0)
    net = tcnn.NetworkWithInputEncoding(
        2, 1, {"otype": "HashGrid", "n_levels": 4, "n_features_per_level": 2, "log2_hashmap_size": 10,
               "base_resolution": 4, "per_level_scale": 2.0},
        {"otype": "FullyFusedMLP", "activation": "ReLU", "output_activation": "None", "n_neurons": 16,
         "n_hidden_layers": 1})
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    x = torch.rand(512, 2)
    y = torch.sin(6 * x[:, :1]) * torch.cos(4 * x[:, 1:])
    losses = []
    for _ in range(60):
        opt.zero_grad()
        loss = (net(x) - y).square().mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.1 * losses[0]
