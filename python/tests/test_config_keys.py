"""Config keys: what tinycudann reads is known; what no object reads is a warning (once per key,
naming it, with a "did you mean" for near misses), and an error with strict=True."""
import warnings

import pytest
import torch

import tinyfuse
import tinyfuse.tcnn as tcnn
from tinyfuse.tcnn import _config_keys

HASHGRID = {"otype": "HashGrid", "n_levels": 4, "n_features_per_level": 2, "log2_hashmap_size": 10,
            "base_resolution": 4, "per_level_scale": 1.5}
MLP = {"otype": "FullyFusedMLP", "activation": "ReLU", "output_activation": "None", "n_neurons": 16,
       "n_hidden_layers": 1}


@pytest.fixture(autouse=True)
def fresh_warnings():
    _config_keys.forget_warnings()
    yield
    _config_keys.forget_warnings()


def ignored_warnings(record):
    return [str(w.message) for w in record if issubclass(w.category, tcnn.IgnoredConfigKeyWarning)]


def test_client_keys_warn_once_per_key_and_change_nothing():
    # instant-nsr-pl and threestudio hand their whole encoding config to tcnn.Encoding.
    client = dict(HASHGRID, include_xyz=True, start_level=4, start_step=0, update_steps=1000)
    with pytest.warns(tcnn.IgnoredConfigKeyWarning) as record:
        enc = tcnn.Encoding(3, client, seed=3)
    messages = ignored_warnings(record)
    assert len(messages) == 4
    for key in ("include_xyz", "start_level", "start_step", "update_steps"):
        assert sum(f'"encoding.{key}"' in m for m in messages) == 1, (key, messages)
    assert all("strict=True" in m and "n_levels" in m for m in messages)  # the fix and what is read
    plain = tcnn.Encoding(3, HASHGRID, seed=3)
    x = torch.rand(17, 3)
    with torch.no_grad():
        assert torch.equal(enc(x), plain(x)) and torch.equal(enc.params, plain.params)
    with warnings.catch_warnings():
        warnings.simplefilter("error", tcnn.IgnoredConfigKeyWarning)
        tcnn.Encoding(3, client)  # the same keys again: no second warning
        enc.double()(x.double())  # nor when another backend is built for the module


def test_misspelling_keeps_its_suggestion_in_the_warning():
    with pytest.warns(tcnn.IgnoredConfigKeyWarning, match=r'"network.n_neuron".*did you mean "n_neurons"'):
        net = tcnn.Network(16, 2, dict(MLP, n_neuron=64))
    assert net.hyperparams["n_neurons"] == 16  # the misspelt key set nothing


def test_strict_restores_the_error():
    with pytest.raises(tinyfuse.ConfigError, match=r'encoding.include_xyz'):
        tcnn.Encoding(3, dict(HASHGRID, include_xyz=True), strict=True)
    with pytest.raises(tinyfuse.ConfigError, match=r'did you mean "n_neurons"'):
        tcnn.Network(16, 2, dict(MLP, n_neuron=64), strict=True)
    with pytest.raises(tinyfuse.ConfigError, match=r'network.foo'):
        tcnn.NetworkWithInputEncoding(3, 2, HASHGRID, dict(MLP, foo=1), strict=True)


def test_nested_keys_are_named_by_their_path():
    composite = {"otype": "Composite", "nested": [dict(HASHGRID, n_dims_to_encode=2, start_level=2),
                                                  {"otype": "Identity", "include_xyz": True}]}
    with pytest.warns(tcnn.IgnoredConfigKeyWarning) as record:
        tcnn.NetworkWithInputEncoding(3, 2, composite, dict(MLP, start_step=0))
    messages = " ".join(ignored_warnings(record))
    for path in ("encoding.nested[0].start_level", "encoding.nested[1].include_xyz", "network.start_step"):
        assert f'"{path}"' in messages, (path, messages)


def test_other_rules_stay_errors_without_strict():
    with pytest.raises(tinyfuse.ConfigError, match="network.n_neurons"):
        tcnn.Network(16, 2, dict(MLP, n_neurons=48, include_xyz=True))
    with pytest.raises(tinyfuse.ConfigError, match="encoding.n_levels"):
        tcnn.Encoding(3, dict(HASHGRID, n_levels="4"))


def test_tinycudanns_own_keys_are_known():
    # fixed_point_pos (data/config_hash.json) is read by tinycudann; tinyfuse keeps it and, having
    # no JIT fusion, computes the same either way. MegakernelMLP is tinycudann's FullyFusedMLP.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a = tcnn.Encoding(2, dict(HASHGRID, fixed_point_pos=False), seed=5)
        b = tcnn.Encoding(2, dict(HASHGRID, fixed_point_pos=True), seed=5)
        net = tcnn.Network(16, 2, dict(MLP, otype="MegakernelMLP", n_input_dims=16, n_output_dims=2))
    assert b.hyperparams["fixed_point_pos"] is True
    x = torch.rand(33, 2)
    with torch.no_grad():
        assert torch.equal(a(x), b(x))
    assert net.hyperparams["otype"] == "FullyFusedMLP"
