"""tinyfuse.tcnn modules on the CPU backend: values, dtypes, padding, seeds, the two call paths."""
import pytest
import torch

import tinyfuse
import tinyfuse.tcnn as tcnn
from conftest import pure_torch_mlp

MLP = {"otype": "PortableMLP", "activation": "Tanh", "output_activation": "Sigmoid", "n_neurons": 16,
       "n_hidden_layers": 2}


def pcg32_floats(seed, n):
    """tiny-cuda-nn's pcg32 (stream 1) as tinyfuse's Pcg32 draws it: 23-bit floats in [0, 1)."""
    mask = (1 << 64) - 1
    state, inc = 0, (1 << 1) | 1
    out = []

    def step():
        nonlocal state
        old = state
        state = (old * 6364136223846793005 + inc) & mask
        xorshifted = (((old >> 18) ^ old) >> 27) & 0xFFFFFFFF
        rot = old >> 59
        return ((xorshifted >> rot) | (xorshifted << ((-rot) & 31))) & 0xFFFFFFFF

    step()
    state = (state + seed) & mask
    step()
    for _ in range(n):
        out.append((step() >> 9) / float(1 << 23))
    return out


def test_seed_gives_glorot_values_drawn_from_pcg32():
    net = tcnn.Network(3, 2, MLP, seed=42)
    assert net.params.dtype == torch.float32 and net.params.requires_grad
    assert net.params.numel() == (3 * 16 + 16) + (16 * 16 + 16) + (16 * 2 + 2)
    bound = (6.0 / (3 + 16)) ** 0.5
    expected = torch.tensor([u * 2 * bound - bound for u in pcg32_floats(42, 48)])
    torch.testing.assert_close(net.params[:48].detach(), expected, rtol=0, atol=1e-6)
    assert torch.all(net.params[48:64] == 0)  # first bias
    assert torch.equal(tcnn.Network(3, 2, MLP, seed=42).params, net.params)
    assert not torch.equal(tcnn.Network(3, 2, MLP, seed=43).params, net.params)


@pytest.mark.parametrize("batch", [1, 7, 256, 1000])
def test_network_matches_plain_pytorch(batch):
    net = tcnn.Network(3, 2, MLP, seed=1)
    x = torch.rand(batch, 3)
    out = net(x)
    assert out.shape == (batch, 2) and out.dtype == torch.float32
    ref = pure_torch_mlp(net.params.detach().double(), x.double(), 3, 2, 16, 2, "Tanh", "Sigmoid")
    torch.testing.assert_close(out.detach().double(), ref, rtol=1e-5, atol=1e-6)


def test_tinycudann_semantics_pad_outputs_and_drop_biases():
    # FullyFusedMLP (tiny-cuda-nn semantics on the CPU): no biases, output padded to 16, input aligned to 16.
    cfg = {"otype": "FullyFusedMLP", "activation": "ReLU", "output_activation": "None", "n_neurons": 16,
           "n_hidden_layers": 1}
    net = tcnn.Network(16, 3, cfg)
    assert net.params.numel() == 16 * 16 + 16 * 16
    x = torch.rand(33, 16)
    out = net(x)
    assert out.shape == (33, 3)
    ref = pure_torch_mlp(net.params.detach().double(), x.double(), 16, 3, 16, 1, "ReLU", "None", biases=False,
                         padded_out=16)
    torch.testing.assert_close(out.detach().double(), ref, rtol=1e-5, atol=1e-6)


def test_training_and_inference_paths_agree():
    net = tcnn.NetworkWithInputEncoding(
        2, 3, {"otype": "HashGrid", "n_levels": 4, "n_features_per_level": 2, "log2_hashmap_size": 10,
               "base_resolution": 4, "per_level_scale": 2.0}, MLP)
    with torch.no_grad():  # the hash grid starts near zero; give it values that matter
        net.params.uniform_(-0.5, 0.5)
    x = torch.rand(300, 2)
    trained = net(x)
    assert trained.grad_fn is not None
    with torch.no_grad():
        inferred = net(x)
    assert inferred.grad_fn is None
    torch.testing.assert_close(trained.detach(), inferred, rtol=0, atol=0)


