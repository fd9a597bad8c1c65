"""Padding and parameter counts as tinycudann's, so its checkpoints' layouts are tinyfuse's.

The formulas are tiny-cuda-nn's at commit 6ee3546bda615f51abe684ce9edefeb414689135:
- src/cpp_api.cu: the Python Network is a NetworkWithInputEncoding with an Identity encoding;
  include/tiny-cuda-nn/network_with_input_encoding.h: the encoding is aligned to the network's
  minimum_alignment (src/network.cu: 16 for FullyFusedMLP and CutlassMLP) and the network reads the
  padded width; parameters are the network's, then the encoding's.
- src/cutlass_mlp.cu, src/fully_fused_mlp.cu: weight matrices only (no biases): n_neurons x input,
  (n_hidden_layers - 1) x n_neurons^2, padded output x n_neurons, the output padded to 16; with no
  hidden layer (CutlassMLP) one padded output x input matrix.
- include/tiny-cuda-nn/encodings/grid.h (GridEncodingTemplated's constructor): per level
  resolution = ceil(scale) + 1 with scale = 2^(level * log2(per_level_scale)) * base_resolution - 1,
  entries = min(next_multiple(resolution^dims, 8), 2^log2_hashmap_size) for Hash (base_resolution^dims
  for Tiled, no cap for Dense); parameters = entries * n_features_per_level.
"""
import math

import pytest
import torch

import tinyfuse
import tinyfuse.tcnn as tcnn
from conftest import pure_torch_mlp


