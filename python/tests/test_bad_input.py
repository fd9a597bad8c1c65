"""The bad-input matrix of the Python package (docs/ERRORS.md), the mirror of tests/cpu/test_bad_input.cpp.

Every public module (Network, Encoding, NetworkWithInputEncoding; FP32 and the FP64 reference
mode) meets each kind of bad input in both call paths (inference under no_grad, and the autograd
path). Each refusal must be the contract's type (ShapeError/ConfigError -> ValueError,
UnsupportedError -> NotImplementedError, OutOfMemoryError -> MemoryError, Error -> RuntimeError)
with a message naming what was wrong, and must change nothing: the parameters and their gradient
stay bitwise as they were and the next good call computes bitwise what it computed before.
"""
import io
import mmap
import os
import pickle
import platform
import sys

import pytest
import torch

import tinyfuse
import tinyfuse.tcnn as tcnn
from conftest import requires_gpu

BATCH = 8
HUGE_BATCH = 1 << 40  # terabytes of output: more than any machine has

MLP = {"otype": "PortableMLP", "activation": "Tanh", "output_activation": "None", "n_neurons": 16,
       "n_hidden_layers": 2}
HASHGRID = {"otype": "HashGrid", "n_levels": 4, "n_features_per_level": 2, "log2_hashmap_size": 8,
            "base_resolution": 4, "per_level_scale": 2.0}


# ---- subjects: one module per public kind, with random (not initial) parameters ----------------

def _randomized(module, seed):
    with torch.no_grad():
        module.params.uniform_(-0.5, 0.5, generator=torch.Generator().manual_seed(seed))
    return module


SUBJECTS = {
    "Network": lambda: _randomized(tcnn.Network(2, 3, MLP), 1),
    "Network_f64": lambda: _randomized(tcnn.Network(2, 3, MLP), 1).double(),
    "Encoding_HashGrid": lambda: _randomized(tcnn.Encoding(3, HASHGRID), 2),
    "Encoding_Frequency": lambda: tcnn.Encoding(2, {"otype": "Frequency", "n_frequencies": 3}),
    "NetworkWithInputEncoding": lambda: _randomized(tcnn.NetworkWithInputEncoding(2, 3, HASHGRID, MLP), 3),
}


def bits(t):
    """A tensor's bytes, for bitwise comparisons (NaN equals NaN)."""
    t = t.detach().contiguous()
    return t.view(torch.uint8).clone() if t.numel() else t.clone()


class Bench:
    """A module with a good batch, what it computes from it, and what must not change."""

    def __init__(self, module, device="cpu"):
        self.m = module.to(device)
        self.n_in = module.n_input_dims
        self.dtype = module.params.dtype  # the good input's dtype: the module's own
        self.x = torch.rand(BATCH, self.n_in, generator=torch.Generator().manual_seed(7)).to(device, self.dtype)
        self.reference = bits(self.good_call())
        self.reference_autograd = bits(self.m(self.x))  # the training path (GPU kernels may differ from inference)
        self.params = bits(module.params)
        self.grad = None if module.params.grad is None else bits(module.params.grad)

    def good_call(self):
        with torch.no_grad():
            return self.m(self.x)

    def assert_unchanged(self):
        assert torch.equal(bits(self.m.params), self.params), "the parameters changed"
        grad = self.m.params.grad
        assert (grad is None and self.grad is None) or torch.equal(bits(grad), self.grad), "params.grad changed"
        assert torch.equal(bits(self.good_call()), self.reference), "the module computes something else afterwards"
        assert torch.equal(bits(self.m(self.x)), self.reference_autograd), "the autograd path computes something else"


@pytest.fixture(params=list(SUBJECTS), ids=list(SUBJECTS))
def bench(request):
    return Bench(SUBJECTS[request.param]())


def refused(bench, call, expected, needle):
    """`call` must raise `expected` naming `needle` and change nothing."""
    with pytest.raises(expected) as info:
        call()
    assert needle.lower() in str(info.value).lower(), f"message does not mention {needle!r}: {info.value}"
    bench.assert_unchanged()
    return info.value


