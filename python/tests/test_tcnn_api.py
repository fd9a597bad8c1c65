"""tinycudann's public Python API exists in tinyfuse.tcnn with the same meaning.

The names are those of tinycudann's bindings/torch/tinycudann (__init__.py and modules.py) at
tiny-cuda-nn commit 6ee3546bda615f51abe684ce9edefeb414689135. tinycudann.modules' module-level
names that only describe its own build (_C, ALL_COMPUTE_CAPABILITIES, the imported gc, os, ...)
are not part of it.
"""
import importlib
import inspect
import os
import pickle

import pytest
import torch

import tinyfuse
import tinyfuse.tcnn as tcnn

HASHGRID = {"otype": "HashGrid", "n_levels": 4, "n_features_per_level": 2, "log2_hashmap_size": 10,
            "base_resolution": 4, "per_level_scale": 1.5}
FFMLP = {"otype": "FullyFusedMLP", "activation": "ReLU", "output_activation": "None", "n_neurons": 16,
         "n_hidden_layers": 1}

# tinycudann/__init__.py's __all__.
PACKAGE_NAMES = ["supports_jit_fusion", "free_temporary_memory", "NetworkWithInputEncoding", "Network", "Encoding"]
# tinycudann/modules.py's public functions and classes, and the module attribute it computes.
MODULES_NAMES = PACKAGE_NAMES + ["rtc_set_cache_dir", "null_tensor_like", "null_tensor_to_none", "Module",
                                 "system_compute_capability"]
# Constructor parameters, in order, with their defaults (tinyfuse adds `strict` at the end).
CONSTRUCTORS = {
    "Network": [("n_input_dims", None), ("n_output_dims", None), ("network_config", None), ("seed", 1337)],
    "NetworkWithInputEncoding": [("n_input_dims", None), ("n_output_dims", None), ("encoding_config", None),
                                 ("network_config", None), ("seed", 1337)],
    "Encoding": [("n_input_dims", None), ("encoding_config", None), ("seed", 1337), ("dtype", None)],
    "Module": [("seed", 1337)],
}
# What every module instance has (tinycudann's Module and its subclasses), plus n_params.
ATTRIBUTES = ["n_input_dims", "n_output_dims", "params", "seed", "dtype", "loss_scale", "native_tcnn_module",
              "jit_fusion", "n_params"]
# tinycudann's native module methods (bindings.cpp's Module class).
NATIVE_METHODS = ["fwd", "bwd", "bwd_bwd_input", "initial_params", "n_input_dims", "n_params", "param_precision",
                  "n_output_dims", "output_precision", "hyperparams", "name"]


def test_every_public_name_exists_in_both_places():
    modules = importlib.import_module("tinyfuse.tcnn.modules")
    from tinyfuse.tcnn.modules import Network  # noqa: F401  (the `tinycudann.modules` import path)
    for name in MODULES_NAMES:
        assert hasattr(modules, name), f"tinyfuse.tcnn.modules.{name} is missing"
    for name in PACKAGE_NAMES:
        assert getattr(tcnn, name) is getattr(modules, name), name
    assert set(PACKAGE_NAMES) <= set(tcnn.__all__)


@pytest.mark.parametrize("cls", list(CONSTRUCTORS))
def test_constructor_arguments_are_tinycudanns(cls):
    params = list(inspect.signature(getattr(tcnn, cls).__init__).parameters.values())[1:]  # without self
    expected = CONSTRUCTORS[cls]
    got = [(p.name, None if p.default is inspect.Parameter.empty else p.default) for p in params[:len(expected)]]
    assert got == expected
    assert [p.name for p in params[len(expected):]] == ["strict"] and params[-1].default is False


def modules_under_test():
    return [tcnn.Network(20, 3, FFMLP), tcnn.Encoding(3, HASHGRID),
            tcnn.NetworkWithInputEncoding(3, 2, HASHGRID, FFMLP)]


