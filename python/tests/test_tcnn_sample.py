"""tiny-cuda-nn's PyTorch sample (samples/mlp_learning_an_image_pytorch.py at commit
6ee3546bda615f51abe684ce9edefeb414689135) as its users run it, with only the import changed: each
of its shipped configs (data/config.json, data/config_hash.json, data/config_oneblob.json, the
same keys and values below), its keyword arguments, ``model.jit_fusion =
tcnn.supports_jit_fusion()``, ``print(model)``, a relative-L2 loss with Adam, the transposed
coordinate view it renders with, the Encoding + Network alternative it describes, and
``tcnn.free_temporary_memory()`` at the end. Our own code, on a small picture and few steps."""
import warnings

import pytest
import torch

import tinyfuse.tcnn as tcnn

LOSS = {"otype": "RelativeL2"}
OPTIMIZER = {"otype": "Adam", "learning_rate": 1e-2, "beta1": 0.9, "beta2": 0.99, "epsilon": 1e-8, "l2_reg": 1e-8}
ONEBLOB = {
    "loss": LOSS,
    "optimizer": OPTIMIZER,
    "encoding": {"otype": "OneBlob", "n_bins": 64},
    "network": {"otype": "FullyFusedMLP", "activation": "ReLU", "output_activation": "None", "n_neurons": 128,
                "n_hidden_layers": 5},
}
CONFIGS = {
    "config.json": ONEBLOB,
    "config_oneblob.json": ONEBLOB,
    "config_hash.json": {
        "loss": LOSS,
        "optimizer": dict(OPTIMIZER, epsilon=1e-15, l2_reg=1e-6),
        "encoding": {"otype": "HashGrid", "n_levels": 16, "n_features_per_level": 2, "log2_hashmap_size": 15,
                     "base_resolution": 16, "per_level_scale": 1.5, "fixed_point_pos": False},
        "network": {"otype": "FullyFusedMLP", "activation": "ReLU", "output_activation": "None", "n_neurons": 64,
                    "n_hidden_layers": 2},
    },
}

SIZE = 24  # the picture's side


def picture():
    """An RGB picture with structure at several scales."""
    t = torch.linspace(0, 1, SIZE)
    yy, xx = torch.meshgrid(t, t, indexing="ij")
    return torch.stack([0.5 + 0.5 * torch.sin(9 * xx), 0.5 + 0.5 * torch.cos(7 * yy + 3 * xx),
                        ((xx - 0.5) ** 2 + (yy - 0.5) ** 2 < 0.1).float()], -1)


def lookup(image, xs):
    """Bilinear lookup at positions in [0, 1]^2 (x across, y down), as the sample's Image module."""
    h, w = image.shape[:2]
    xs = xs * torch.tensor([w, h], dtype=xs.dtype)
    i = xs.long()
    f = xs - i
    x0, y0 = i[:, 0].clamp(0, w - 1), i[:, 1].clamp(0, h - 1)
    x1, y1 = (x0 + 1).clamp(max=w - 1), (y0 + 1).clamp(max=h - 1)
    fx, fy = f[:, 0:1], f[:, 1:2]
    return (image[y0, x0] * (1 - fx) * (1 - fy) + image[y0, x1] * fx * (1 - fy) +
            image[y1, x0] * (1 - fx) * fy + image[y1, x1] * fx * fy)


def train(model, image, steps, batch):
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    torch.manual_seed(0)
    losses = []
    for _ in range(steps):
        xs = torch.rand([batch, 2], dtype=torch.float32)
        with torch.no_grad():
            targets = lookup(image, xs)
        output = model(xs)
        relative_l2_error = (output - targets.to(output.dtype)) ** 2 / (output.detach() ** 2 + 0.01)
        loss = relative_l2_error.mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def render_coordinates():
    half = 0.5 / SIZE
    xs = torch.linspace(half, 1 - half, SIZE)
    xv, yv = torch.meshgrid([xs, xs], indexing="ij")
    return torch.stack((yv.flatten(), xv.flatten())).t()  # a transposed view: not contiguous


@pytest.mark.parametrize("name", list(CONFIGS))
def test_sample_trains_with_each_shipped_config(name, capsys):
    config = CONFIGS[name]
    image = picture()
    n_channels = image.shape[2]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every key of the shipped configs is known: no warning
        model = tcnn.NetworkWithInputEncoding(n_input_dims=2, n_output_dims=n_channels,
                                              encoding_config=config["encoding"], network_config=config["network"])
    model.jit_fusion = tcnn.supports_jit_fusion()
    print(model)
    assert "NetworkWithInputEncoding" in capsys.readouterr().out
    assert model.jit_fusion == tcnn.supports_jit_fusion()

    xy = render_coordinates()
    assert not xy.is_contiguous()
    with torch.no_grad():
        before = model(xy).reshape(SIZE, SIZE, n_channels).clamp(0.0, 1.0)
    losses = train(model, image, steps=25, batch=1 << 11)
    early, late = sum(losses[:3]) / 3, sum(losses[-3:]) / 3
    assert late < 0.5 * early, losses
    with torch.no_grad():
        after = model(xy).reshape(SIZE, SIZE, n_channels).clamp(0.0, 1.0)
        assert torch.equal(model(xy), model(xy.contiguous()))
    error = lambda img: (img - image).square().mean().item()  # noqa: E731
    assert error(after) < error(before)
    tcnn.free_temporary_memory()


def test_sample_alternative_encoding_then_network():
    # "The following is equivalent to the above, but slower": Encoding, then Network, in a Sequential.
    config = CONFIGS["config_hash.json"]
    encoding = tcnn.Encoding(n_input_dims=2, encoding_config=config["encoding"])
    network = tcnn.Network(n_input_dims=encoding.n_output_dims, n_output_dims=3, network_config=config["network"])
    model = torch.nn.Sequential(encoding, network)
    losses = train(model, picture(), steps=25, batch=1 << 11)
    assert sum(losses[-3:]) < 0.5 * sum(losses[:3]), losses
    # The same parameters as the combined module (network first, then the encoding).
    combined = tcnn.NetworkWithInputEncoding(2, 3, config["encoding"], config["network"])
    assert combined.n_params == encoding.n_params + network.n_params