def next_multiple(n, m):
    return -(-n // m) * m


def tcnn_mlp_params(n_in, n_out, neurons, hidden):
    n_in, n_out = next_multiple(n_in, 16), next_multiple(n_out, 16)
    if hidden == 0:
        return n_out * n_in
    return neurons * n_in + (hidden - 1) * neurons * neurons + n_out * neurons


def tcnn_grid_params(dims, levels, features, log2_size, base, grid_type="Hash"):
    # per_level_scale 2: every level scale is exact in float (base * 2^level - 1).
    total = 0
    for level in range(levels):
        resolution = math.ceil(base * 2 ** level - 1) + 1
        entries = next_multiple(resolution ** dims, 8)
        if grid_type == "Hash":
            entries = min(entries, 1 << log2_size)
        elif grid_type == "Tiled":
            entries = min(entries, base ** dims)
        total += entries
    return total * features


def mlp(otype, neurons, hidden, **more):
    return dict({"otype": otype, "n_neurons": neurons, "n_hidden_layers": hidden, "activation": "ReLU",
                 "output_activation": "None"}, **more)


NETWORK_CASES = [(otype, hidden) for otype in ("FullyFusedMLP", "CutlassMLP") for hidden in (1, 2, 3)] + \
                [("CutlassMLP", 0)]


@pytest.mark.parametrize("otype,hidden", NETWORK_CASES)
def test_network_parameter_counts_are_tinycudanns(otype, hidden):
    for n_in in (1, 3, 15, 16, 17, 31, 32, 63, 64, 65):
        for n_out in (1, 3, 16, 17):
            net = tcnn.Network(n_in, n_out, mlp(otype, 32, hidden))
            assert net.n_params == tcnn_mlp_params(n_in, n_out, 32, hidden), (otype, hidden, n_in, n_out)
            assert net.native_tcnn_module.n_output_dims() == next_multiple(n_out, 16)


def test_portable_mlp_is_not_padded():
    # tinyfuse's own network (biases, any width): built as asked.
    net = tcnn.Network(5, 3, {"otype": "PortableMLP", "n_neurons": 8, "n_hidden_layers": 1})
    assert net.n_params == 8 * 5 + 8 + 3 * 8 + 3


GRID_CASES = [
    (2, 16, 2, 15, 16, "Hash"),  # tinycudann's data/config_hash.json at per_level_scale 2
    (3, 8, 2, 12, 4, "Hash"),
    (3, 5, 4, 19, 3, "Dense"),
    (2, 6, 1, 10, 5, "Tiled"),
    (4, 3, 8, 14, 2, "Hash"),
    (1, 7, 2, 6, 3, "Hash"),
]


@pytest.mark.parametrize("dims,levels,features,log2_size,base,grid_type", GRID_CASES)
def test_grid_encoding_parameter_counts_are_tinycudanns(dims, levels, features, log2_size, base, grid_type):
    cfg = {"otype": "Grid", "type": grid_type, "n_levels": levels, "n_features_per_level": features,
           "log2_hashmap_size": log2_size, "base_resolution": base, "per_level_scale": 2.0}
    enc = tcnn.Encoding(dims, cfg)
    assert enc.n_params == tcnn_grid_params(dims, levels, features, log2_size, base, grid_type)
    assert enc.n_output_dims == levels * features


@pytest.mark.parametrize("cfg,n_out", [({"otype": "Frequency", "n_frequencies": 6}, 3 * 2 * 6),
                                        ({"otype": "OneBlob", "n_bins": 16}, 3 * 16),
                                        ({"otype": "SphericalHarmonics", "degree": 4}, 16),
                                        ({"otype": "TriangleWave", "n_frequencies": 5}, 3 * 5),
                                        ({"otype": "Identity"}, 3)])
def test_parameterless_encodings(cfg, n_out):
    enc = tcnn.Encoding(3, cfg)
    assert enc.n_params == 0 and enc.n_output_dims == n_out


NWIE_ENCODINGS = [
    ({"otype": "HashGrid", "n_levels": 15, "n_features_per_level": 2, "log2_hashmap_size": 10,
      "base_resolution": 4, "per_level_scale": 2.0}, tcnn_grid_params(3, 15, 2, 10, 4), 30),
    ({"otype": "SphericalHarmonics", "degree": 3}, 0, 9),
    ({"otype": "Frequency", "n_frequencies": 6}, 0, 36),
    ({"otype": "Identity"}, 0, 3),
]


@pytest.mark.parametrize("otype,hidden", [("FullyFusedMLP", 2), ("CutlassMLP", 1), ("CutlassMLP", 0)])
@pytest.mark.parametrize("enc,enc_params,width", NWIE_ENCODINGS, ids=[e[0]["otype"] for e in NWIE_ENCODINGS])
def test_network_with_input_encoding_parameter_counts_are_tinycudanns(otype, hidden, enc, enc_params, width):
    for n_out in (1, 4, 16):
        m = tcnn.NetworkWithInputEncoding(3, n_out, enc, mlp(otype, 16, hidden))
        assert m.n_params == tcnn_mlp_params(width, n_out, 16, hidden) + enc_params, (otype, enc, n_out)
        # Network parameters first, then the encoding's.
        assert m.params[tcnn_mlp_params(width, n_out, 16, hidden):].numel() == enc_params


@pytest.mark.parametrize("n_in", [63, 31, 5])
def test_network_computes_on_the_input_padded_with_ones(n_in):
    # nerfacto's colour head has 63 inputs, torch-ngp's and nerfacc's 31.
    cfg = mlp("FullyFusedMLP", 16, 2, output_activation="Sigmoid")
    net = tcnn.Network(n_in, 3, cfg, seed=n_in).double()
    x = torch.rand(9, n_in, dtype=torch.float64, requires_grad=True)
    padded = torch.cat([x, torch.ones(9, next_multiple(n_in, 16) - n_in, dtype=torch.float64)], 1)
    p = net.params.detach().clone().requires_grad_(True)
    ref = pure_torch_mlp(p, padded, padded.shape[1], 3, 16, 2, "ReLU", "Sigmoid", biases=False, padded_out=16)
    out = net(x)
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-14)
    w = torch.rand(9, 3, dtype=torch.float64)
    (out * w).sum().backward()
    dx = x.grad.clone()
    x.grad = None
    (ref * w).sum().backward()
    torch.testing.assert_close(dx, x.grad, rtol=1e-10, atol=1e-14)
    torch.testing.assert_close(net.params.grad, p.grad, rtol=1e-10, atol=1e-14)


