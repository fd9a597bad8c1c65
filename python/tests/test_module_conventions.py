"""torch.nn.Module conventions: state_dict, pickling, copies, .to(), threads."""
import copy
import io
import pickle
import threading

import pytest
import torch

import tinyfuse.tcnn as tcnn

ENC = {"otype": "HashGrid", "n_levels": 4, "n_features_per_level": 2, "log2_hashmap_size": 10,
       "base_resolution": 4, "per_level_scale": 2.0}
NET = {"otype": "PortableMLP", "activation": "ReLU", "output_activation": "None", "n_neurons": 16,
       "n_hidden_layers": 2}


def make(seed=1337):
    m = tcnn.NetworkWithInputEncoding(2, 3, ENC, NET, seed=seed)
    with torch.no_grad():
        m.params.uniform_(-0.5, 0.5, generator=torch.Generator().manual_seed(seed))
    return m


def test_state_dict_round_trip():
    a, b = make(1), make(2)
    x = torch.rand(20, 2)
    assert not torch.equal(a(x), b(x))
    assert list(a.state_dict()) == ["params"]
    b.load_state_dict(a.state_dict())
    torch.testing.assert_close(b(x), a(x), rtol=0, atol=0)
    buf = io.BytesIO()
    torch.save(a.state_dict(), buf)
    buf.seek(0)
    c = make(3)
    c.load_state_dict(torch.load(buf))
    torch.testing.assert_close(c(x), a(x), rtol=0, atol=0)
    with pytest.raises(RuntimeError, match="size mismatch"):
        tcnn.Network(2, 3, NET).load_state_dict(a.state_dict())


def test_pickle_rebuilds_the_native_object():
    a = make()
    x = torch.rand(20, 2)
    expected = a(x)
    b = pickle.loads(pickle.dumps(a))
    assert b._backends == {}  # nothing native travelled
    torch.testing.assert_close(b(x), expected, rtol=0, atol=0)
    assert len(b._backends) == 1
    buf = io.BytesIO()
    torch.save(a, buf)
    buf.seek(0)
    c = torch.load(buf, weights_only=False)
    torch.testing.assert_close(c(x), expected, rtol=0, atol=0)


def test_deepcopy_is_independent():
    a = make()
    b = copy.deepcopy(a)
    x = torch.rand(10, 2)
    torch.testing.assert_close(b(x), a(x), rtol=0, atol=0)
    with torch.no_grad():
        b.params.add_(0.1)
    assert not torch.equal(b(x), a(x))


def test_to_float64_uses_the_fp64_backend():
    a = make()
    x = torch.rand(10, 2)
    expected = a(x)
    a.to(torch.float64)
    out = a(x.double())
    assert out.dtype == torch.float64
    torch.testing.assert_close(out.float(), expected, rtol=1e-5, atol=1e-6)
    a.float()
    torch.testing.assert_close(a(x), expected, rtol=0, atol=0)


def test_to_cpu_is_a_no_op_and_repr_names_the_config():
    a = make()
    assert a.to("cpu") is a
    r = repr(a)
    assert "n_input_dims=2" in r and "'otype': 'Grid'" in r and "'type': 'Hash'" in r and "seed=1337" in r


def test_wrong_device_is_an_error_naming_both_devices():
    a = make()
    x = torch.rand(3, 2, device="meta")
    with pytest.raises(ValueError, match="meta.*cpu"):
        a(x)
    a.to("meta")
    with pytest.raises(NotImplementedError, match="CPU and CUDA"):
        a(x)


def test_threads_sharing_a_module_get_their_own_parameters():
    a = make(1)
    b = copy.deepcopy(make(2))
    x = torch.rand(2000, 2)
    ea, eb = a(x).detach(), b(x).detach()
    failures = []

    def run(m, expected):
        for _ in range(20):
            if not torch.equal(m(x).detach(), expected):
                failures.append(m.seed)

    threads = [threading.Thread(target=run, args=(m, e)) for m, e in [(a, ea), (b, eb), (a, ea), (b, eb)]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