def test_every_module_attribute_exists_with_tinycudanns_meaning():
    net, enc, nwie = modules_under_test()
    for m in (net, enc, nwie):
        for name in ATTRIBUTES:
            assert hasattr(m, name), f"{type(m).__name__}.{name} is missing"
        assert m.n_params == m.params.numel() == m.native_tcnn_module.n_params()
        assert m.params.dtype == torch.float32 and m.params.requires_grad and m.seed == 1337
        assert list(m.state_dict()) == ["params"]
        for name in NATIVE_METHODS:
            assert callable(getattr(m.native_tcnn_module, name)), name
        assert m.native_tcnn_module.n_input_dims() == m.n_input_dims
        assert m.native_tcnn_module.n_output_dims() >= m.n_output_dims  # the padded width
        assert isinstance(m.native_tcnn_module.hyperparams(), dict) and m.native_tcnn_module.name()
        assert f"n_input_dims={m.n_input_dims}" in repr(m)
    assert (net.n_input_dims, net.n_output_dims) == (20, 3) and net.native_tcnn_module.n_output_dims() == 16
    assert enc.n_output_dims == 8 and nwie.n_output_dims == 2
    # The CPU backend computes in float32: that is the modules' precision and loss scale there.
    assert net.dtype == torch.float32 and net.loss_scale == 1.0
    assert net.native_tcnn_module.param_precision() == tcnn.Precision.Fp32


def test_jit_fusion_is_accepted_and_honest():
    net = tcnn.Network(16, 1, FFMLP)
    assert net.jit_fusion is False
    net.jit_fusion = tcnn.supports_jit_fusion()  # the sample's line
    net.jit_fusion = True
    # Nothing is compiled at run time: it reads True only where the fused kernels run.
    assert net.jit_fusion == tcnn.supports_jit_fusion()
    assert net.native_tcnn_module.jit_fusion == net.jit_fusion
    with pytest.raises(AttributeError, match="can not be deleted"):
        del net.jit_fusion
    x = torch.rand(5, 16)
    net.jit_fusion = False
    before = net(x)
    net.jit_fusion = True
    assert torch.equal(net(x), before)
    assert pickle.loads(pickle.dumps(net)).jit_fusion == net.jit_fusion


def test_supports_jit_fusion_reports_the_fused_kernels():
    expected = (tinyfuse.built_with_cuda and torch.cuda.is_available() and tinyfuse.gpu_count() > 0
                and torch.cuda.get_device_capability() >= (7, 5))
    assert tcnn.supports_jit_fusion() is bool(expected)


def test_system_compute_capability():
    if torch.cuda.is_available() and torch.cuda.device_count():
        major, minor = torch.cuda.get_device_capability(0)
        assert tcnn.system_compute_capability <= major * 10 + minor
    else:
        assert tcnn.system_compute_capability is None


def test_free_temporary_memory_runs_anywhere():
    net = tcnn.Network(16, 1, FFMLP)
    net(torch.rand(64, 16)).sum().backward()
    assert tcnn.free_temporary_memory() is None
    assert net(torch.rand(3, 16)).shape == (3, 1)  # modules keep working


def test_rtc_set_cache_dir_checks_the_directory_as_tinycudann(tmp_path):
    assert tcnn.rtc_set_cache_dir(str(tmp_path)) is None
    assert tcnn.rtc_set_cache_dir(tmp_path) is None  # pathlib paths too
    assert list(tmp_path.iterdir()) == []  # nothing is compiled, so nothing is written
    tcnn.rtc_set_cache_dir("")  # resets
    with pytest.raises(OSError, match="Missing RTC cache directory"):
        tcnn.rtc_set_cache_dir(tmp_path / "absent")
    if os.geteuid() != 0:  # root writes anywhere
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        with pytest.raises(OSError, match="Invalid RTC cache directory"):
            tcnn.rtc_set_cache_dir(ro)