def test_state_dict_of_the_unpadded_cutlass_layout_fails_clearly():
    net = tcnn.Network(20, 3, mlp("CutlassMLP", 16, 1))
    old = torch.zeros(16 * 20 + 16 * 16)  # before the input was padded to 32
    assert net.n_params == 16 * 32 + 16 * 16
    with pytest.raises(RuntimeError, match="layout before tinyfuse padded Network inputs.*12 zero columns"):
        net.load_state_dict({"params": old})
    # The conversion it describes gives a state dict that loads and computes what the old one did.
    w0 = torch.rand(16, 20)
    rest = torch.rand(16 * 16)
    new = torch.cat([torch.cat([w0, torch.zeros(16, 12)], 1).flatten(), rest])
    net.load_state_dict({"params": new})
    x = torch.rand(4, 20)
    h = torch.relu(x @ w0.T)
    expected = (h @ rest.view(16, 16).T)[:, :3]
    with torch.no_grad():
        torch.testing.assert_close(net(x), expected, rtol=1e-5, atol=1e-6)


def test_encoding_dtype_and_loss_scale_as_tinycudann():
    cfg = {"otype": "HashGrid", "n_levels": 4, "n_features_per_level": 2, "log2_hashmap_size": 10,
           "base_resolution": 4, "per_level_scale": 2.0}
    half = tcnn.Encoding(3, cfg, dtype=torch.float16, seed=2)
    full = tcnn.Encoding(3, cfg, dtype=torch.float32, seed=2)
    default = tcnn.Encoding(3, cfg, seed=2)
    assert (half.dtype, half.loss_scale) == (torch.float16, 128.0)
    assert (full.dtype, full.loss_scale) == (torch.float32, 1.0)
    assert default.dtype == torch.float32  # the CPU backend's precision (tinycudann picks half on GPUs)
    assert half.params.dtype == torch.float32  # the FP32 master copy, as tinycudann's
    assert half.native_tcnn_module.param_precision() == tcnn.Precision.Fp16
    assert half.native_tcnn_module.output_precision() == tcnn.Precision.Fp16
    with torch.no_grad():
        half.params.uniform_(-1, 1)
        full.params.copy_(half.params)
    x = torch.rand(20, 3, requires_grad=True)
    out16, out32 = half(x), full(x)
    assert out16.dtype == torch.float16 and out32.dtype == torch.float32
    torch.testing.assert_close(out16, out32.half())  # the CPU rounds its float32 result
    # The loss scale is divided back out: the gradients are float32's for the same (half-precision)
    # output gradient.
    w = torch.rand(20, 8)
    (out16.float() * w).sum().backward()
    g16, dx16 = half.params.grad.clone(), x.grad.clone()
    x.grad = None
    (out32 * w.half().float()).sum().backward()
    torch.testing.assert_close(g16, full.params.grad, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(dx16, x.grad, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="dtype"):
        tcnn.Encoding(3, cfg, dtype=torch.int8)
    assert tinyfuse  # the package itself stays importable without torch types (see __init__)


def test_dtype_and_loss_scale_follow_the_parameters():
    # The precision the module computes in: float64 in the CPU's reference mode, back to float32.
    net = tcnn.Network(16, 2, mlp("FullyFusedMLP", 16, 1))
    assert (net.dtype, net.loss_scale) == (torch.float32, 1.0)
    net.double()
    assert (net.dtype, net.loss_scale) == (torch.float64, 1.0)
    net.float()
    assert net.dtype == torch.float32
    net.loss_scale = 64.0  # set by the caller: kept
    net.double().float()
    assert net.loss_scale == 64.0
    enc = tcnn.Encoding(3, {"otype": "Frequency"}, dtype=torch.float16)
    enc.double()
    assert (enc.dtype, enc.loss_scale) == (torch.float16, 128.0)  # an explicit dtype stays


@pytest.mark.skipif(not (torch.cuda.is_available() and tinyfuse.built_with_cuda and tinyfuse.gpu_count() > 0),
                    reason="skipped: no GPU")
def test_a_16_bit_gpu_network_reports_half_and_loss_scale_128_as_tinycudann():
    net = tcnn.Network(16, 2, mlp("FullyFusedMLP", 16, 1)).cuda()
    assert (net.dtype, net.loss_scale) == (torch.float16, 128.0)
    assert net(torch.rand(4, 16, device="cuda")).dtype == torch.float16
    net.cpu()
    assert (net.dtype, net.loss_scale) == (torch.float32, 1.0)