# ---- the contract's classes -------------------------------------------------------------------

def test_error_classes_are_the_contracts():
    assert issubclass(tinyfuse.Error, RuntimeError)
    for cls, python_base in [(tinyfuse.ConfigError, ValueError), (tinyfuse.ShapeError, ValueError),
                             (tinyfuse.UnsupportedError, NotImplementedError),
                             (tinyfuse.OutOfMemoryError, MemoryError)]:
        assert issubclass(cls, tinyfuse.Error) and issubclass(cls, python_base), cls
        assert getattr(tcnn, cls.__name__) is cls


# ---- bad input tensors, in both call paths ----------------------------------------------------

# (name, bad input from the good batch, expected class, a word the message must hold)
BAD_INPUTS = [
    ("1-D", lambda b: b.x.flatten(), tinyfuse.ShapeError, "shape"),
    ("3-D", lambda b: b.x[:, :, None], tinyfuse.ShapeError, "shape"),
    ("one column too many", lambda b: torch.rand(BATCH, b.n_in + 1, dtype=b.dtype), tinyfuse.ShapeError, "shape"),
    ("one column too few", lambda b: b.x[:, 1:].contiguous(), tinyfuse.ShapeError, "shape"),
    ("no columns", lambda b: b.x[:, :0].contiguous(), tinyfuse.ShapeError, "shape"),
    ("complex64", lambda b: b.x.to(torch.complex64), tinyfuse.ShapeError, "x.real"),
    ("on another device (meta)", lambda b: b.x.to("meta"), tinyfuse.ShapeError, "meta"),
    ("not a tensor", lambda b: b.x.tolist(), TypeError, "torch.Tensor"),
    ("a NumPy array", lambda b: b.x.numpy(), TypeError, "torch.Tensor"),
]


@pytest.mark.parametrize("grad", [False, True], ids=["inference", "autograd"])
@pytest.mark.parametrize("case", BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS])
def test_bad_input_is_refused_and_changes_nothing(bench, case, grad):
    _, make, expected, needle = case
    bad = make(bench)
    # The autograd path: the input wants a gradient where its dtype can have one.
    if grad and isinstance(bad, torch.Tensor) and bad.is_floating_point():
        bad = bad.detach().requires_grad_()

    def call():
        with torch.set_grad_enabled(grad):
            bench.m(bad)

    refused(bench, call, expected, needle)


# Views whose rows or features are not adjacent are made contiguous, as tinycudann does, and compute
# exactly what their dense copy computes (docs/ERRORS.md, "Tensors").
STRIDED = [
    ("transposed", lambda x: x.T.contiguous().T),
    ("every other column", lambda x: torch.stack([x, torch.full_like(x, float("nan"))], 2).flatten(1)[:, ::2]),
    ("rows with gaps", lambda x: torch.cat([x, torch.full_like(x[:, :1], float("nan"))], 1)[:, :-1]),
    ("every other row", lambda x: torch.stack([x, torch.full_like(x, float("nan"))], 1).flatten(0, 1)[::2]),
]


@pytest.mark.parametrize("grad", [False, True], ids=["inference", "autograd"])
@pytest.mark.parametrize("case", STRIDED, ids=[c[0] for c in STRIDED])
def test_strided_views_compute_exactly_their_dense_copy(bench, case, grad):
    view = case[1](bench.x)
    assert torch.equal(view, bench.x) and not view.is_contiguous()
    with torch.set_grad_enabled(grad):
        out = bench.m(view)
    reference = bench.reference_autograd if grad else bench.reference
    assert torch.equal(bits(out), reference), "the strided view computed something else"
    bench.assert_unchanged()