def test_null_tensor_helpers():
    t = torch.rand(3, 2, dtype=torch.float64)
    null = tcnn.null_tensor_like(t)
    assert null.shape == () and null.dtype == torch.float64
    assert tcnn.null_tensor_to_none(null) is None and tcnn.null_tensor_to_none(t) is t


def test_native_module_initial_params_resets_a_module():
    # A client pattern: layer.params.data = layer.native_tcnn_module.initial_params(layer.seed).
    net = tcnn.Network(16, 2, FFMLP, seed=7)
    fresh = net.params.detach().clone()
    with torch.no_grad():
        net.params.mul_(3)
    init = net.native_tcnn_module.initial_params(net.seed)
    assert init.dtype == torch.float32 and init.device == net.params.device
    net.params.data = init
    assert torch.equal(net.params.detach(), fresh)
    assert not torch.equal(net.native_tcnn_module.initial_params(8), fresh)


def test_native_module_fwd_bwd_as_tinycudann():
    enc = tcnn.Encoding(3, HASHGRID).double()
    with torch.no_grad():
        enc.params.uniform_(-1, 1)
    native = enc.native_tcnn_module
    x = torch.rand(6, 3, dtype=torch.float64)
    params = enc.params.detach()
    ctx, out = native.fwd(x, params)
    assert ctx is None  # nothing wants a gradient: inference, as tinycudann
    with torch.no_grad():
        torch.testing.assert_close(out[:, :enc.n_output_dims], enc(x), rtol=0, atol=0)
    xg = x.clone().requires_grad_(True)
    pg = params.clone().requires_grad_(True)
    ctx, out = native.fwd(xg, pg)
    assert ctx is not None
    dy = torch.rand_like(out)
    dx, dp = native.bwd(ctx, xg, pg, out, dy)
    ref_x, ref_p = xg.detach().requires_grad_(True), pg.detach().requires_grad_(True)
    from torch.func import functional_call
    (functional_call(enc, {"params": ref_p}, (ref_x,)) * dy[:, :enc.n_output_dims]).sum().backward()
    torch.testing.assert_close(dx, ref_x.grad)
    torch.testing.assert_close(dp, ref_p.grad)
    v = torch.rand_like(x)
    d_dy, d_p, d_x = native.bwd_bwd_input(ctx, xg, pg, v, dy)
    assert d_p.shape == pg.shape and d_x.shape == x.shape and d_dy is None  # dy does not require a gradient
    with pytest.raises(tinyfuse.ShapeError, match="multiple|contiguous|input"):
        native.fwd(x.float(), params)  # not the object's input dtype
    with pytest.raises(tinyfuse.ShapeError, match="invalid context"):
        native.bwd(None, xg, pg, out, dy)


def _data_writes_are_seen(net, x):
    """Writes that bypass params' version counter (through .data) must reach the next call: no
    converted copy of the parameters is kept between calls."""
    with torch.no_grad():
        first = net(x).clone()
        version = net.params._version
        net.params.data.mul_(0.5)  # in place through .data: params._version does not move
        assert net.params._version == version
        halved = net(x).clone()
        assert not torch.equal(halved, first)
        net.params.data = net.params.data * 2.0  # a new tensor through .data
        torch.testing.assert_close(net(x), first)
        net.params.data.copy_(net.native_tcnn_module.initial_params(net.seed + 1))
        assert not torch.equal(net(x), first)


def test_parameter_writes_through_data_are_seen():
    _data_writes_are_seen(tcnn.Network(16, 4, FFMLP), torch.rand(9, 16))


@pytest.mark.skipif(not (torch.cuda.is_available() and tinyfuse.built_with_cuda and tinyfuse.gpu_count() > 0),
                    reason="skipped: no GPU")
def test_parameter_writes_through_data_are_seen_by_16_bit_gpu_networks():
    _data_writes_are_seen(tcnn.Network(16, 4, FFMLP).cuda(), torch.rand(9, 16, device="cuda"))
