"""Hostile input through the Python package (docs/ERRORS.md, "Limits"): state dicts with extra keys
and subclasses with state of their own, configs nested beyond the limits, messages that would be
cut inside a UTF-8 character, and models larger than the machine. Each gets the documented error
and nothing is lost.
"""
import os

import pytest
import torch

import tinyfuse
import tinyfuse.tcnn as tcnn

NET = {"otype": "PortableMLP", "activation": "ReLU", "output_activation": "None", "n_neurons": 16,
       "n_hidden_layers": 1}


def make(seed):
    m = tcnn.Network(2, 3, NET, seed=seed)
    with torch.no_grad():
        m.params.uniform_(-0.5, 0.5, generator=torch.Generator().manual_seed(seed))
    return m


# ---- load_state_dict --------------------------------------------------------------------------

def test_strict_false_loads_the_params_beside_unexpected_keys():
    a, b = make(1), make(2)
    result = b.load_state_dict({"params": a.params.detach().clone(), "junk": torch.zeros(3)}, strict=False)
    assert torch.equal(b.params.detach(), a.params.detach())
    assert result.unexpected_keys == ["junk"] and result.missing_keys == []


def test_strict_false_with_params_missing_changes_nothing():
    b = make(2)
    before = b.params.detach().clone()
    result = b.load_state_dict({"junk": torch.zeros(3)}, strict=False)
    assert result.missing_keys == ["params"] and result.unexpected_keys == ["junk"]
    assert torch.equal(b.params.detach(), before)


def test_strict_true_with_an_unexpected_key_copies_nothing():
    a, b = make(1), make(2)
    before = b.params.detach().clone()
    with pytest.raises(RuntimeError, match='Unexpected key\\(s\\) in state_dict: "junk"'):
        b.load_state_dict({"params": a.params.detach().clone(), "junk": torch.zeros(3)})
    assert torch.equal(b.params.detach(), before)


class WithState(tcnn.Network):
    """A subclass holding a buffer and a child module of its own."""

    def __init__(self, seed):
        super().__init__(2, 3, NET, seed=seed)
        self.register_buffer("scale", torch.full((3,), float(seed)))
        self.head = torch.nn.Linear(3, 1)

    def forward(self, x):
        return self.head(super().forward(x) * self.scale)


def test_a_subclass_loads_its_own_buffers_and_children():
    torch.manual_seed(0)
    a = WithState(1)
    with torch.no_grad():
        a.params.uniform_(-0.5, 0.5)
    b = WithState(2)
    assert sorted(a.state_dict()) == ["head.bias", "head.weight", "params", "scale"]
    b.load_state_dict(a.state_dict())
    x = torch.rand(10, 2)
    assert torch.equal(b(x), a(x))
    # Inside a parent module too (torch's own recursion through children).
    pa, pb = torch.nn.Sequential(WithState(3)), torch.nn.Sequential(WithState(4))
    pb.load_state_dict(pa.state_dict())
    assert torch.equal(pb(x), pa(x))
    # strict=True still refuses a missing buffer, before copying anything.
    sd = a.state_dict()
    del sd["scale"]
    c = WithState(5)
    before = c.params.detach().clone()
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "scale"'):
        c.load_state_dict(sd)
    assert torch.equal(c.params.detach(), before)


# ---- configs ----------------------------------------------------------------------------------

def deep(levels):
    value = []
    for _ in range(levels - 1):
        value = [value]
    return value


def test_configs_nested_beyond_the_json_limit_are_config_errors():
    with pytest.raises(tinyfuse.ConfigError, match="kMaxJsonDepth"):
        tcnn.Network(2, 3, {**NET, "n_neurons": deep(200)})
    with pytest.raises(tinyfuse.ConfigError, match="kMaxJsonDepth"):
        tcnn.Encoding(2, {"otype": "Identity", "scale": deep(65)})


def test_nested_encodings_beyond_the_nesting_limit_are_config_errors():
    config = {"otype": "Identity"}
    for _ in range(17):
        config = {"otype": "Composite", "nested": [config]}
    with pytest.raises(tinyfuse.ConfigError, match="kMaxConfigNesting"):
        tcnn.Encoding(2, config)


def test_a_long_non_ascii_otype_is_a_config_error_not_a_unicode_error():
    otype = "é" * 60  # 120 bytes: cut at 77 bytes it would end inside a character
    with pytest.raises(tinyfuse.ConfigError, match="unknown otype") as info:
        tcnn.Network(2, 3, {**NET, "otype": otype})
    assert "é" * 10 in str(info.value)
    with pytest.raises(tinyfuse.ConfigError):
        tcnn.Encoding(2, {"otype": "Composite", "nested": [{"otype": otype}]})


# ---- memory -----------------------------------------------------------------------------------

def host_memory():
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def test_a_model_no_machine_holds_is_refused_at_construction():
    # 8 HashGrids of 4.2 G parameters side by side: 33 G parameters, 266 GB of FP32 values and
    # gradients before torch allocates anything (a 128 GiB machine held the 133 GB of four).
    grid = {"otype": "HashGrid", "n_levels": 31, "n_features_per_level": 8, "log2_hashmap_size": 24,
            "base_resolution": 1 << 20, "per_level_scale": 1.0, "n_dims_to_encode": 2, "dims_to_encode_begin": 0}
    n = 8 * 31 * 8 << 24
    if host_memory() >= 8 * n:
        pytest.skip("this machine holds the model's values and gradients")
    with pytest.raises(tinyfuse.OutOfMemoryError, match="their gradients") as info:
        tcnn.Encoding(2, {"otype": "Composite", "nested": [grid] * 8})
    assert "FP32 parameters" in str(info.value) and "nothing was changed" in str(info.value)


def test_the_issues_wide_mlp_is_refused_before_backward_could_be_killed():
    # PortableMLP 8192 wide, 64 layers: 4.3 G parameters; values and gradients need 34 GB.
    n = 64 * 8192 + 8192 + 63 * (8192 * 8192 + 8192) + 8192 * 64 + 64
    if host_memory() >= 8 * n:
        pytest.skip("this machine holds the model's values and gradients")
    with pytest.raises(tinyfuse.OutOfMemoryError, match=f"{n} parameters"):
        tcnn.Network(64, 64, {"otype": "PortableMLP", "n_neurons": 8192, "n_hidden_layers": 64})