def test_overlapping_rows_compute_each_row(bench):
    # An expanded view (every row the same memory) is copied first, as tinycudann's .contiguous().
    view = bench.x[:1].expand(BATCH, bench.n_in)
    with torch.no_grad():
        out = bench.m(view)
        expected = bench.m(bench.x[:1].repeat(BATCH, 1))
    assert torch.equal(bits(out), bits(expected))
    bench.assert_unchanged()


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8, torch.bool])
def test_integer_and_boolean_inputs_are_converted_as_tinycudann_does(bench, dtype):
    # tinycudann calls x.to(torch.float): integer grid coordinates and masks are taken as floats.
    x = (bench.x * 3).to(dtype)
    with torch.no_grad():
        out = bench.m(x)
        expected = bench.m(x.to(bench.dtype))
    assert torch.equal(bits(out), bits(expected)), dtype
    bench.assert_unchanged()


def test_other_float_dtypes_are_converted_exactly(bench):
    for dtype in (torch.float16, torch.bfloat16, torch.float64, torch.float32):
        x = bench.x.to(dtype)
        with torch.no_grad():
            out = bench.m(x)
            expected = bench.m(x.to(bench.dtype))
        assert torch.equal(bits(out), bits(expected)), dtype
    bench.assert_unchanged()


def test_parameters_of_the_wrong_size_or_kind_are_refused(bench):
    saved = bench.m.params
    n = saved.numel()
    for bad in [torch.zeros(n + 1), torch.zeros(n, dtype=torch.int32), torch.zeros(2, n), torch.zeros(2 * n + 1)[::2]]:
        bench.m.params = torch.nn.Parameter(bad, requires_grad=bad.is_floating_point())
        try:
            with pytest.raises(tinyfuse.ShapeError, match="params must be"):
                bench.m(bench.x)
        finally:
            bench.m.params = saved
    bench.assert_unchanged()


# ---- batch sizes ------------------------------------------------------------------------------

def test_batch_zero_is_a_no_op(bench):
    empty = bench.x[:0].clone()
    with torch.no_grad():
        assert bench.m(empty).shape == (0, bench.m.n_output_dims)
    x = empty.clone().requires_grad_()
    out = bench.m(x)
    assert out.shape == (0, bench.m.n_output_dims)
    out.sum().backward()
    assert x.grad.shape == x.shape
    if bench.m.params.numel():
        assert torch.equal(bench.m.params.grad, torch.zeros_like(bench.m.params))  # nothing to learn from no rows
    bench.m.params.grad = None
    bench.assert_unchanged()


def test_batch_one_computes_what_the_row_computes_in_a_batch(bench):
    reference = bench.good_call()
    # A one-row product may take OpenBLAS's matrix-vector path (another summation order): a few
    # ulps of the dtype, as in the C++ suite, not more.
    ulp = 1e-15 if bench.dtype == torch.float64 else 1e-6
    for row in (0, 5):
        with torch.no_grad():
            out = bench.m(bench.x[row:row + 1].clone())
        want = reference[row:row + 1].to(torch.float64)
        err = (out.to(torch.float64) - want).abs()
        assert bool((err <= 8 * ulp * want.abs().clamp(min=1.0)).all()), (row, err.max())
    bench.assert_unchanged()


def _untouched_input(rows, cols):
    """A (rows, cols) float32 tensor over address space that is never touched: no memory is used
    unless it is read (an anonymous MAP_NORESERVE mapping)."""
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "aarch64"):
        pytest.skip("needs Linux's MAP_NORESERVE (x86-64 or AArch64)")
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_NORESERVE", 0x4000)
    try:
        buffer = mmap.mmap(-1, rows * cols * 4, flags=flags)
    except (OSError, OverflowError, ValueError) as e:
        pytest.skip(f"cannot reserve {rows * cols * 4} bytes of address space: {e}")
    return torch.frombuffer(buffer, dtype=torch.float32).view(rows, cols)