def test_no_grad_and_inference_mode_take_the_inference_path(monkeypatch):
    net = tcnn.Network(3, 2, MLP)
    x = torch.rand(10, 3)
    expected = net(x).detach()

    def no_autograd(*args, **kwargs):
        raise AssertionError("the autograd path ran")

    monkeypatch.setattr(tcnn._autograd.NativeFunction, "apply", no_autograd)
    with torch.no_grad():
        torch.testing.assert_close(net(x), expected, rtol=0, atol=0)
    with torch.inference_mode():
        out = net(x)
        assert out.is_inference()
        torch.testing.assert_close(out, expected, rtol=0, atol=0)
    net.requires_grad_(False)  # nothing needs a gradient: inference too
    torch.testing.assert_close(net(x), expected, rtol=0, atol=0)


def test_encoding_output_width_and_dtype():
    enc = tcnn.Encoding(3, {"otype": "Frequency", "n_frequencies": 4})
    assert enc.n_output_dims == 3 * 4 * 2
    assert enc.params.numel() == 0
    x = torch.rand(5, 3)
    out = enc(x)
    assert out.shape == (5, 24) and out.dtype == torch.float32
    # Frequency: sin and cos of 2^k * pi * x, interleaved per frequency as tiny-cuda-nn.
    assert torch.isclose(out, torch.sin(torch.pi * x[:, :1])).any(dim=1).all()
    half = tcnn.Encoding(3, {"otype": "Frequency", "n_frequencies": 4}, dtype=torch.float16)(x)
    assert half.dtype == torch.float16
    torch.testing.assert_close(half.float(), out, rtol=1e-3, atol=1e-3)
    with pytest.raises(ValueError, match="dtype"):
        tcnn.Encoding(3, {"otype": "Frequency"}, dtype=torch.int32)


def test_empty_batch():
    net = tcnn.Network(3, 2, MLP)
    x = torch.zeros(0, 3, requires_grad=True)
    out = net(x)
    assert out.shape == (0, 2)
    out.sum().backward()
    assert x.grad.shape == (0, 3)
    assert torch.all(net.params.grad == 0)


def test_input_dtypes_are_converted_as_tinycudann():
    net = tcnn.Network(3, 2, MLP)
    x = torch.rand(4, 3, dtype=torch.float64, requires_grad=True)
    out = net(x)
    assert out.dtype == torch.float32
    out.sum().backward()
    assert x.grad.dtype == torch.float64
    torch.testing.assert_close(net(x.detach().half()), net(x.detach().half().float()))


def test_errors_name_the_problem():
    net = tcnn.Network(3, 2, MLP)
    with pytest.raises(tinyfuse.ShapeError, match=r"shape \(batch, 3\)"):
        net(torch.rand(4, 4))
    with pytest.raises(tinyfuse.ShapeError, match=r"shape \(batch, 3\)"):
        net(torch.rand(4))
    with pytest.raises(tinyfuse.ShapeError, match="real"):
        net(torch.ones(4, 3, dtype=torch.complex64))
    with pytest.raises(TypeError, match="torch.Tensor"):
        net([[0.0, 0.0, 0.0]])
    with pytest.raises(ValueError):  # ShapeError is a ValueError too
        net(torch.rand(2, 5))


def test_config_errors_come_from_the_core():
    with pytest.raises(tinyfuse.ConfigError, match="n_neurons"):
        tcnn.Network(3, 2, {"otype": "PortableMLP", "n_neurons": 0})
    with pytest.raises(tinyfuse.ConfigError, match="otype"):
        tcnn.Network(3, 2, {"otype": "PortableMPL"})
    with pytest.raises(tinyfuse.ConfigError, match="encoding"):
        tcnn.Encoding(3, {"otype": "HashGird"})


def test_gpu_only_network_is_refused_on_the_cpu_backend():
    if tinyfuse.gpu_count() > 0:
        pytest.skip("a GPU is present: the module is built there")
    with pytest.raises(tinyfuse.ConfigError, match="CUDA"):
        tcnn.Network(64, 64, {"otype": "BlasLtMLPFP16", "n_neurons": 64, "n_hidden_layers": 2})
