"""How projects built on tinycudann call it, reproduced with our own small models and only the import
changed: nerfstudio's nerfacto field, torch-ngp's and nerfacc's NGP networks, instant-nsr-pl's and
threestudio's progressive hash grids (configs with keys of their own, level masks, eikonal losses,
tcnn.free_temporary_memory()). Sizes are shrunk; the calls, widths and config shapes are theirs."""
import gc
import math
import warnings

import pytest
import torch

import tinyfuse.tcnn as tcnn
from tinyfuse.tcnn import _config_keys


def next16(n):
    return -(-n // 16) * 16


def ffmlp(n_neurons, n_hidden, output_activation="None"):
    return {"otype": "FullyFusedMLP", "activation": "ReLU", "output_activation": output_activation,
            "n_neurons": n_neurons, "n_hidden_layers": n_hidden}


def hash_grid(n_levels=8, log2_size=12, base=16, max_res=256):
    growth = math.exp((math.log(max_res) - math.log(base)) / (n_levels - 1))
    return {"otype": "HashGrid", "n_levels": n_levels, "n_features_per_level": 2, "log2_hashmap_size": log2_size,
            "base_resolution": base, "per_level_scale": growth}


def trains(params, step_fn, steps=30, lr=1e-2):
    opt = torch.optim.Adam(params, lr=lr, eps=1e-15)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = step_fn()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def decreased(losses):
    return sum(losses[-3:]) < 0.7 * sum(losses[:3])


class Nerfacto(torch.nn.Module):
    """nerfstudio's nerfacto field: a hash grid + small MLP for density and 15 geometry features,
    spherical harmonics of the view direction, a learned appearance embedding of 32, and a colour
    head reading 16 + 15 + 32 = 63 inputs (padded to 64 as tinycudann pads them)."""

    def __init__(self, split_base):
        super().__init__()
        self.direction_encoding = tcnn.Encoding(n_input_dims=3, encoding_config={"otype": "SphericalHarmonics",
                                                                                  "degree": 4})
        if split_base:  # newer nerfstudio: the grid and its MLP as two modules
            self.mlp_base_grid = tcnn.Encoding(n_input_dims=3, encoding_config=hash_grid())
            self.mlp_base_mlp = tcnn.Network(n_input_dims=self.mlp_base_grid.n_output_dims, n_output_dims=16,
                                             network_config=ffmlp(64, 1))
            self.mlp_base = torch.nn.Sequential(self.mlp_base_grid, self.mlp_base_mlp)
        else:
            self.mlp_base = tcnn.NetworkWithInputEncoding(n_input_dims=3, n_output_dims=16,
                                                          encoding_config=hash_grid(), network_config=ffmlp(64, 1))
        self.embedding_appearance = torch.nn.Embedding(4, 32)
        self.mlp_head = tcnn.Network(n_input_dims=self.direction_encoding.n_output_dims + 15 + 32, n_output_dims=3,
                                     network_config=ffmlp(64, 2, "Sigmoid"))

    def forward(self, positions, directions, camera_indices):
        positions = (positions + 2.0) / 4.0  # the scene box to [0, 1]
        h = self.mlp_base(positions.view(-1, 3)).view(*positions.shape[:-1], -1)
        density_before_activation, geo = torch.split(h, [1, 15], dim=-1)
        density = torch.exp(density_before_activation.to(positions))  # nerfstudio's trunc_exp, forward
        d = self.direction_encoding(((directions + 1.0) / 2.0).view(-1, 3))
        head_in = torch.cat([d, geo.view(-1, 15), self.embedding_appearance(camera_indices)], dim=-1)
        rgb = self.mlp_head(head_in).view(*directions.shape[:-1], -1).to(directions)
        return density, rgb


@pytest.mark.parametrize("split_base", [False, True], ids=["NetworkWithInputEncoding", "grid_then_mlp"])
def test_nerfstudio_nerfacto_field(split_base):
    torch.manual_seed(0)
    field = Nerfacto(split_base)
    assert field.mlp_head.n_input_dims == 63
    assert field.mlp_head.n_params == 64 * next16(63) + 64 * 64 + 16 * 64  # tinycudann's count
    positions, directions = torch.rand(512, 3) * 4 - 2, torch.nn.functional.normalize(torch.randn(512, 3), dim=-1)
    cams = torch.randint(0, 4, (512,))
    target = torch.sigmoid(positions[:, :1] * 2) * torch.tensor([1.0, 0.5, 0.2])

    def step():
        density, rgb = field(positions, directions, cams)
        assert density.shape == (512, 1) and rgb.shape == (512, 3)
        return (rgb - target).square().mean() + 1e-3 * density.mean()

    assert decreased(trains(field.parameters(), step))


class TorchNgp(torch.nn.Module):
    """torch-ngp's NeRFNetwork with the tcnn backbone: grid encoder, sigma net 32 -> 1 + 15, SH
    direction encoder of 16, colour net 16 + 15 = 31 -> 3."""

    def __init__(self, bound=1.0):
        super().__init__()
        self.bound = bound
        per_level_scale = math.exp2(math.log2(2048 * bound / 16) / (8 - 1))
        self.encoder = tcnn.Encoding(n_input_dims=3, encoding_config=dict(hash_grid(), per_level_scale=per_level_scale))
        self.sigma_net = tcnn.Network(n_input_dims=self.encoder.n_output_dims, n_output_dims=1 + 15,
                                      network_config=ffmlp(64, 1))
        self.encoder_dir = tcnn.Encoding(n_input_dims=3, encoding_config={"otype": "SphericalHarmonics", "degree": 4})
        self.color_net = tcnn.Network(n_input_dims=self.encoder_dir.n_output_dims + 15, n_output_dims=3,
                                      network_config=ffmlp(64, 2))

    def forward(self, x, d):
        x = (x + self.bound) / (2 * self.bound)
        h = self.sigma_net(self.encoder(x))
        sigma = torch.exp(h[..., 0])
        geo_feat = h[..., 1:]
        d = self.encoder_dir((d + 1) / 2)
        color = torch.sigmoid(self.color_net(torch.cat([d, geo_feat], dim=-1)))
        return sigma, color


def test_torch_ngp_network():
    torch.manual_seed(1)
    net = TorchNgp()
    assert net.color_net.n_input_dims == 31 and net.color_net.n_params == 64 * 32 + 64 * 64 + 16 * 64
    x, d = torch.rand(256, 3) * 2 - 1, torch.nn.functional.normalize(torch.randn(256, 3), dim=-1)
    target = (x[:, :3] + 1) / 2

    def step():
        sigma, color = net(x, d)
        return (color - target).square().mean() + 1e-4 * sigma.mean()

    assert decreased(trains(net.parameters(), step))
    with torch.no_grad():  # the occupancy-grid update queries density under no_grad
        sigma, _ = net(torch.rand(1000, 3) * 2 - 1, torch.zeros(1000, 3))
    assert torch.isfinite(sigma).all()


def test_nerfacc_ngp_radiance_field():
    # nerfacc's NGPRadianceField: NetworkWithInputEncoding base, a Composite-wrapped SH direction
    # encoding, a 31-input Sigmoid head.
    torch.manual_seed(2)
    mlp_base = tcnn.NetworkWithInputEncoding(n_input_dims=3, n_output_dims=1 + 15, encoding_config=hash_grid(),
                                             network_config=ffmlp(64, 1))
    direction_encoding = tcnn.Encoding(n_input_dims=3, encoding_config={
        "otype": "Composite", "nested": [{"n_dims_to_encode": 3, "otype": "SphericalHarmonics", "degree": 4}]})
    mlp_head = tcnn.Network(n_input_dims=direction_encoding.n_output_dims + 15, n_output_dims=3,
                            network_config=ffmlp(64, 2, "Sigmoid"))
    assert mlp_head.n_input_dims == 31
    x, d = torch.rand(256, 3), torch.nn.functional.normalize(torch.randn(256, 3), dim=-1)
    target = x.flip(-1)
    params = list(mlp_base.parameters()) + list(mlp_head.parameters())

    def step():
        h = mlp_base(x).view(-1, 16).to(x)
        density, geo = torch.exp(h[:, :1] - 1), h[:, 1:]
        rgb = mlp_head(torch.cat([direction_encoding((d + 1) / 2), geo], -1)).float()
        return (rgb - target).square().mean() + 1e-4 * density.mean()

    assert decreased(trains(params, step))


class ProgressiveBandHashGrid(torch.nn.Module):
    """instant-nsr-pl's and threestudio's progressive grid: the whole config (keys of their own
    included) goes to tcnn.Encoding; levels beyond the current one are masked off in PyTorch."""

    def __init__(self, in_channels, config, dtype=None):
        super().__init__()
        kwargs = {} if dtype is None else {"dtype": dtype}
        self.encoding = tcnn.Encoding(in_channels, dict(config, otype="HashGrid"), **kwargs)
        self.n_level, self.n_features_per_level = config["n_levels"], config["n_features_per_level"]
        self.start_level, self.start_step, self.update_steps = (config["start_level"], config["start_step"],
                                                                config["update_steps"])
        self.include_xyz = config.get("include_xyz", False)
        self.n_output_dims = self.encoding.n_output_dims + (in_channels if self.include_xyz else 0)
        self.current_level = self.start_level
        self.mask = torch.zeros(self.n_level * self.n_features_per_level, dtype=torch.float32)
        self.mask[:self.current_level * self.n_features_per_level] = 1.0

    def forward(self, x):
        enc = self.encoding(x) * self.mask
        return torch.cat([x * 2 - 1, enc], -1) if self.include_xyz else enc

    def update_step(self, global_step):
        level = min(self.start_level + max(global_step - self.start_step, 0) // self.update_steps, self.n_level)
        self.current_level = level
        self.mask[:level * self.n_features_per_level] = 1.0


PROGRESSIVE = dict(hash_grid(n_levels=8, log2_size=12, base=8), start_level=2, start_step=0, update_steps=5,
                   include_xyz=True)


def sphere_sdf_model(grid):
    mlp = torch.nn.Sequential(torch.nn.Linear(grid.n_output_dims, 32), torch.nn.Softplus(beta=100),
                              torch.nn.Linear(32, 1))
    return mlp


@pytest.mark.parametrize("dtype", [None, torch.float32], ids=["instant-nsr-pl", "threestudio_float32"])
def test_progressive_hash_grid_with_eikonal_loss(dtype):
    _config_keys.forget_warnings()
    torch.manual_seed(3)
    with pytest.warns(tcnn.IgnoredConfigKeyWarning) as record:
        grid = ProgressiveBandHashGrid(3, PROGRESSIVE, dtype)
    assert sorted(str(w.message).split('"')[1] for w in record) == [
        "encoding.include_xyz", "encoding.start_level", "encoding.start_step", "encoding.update_steps"]
    mlp = sphere_sdf_model(grid)
    x = torch.rand(256, 3)
    true_sdf = (x - 0.5).norm(dim=-1, keepdim=True) - 0.3
    params = list(grid.parameters()) + list(mlp.parameters())
    step_count = [0]

    def step():
        grid.update_step(step_count[0])
        step_count[0] += 1
        xg = x.clone().requires_grad_(True)
        sdf = mlp(grid(xg))
        # NeuS's eikonal term: the analytic SDF gradient, differentiated again through the grid.
        (grad,) = torch.autograd.grad(sdf, xg, grad_outputs=torch.ones_like(sdf), create_graph=True)
        eikonal = ((grad.norm(dim=-1) - 1) ** 2).mean()
        return (sdf - true_sdf).abs().mean() + 0.1 * eikonal

    losses = trains(params, step, steps=30, lr=5e-3)
    assert decreased(losses), losses
    assert grid.current_level > PROGRESSIVE["start_level"]
    # Mesh export (instant-nsr-pl) and guidance set-up (threestudio) free temporary memory.
    with torch.no_grad():
        sdf = mlp(grid(torch.rand(2000, 3)))
    assert torch.isfinite(sdf).all()
    gc.collect()
    tcnn.free_temporary_memory()


def test_threestudio_network_with_a_config_of_its_own():
    # threestudio passes network configs through config_to_primitive: the same dicts, with
    # FullyFusedMLP / CutlassMLP and any input width.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for otype in ("FullyFusedMLP", "CutlassMLP"):
            net = tcnn.Network(n_input_dims=35, n_output_dims=4,
                               network_config={"otype": otype, "activation": "ReLU", "output_activation": "None",
                                               "n_neurons": 64, "n_hidden_layers": 1})
            assert net.n_params == 64 * 48 + 16 * 64
            assert net(torch.rand(7, 35)).shape == (7, 4)