@pytest.mark.parametrize("grad", [False, True], ids=["inference", "autograd"])
def test_a_batch_beyond_memory_is_refused_before_anything_is_allocated(bench, grad):
    x = _untouched_input(HUGE_BATCH, bench.n_in)  # terabytes of address space, no memory
    if grad:
        x.requires_grad_()

    def call():
        with torch.set_grad_enabled(grad):
            bench.m(x)

    e = refused(bench, call, tinyfuse.OutOfMemoryError, "out of memory: needed")
    assert isinstance(e, MemoryError) and "this machine has" in str(e) and str(HUGE_BATCH) in str(e)


@pytest.mark.parametrize("grad", [False, True], ids=["inference", "autograd"])
def test_a_batch_whose_scratch_exceeds_memory_is_refused_by_the_library(grad):
    # The output fits, the MLP's activations (>= 4 KiB a row at 1024 neurons) are about four times
    # the machine's memory: the library's own check refuses it before computing anything.
    b = Bench(_randomized(tcnn.Network(1, 1, dict(MLP, n_neurons=1024)), 4))
    rows = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 4096
    x = _untouched_input(rows, 1)
    if grad:
        x.requires_grad_()

    def call():
        with torch.set_grad_enabled(grad):
            b.m(x)

    e = refused(b, call, tinyfuse.OutOfMemoryError, "activations of a batch of")
    assert isinstance(e, MemoryError) and "this machine has" in str(e)


def test_a_model_beyond_memory_is_refused_before_allocating():
    # 2^20 inputs into 8192 neurons, 64 layers: 12.8e9 parameters, 51 GB in FP32 alone; the
    # widest the width cap allows times the widest layer: beyond any machine we run on
    # (skipped where it would fit, as the C++ suite does).
    if os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") > 48 << 30:
        pytest.skip("this machine could hold the model")
    with pytest.raises(tinyfuse.OutOfMemoryError, match="FP32 parameters"):
        tcnn.Network(1 << 20, 1, {"otype": "PortableMLP", "n_neurons": 8192, "n_hidden_layers": 64})


# ---- non-finite values ------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")], ids=["nan", "inf", "-inf"])
def test_non_finite_inputs_stay_in_their_rows(bench, bad):
    x = bench.x.clone()
    x[2, 0] = bad
    x[6, bench.n_in - 1] = bad
    with torch.no_grad():
        out = bench.m(x)
    reference = bench.good_call()
    keep = [r for r in range(BATCH) if r not in (2, 6)]
    assert torch.equal(bits(out[keep]), bits(reference[keep])), "a non-finite value changed another row"
    # The autograd path: the same rows, and the input gradients of the other rows as without it.
    xg, xr = x.clone().requires_grad_(), bench.x.clone().requires_grad_()
    bench.m(xg).sum().backward()
    bench.m(xr).sum().backward()
    assert torch.equal(bits(xg.grad[keep]), bits(xr.grad[keep])), "a non-finite value changed another row's gradient"
    bench.m.params.grad = None
    bench.assert_unchanged()


def test_non_finite_parameters_compute_and_leave_no_trace(bench):
    # Parameters the caller sets directly are used as they are (checking them would cost a pass
    # each call; they are the caller's tensor): no error, and nothing of them stays behind.
    if bench.m.params.numel() == 0:
        pytest.skip("no parameters")
    with torch.no_grad():
        saved = bench.m.params.detach().clone()
        bench.m.params[bench.m.params.numel() // 2] = float("nan")
        bench.m.params[0] = float("inf")
        out = bench.m(bench.x)
        assert out.shape == (BATCH, bench.m.n_output_dims)
        bench.m.params.copy_(saved)
    bench.assert_unchanged()


# ---- load_state_dict --------------------------------------------------------------------------

# (name, state dict from the module's parameter count, expected class, a word the message must hold)
BAD_STATE_DICTS = [
    ("one value too many", lambda n: {"params": torch.zeros(n + 1)}, RuntimeError, "size mismatch"),
    ("2-D", lambda n: {"params": torch.zeros(1, n)}, RuntimeError, "size mismatch"),
    ("int64", lambda n: {"params": torch.zeros(n, dtype=torch.int64)}, tinyfuse.ShapeError, "floating-point"),
    ("bool", lambda n: {"params": torch.ones(n, dtype=torch.bool)}, tinyfuse.ShapeError, "floating-point"),
    ("NaN", lambda n: {"params": torch.full((n,), float("nan"))}, tinyfuse.Error, "not finite"),
    ("-Inf", lambda n: {"params": torch.full((n,), -float("inf"), dtype=torch.float64)}, tinyfuse.Error, "not finite"),
    ("missing key", lambda n: {}, RuntimeError, "Missing key"),
    ("misspelled key", lambda n: {"param": torch.zeros(n)}, RuntimeError, "Unexpected key"),
    # Good values with an unexpected key beside them: torch would copy them, then raise.
    ("an unexpected key beside good values", lambda n: {"params": torch.full((n,), 0.25), "extra": torch.zeros(1)},
     RuntimeError, "Unexpected key"),
    ("not a tensor", lambda n: {"params": [0.0] * n}, RuntimeError, "params"),
]


@pytest.mark.parametrize("case", BAD_STATE_DICTS, ids=[c[0] for c in BAD_STATE_DICTS])
def test_bad_state_dict_is_refused_and_changes_nothing(bench, case):
    _, make, expected, needle = case
    n = bench.m.params.numel()
    if n == 0 and case[0] in ("NaN", "-Inf", "int64", "bool"):
        pytest.skip("no parameters")
    refused(bench, lambda: bench.m.load_state_dict(make(n)), expected, needle)


def test_good_state_dicts_of_other_float_dtypes_are_converted(bench):
    n = bench.m.params.numel()
    values = torch.rand(n, dtype=torch.float64, generator=torch.Generator().manual_seed(9)) - 0.5
    bench.m.load_state_dict({"params": values})
    assert torch.equal(bench.m.params.detach(), values.to(bench.m.params.dtype))
    bench.m.load_state_dict({"params": bench.m.params.detach().clone().half()})  # a 16-bit copy loads too


# ---- pickles ----------------------------------------------------------------------------------

def test_truncated_pickles_and_torch_files_are_refused():
    b = Bench(SUBJECTS["NetworkWithInputEncoding"]())
    blob = pickle.dumps(b.m)
    for n in sorted({0, 1, 2, len(blob) // 3, len(blob) // 2, len(blob) - 2, len(blob) - 1}):
        with pytest.raises(Exception):  # pickle's own errors (UnpicklingError, EOFError, ...)
            pickle.loads(blob[:n])
    buf = io.BytesIO()
    torch.save(b.m, buf)
    data = buf.getvalue()
    for n in (len(data) // 2, len(data) - 30):
        with pytest.raises(Exception):
            torch.load(io.BytesIO(data[:n]), weights_only=False)
    b.assert_unchanged()


@pytest.mark.parametrize("subject", ["Network", "Encoding_HashGrid", "NetworkWithInputEncoding"])
def test_every_single_byte_corruption_of_a_pickle_fails_cleanly(subject):
    """Pickles carry no checksum: a corrupted one may load. Whatever it gives, unpickling and
    calling the result must raise an ordinary exception or compute, never crash; the original is
    untouched. (A crash ends the test process: that is the failure this looks for.)"""
    b = Bench(SUBJECTS[subject]())
    blob = pickle.dumps(b.m)
    # Every byte of a small pickle; the parameter bytes of a large one only every 7th (their
    # values are opaque floats, anything goes).
    positions = range(len(blob)) if len(blob) < 4096 else sorted(set(range(0, 2048)) | set(range(2048, len(blob), 7)))
    outcomes = {}
    for i in positions:
        corrupt = bytearray(blob)
        corrupt[i] ^= 0xFF
        try:
            m = pickle.loads(bytes(corrupt))
            out = m(b.x) if isinstance(m, tcnn.Module) else None
            kind = "computes" if out is not None else "loads as something else"
        except Exception as e:  # noqa: BLE001 (any ordinary exception is a clean refusal)
            kind = type(e).__name__
        outcomes[kind] = outcomes.get(kind, 0) + 1
    assert sum(outcomes.values()) == len(positions)
    assert len(outcomes) > 1, outcomes  # corruption was seen (not every flip lands in opaque bytes)
    b.assert_unchanged()


# ---- configs and constructor arguments --------------------------------------------------------

def _net(**changes):
    return lambda: tcnn.Network(2, 3, dict(MLP, **changes))


def _strict_net(**changes):
    return lambda: tcnn.Network(2, 3, dict(MLP, **changes), strict=True)


# Unknown keys are ConfigErrors with strict=True only (warnings otherwise: test_config_keys.py).
BAD_CONFIGS = [
    ("unknown key", _strict_net(foo=1), tinyfuse.ConfigError, "network.foo"),
    ("misspelled key", _strict_net(n_neuronz=16), tinyfuse.ConfigError, 'did you mean "n_neurons"'),
    ("string for an integer", _net(n_neurons="16"), tinyfuse.ConfigError, "network.n_neurons"),
    ("float for an integer", _net(n_neurons=16.5), tinyfuse.ConfigError, "network.n_neurons"),
    ("bool for an integer", _net(n_neurons=True), tinyfuse.ConfigError, "network.n_neurons"),
    ("out of range", _net(n_hidden_layers=-1), tinyfuse.ConfigError, "network.n_hidden_layers"),
    ("number for a string", _net(activation=3), tinyfuse.ConfigError, "network.activation"),
    ("unknown activation", _net(activation="Rectifier"), tinyfuse.ConfigError, "network.activation"),
    ("unknown otype", _net(otype="PortableMLPP"), tinyfuse.ConfigError, "network.otype"),
    ("NaN", _net(n_neurons=float("nan")), tinyfuse.ConfigError, "network"),
    ("not an object", lambda: tcnn.Network(2, 3, "PortableMLP"), tinyfuse.ConfigError, "network"),
    ("a value JSON cannot hold", _net(n_neurons=object()), TypeError, "JSON"),
    ("encoding: misspelled key", lambda: tcnn.Encoding(2, dict(HASHGRID, n_levelz=3), strict=True),
     tinyfuse.ConfigError, 'did you mean "n_levels"'),
    ("encoding: list for an integer", lambda: tcnn.Encoding(2, dict(HASHGRID, n_levels=[3])), tinyfuse.ConfigError,
     "encoding.n_levels"),
    ("encoding: too many dims for a grid", lambda: tcnn.Encoding(5, HASHGRID), tinyfuse.ConfigError,
     "encoding.n_input_dims"),
    ("encoding: output dtype", lambda: tcnn.Encoding(2, HASHGRID, dtype=torch.int32), ValueError, "dtype"),
    ("with encoding: bad network key",
     lambda: tcnn.NetworkWithInputEncoding(2, 3, HASHGRID, dict(MLP, foo=1), strict=True), tinyfuse.ConfigError,
     "network.foo"),
    ("with encoding: bad encoding value",
     lambda: tcnn.NetworkWithInputEncoding(2, 3, dict(HASHGRID, log2_hashmap_size="8"), MLP), tinyfuse.ConfigError,
     "encoding.log2_hashmap_size"),
    ("0 inputs", lambda: tcnn.Network(0, 3, MLP), tinyfuse.ConfigError, "network.n_input_dims"),
    ("negative inputs", lambda: tcnn.Network(-2, 3, MLP), tinyfuse.ConfigError, "network.n_input_dims"),
    ("negative outputs", lambda: tcnn.Network(2, -3, MLP), tinyfuse.ConfigError, "network.n_output_dims"),
    ("2^32 - 1 outputs", lambda: tcnn.Network(2, 2**32 - 1, dict(MLP, otype="PortableMLP")), tinyfuse.ConfigError,
     "network.n_output_dims"),
    ("2^33 inputs", lambda: tcnn.Network(2**33, 3, MLP), tinyfuse.ConfigError, "network.n_input_dims"),
    ("encoding: 2^31 inputs", lambda: tcnn.Encoding(2**31, {"otype": "Frequency"}), tinyfuse.ConfigError,
     "encoding.n_input_dims"),
    ("with encoding: 2^31 inputs", lambda: tcnn.NetworkWithInputEncoding(2**31, 3, {"otype": "Frequency"}, MLP),
     tinyfuse.ConfigError, "encoding.n_input_dims"),
    ("string for a width", lambda: tcnn.Network("2", 3, MLP), TypeError, ""),
    ("negative seed", lambda: tcnn.Network(2, 3, MLP, seed=-1), ValueError, "seed"),
    ("string seed", lambda: tcnn.Network(2, 3, MLP, seed="1"), TypeError, "seed"),
]


@pytest.mark.parametrize("case", BAD_CONFIGS, ids=[c[0] for c in BAD_CONFIGS])
def test_bad_config_is_refused_and_other_modules_keep_working(case):
    _, make, expected, needle = case
    witness = Bench(SUBJECTS["NetworkWithInputEncoding"]())
    with pytest.raises(expected) as info:
        make()
    assert needle.lower() in str(info.value).lower(), f"message does not mention {needle!r}: {info.value}"
    witness.assert_unchanged()


# ---- CUDA tensors (the GPU backend; skipped without a GPU) ------------------------------------

@requires_gpu
@pytest.mark.parametrize("subject", ["Network", "Encoding_HashGrid", "NetworkWithInputEncoding"])
def test_cuda_bad_inputs(subject):
    b = Bench(SUBJECTS[subject]())
    # A CUDA input for a module whose parameters are on the CPU: both devices named.
    refused(b, lambda: b.m(b.x.cuda()), tinyfuse.ShapeError, "cuda")
    g = Bench(SUBJECTS[subject](), "cuda")
    # A CPU input for a CUDA module is copied to its GPU with a warning, as tinycudann does.
    with pytest.warns(UserWarning, match="copied"), torch.no_grad():
        assert torch.equal(bits(g.m(g.x.cpu())), g.reference)
    refused(g, lambda: g.m(g.x.to(torch.complex64)), tinyfuse.ShapeError, "x.real")
    refused(g, lambda: g.m(g.x.flatten()), tinyfuse.ShapeError, "shape")
    if torch.cuda.device_count() > 1:
        refused(g, lambda: g.m(g.x.to("cuda:1")), tinyfuse.ShapeError, "cuda:1")
    # The FP64 reference mode runs only on the CPU.
    g.m.double()
    with pytest.raises(tinyfuse.UnsupportedError, match="float64") as info:
        g.m(g.x.double())
    assert isinstance(info.value, NotImplementedError)
    g.m.float()
    g.assert_unchanged()


@requires_gpu
def test_cuda_batch_beyond_the_gpus_memory_is_a_memory_error():
    # One input column, 128 output columns: a 4 GiB input whose output (2^30 x 128 values, at
    # least 256 GiB) is beyond the GPU's memory. Refused as out of memory, with nothing changed.
    enc = {"otype": "HashGrid", "n_levels": 16, "n_features_per_level": 8, "log2_hashmap_size": 12,
           "base_resolution": 4, "per_level_scale": 1.5}
    g = Bench(_randomized(tcnn.Encoding(1, enc), 5), "cuda")
    rows = 1 << 30
    _, total = torch.cuda.mem_get_info()
    if rows * g.m.n_output_dims * 2 <= total:
        pytest.skip("this GPU could hold the output")
    x = torch.zeros(rows, 1, device="cuda")
    for grad in (False, True):
        with torch.set_grad_enabled(grad):
            e = refused(g, lambda: g.m(x), tinyfuse.OutOfMemoryError, "out of memory")
        assert isinstance(e, MemoryError)
    del x
