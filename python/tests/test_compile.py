"""torch.compile over models holding tinyfuse modules: one graph (fullgraph=True: no graph break at
the modules, which run as torch.library custom ops with fake implementations and autograd
formulas), results and gradients equal to eager; CUDA graphs on the GPU."""
import pytest
import torch

import tinyfuse.tcnn as tcnn
from tinyfuse.tcnn import _ops
from conftest import requires_gpu

pytestmark = pytest.mark.skipif(not _ops.AVAILABLE, reason="this PyTorch has no torch.library.custom_op (< 2.4)")

GRID = {"otype": "HashGrid", "n_levels": 4, "n_features_per_level": 2, "log2_hashmap_size": 10,
        "base_resolution": 4, "per_level_scale": 1.5}
MLP = {"otype": "FullyFusedMLP", "activation": "ReLU", "output_activation": "None", "n_neurons": 16,
       "n_hidden_layers": 1}


class Field(torch.nn.Module):
    """A small NeRF-like field: grid features -> tcnn MLP, direction encoding, a colour head with
    an unaligned input width, PyTorch ops between them."""

    def __init__(self):
        super().__init__()
        self.base = tcnn.NetworkWithInputEncoding(3, 8, GRID, MLP, seed=1)
        self.dirs = tcnn.Encoding(3, {"otype": "SphericalHarmonics", "degree": 3})
        self.head = tcnn.Network(7 + 9, 3, dict(MLP, output_activation="Sigmoid"), seed=2)
        self.scale = torch.nn.Parameter(torch.tensor(1.5))

    def forward(self, x, d):
        h = self.base(x)
        # In FP32: on CUDA h is FP16, and inductor would compute an FP16 product in FP32 (so
        # scale's gradient would differ from eager's by FP16 rounding, not by a fault).
        density = torch.nn.functional.softplus(h[:, :1].float()) * self.scale
        rgb = self.head(torch.cat([h[:, 1:], self.dirs((d + 1) / 2)], -1))
        return torch.cat([density, rgb], -1)


def loss(out):
    return (out * torch.linspace(0.5, 1.5, out.shape[1], device=out.device)).sum()


def run(model, x, d):
    for p in model.parameters():
        p.grad = None
    out = model(x, d)
    loss(out).backward()
    return out.detach(), [p.grad.clone() for p in model.parameters()]


def check_equal(model, compiled, x, d, exact=True):
    out_e, grads_e = run(model, x, d)
    out_c, grads_c = run(compiled, x, d)
    tol = {} if not exact else {"rtol": 0, "atol": 0}
    torch.testing.assert_close(out_c, out_e, **tol)
    for a, b in zip(grads_c, grads_e):
        torch.testing.assert_close(a, b, **tol)


def inputs(n, device="cpu", seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, 3, generator=g).to(device), torch.nn.functional.normalize(
        torch.randn(n, 3, generator=g), dim=-1).to(device)


def test_compiled_model_matches_eager_with_no_graph_break():
    torch._dynamo.reset()
    model = Field()
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    for n in (64, 65, 1):  # new batch sizes: recompiles with dynamic shapes, still one graph
        check_equal(model, compiled, *inputs(n, seed=n))
    explanation = torch._dynamo.explain(Field())(*inputs(8))
    assert explanation.graph_break_count == 0 and explanation.graph_count == 1


def test_inductor_compiled_model_matches_eager():
    torch._dynamo.reset()
    model = Field()
    check_equal(model, torch.compile(model, fullgraph=True), *inputs(100))


def test_compiled_inference_and_strided_inputs():
    torch._dynamo.reset()
    enc = tcnn.Encoding(3, GRID, seed=3)

    def f(x):
        return enc(x.t())  # a transposed view, as tiny-cuda-nn's sample passes

    x = torch.rand(3, 50)
    with torch.no_grad():
        expected = f(x)
        got = torch.compile(f, fullgraph=True, backend="aot_eager")(x)
    assert torch.equal(got, expected)


def test_compiled_call_checks_its_input_while_tracing():
    torch._dynamo.reset()
    net = tcnn.Network(16, 2, MLP)
    with pytest.raises(Exception, match=r"shape \(batch, 16\)"):
        torch.compile(net, fullgraph=True, backend="aot_eager")(torch.rand(4, 15))


def test_module_copies_get_their_own_handle():
    import copy
    net = tcnn.Network(16, 2, MLP)
    twin = copy.deepcopy(net)
    assert twin._handle != net._handle
    with torch.no_grad():
        twin.params.mul_(2)
    torch._dynamo.reset()
    x = torch.rand(5, 16)
    with torch.no_grad():
        a = torch.compile(net, fullgraph=True, backend="aot_eager")(x)
        b = torch.compile(twin, fullgraph=True, backend="aot_eager")(x)
        assert torch.equal(a, net(x)) and torch.equal(b, twin(x)) and not torch.equal(a, b)


# ---- CUDA (the GPU backend; "skipped: no GPU" elsewhere) --------------------------------------

@requires_gpu
def test_cuda_compiled_model_matches_eager():
    torch._dynamo.reset()
    model = Field().cuda()
    compiled = torch.compile(model, fullgraph=True)
    x, d = inputs(4096, "cuda")
    # Same kernels on the same inputs: the same bits, except where float atomics sum the grid's
    # parameter gradients in another order from run to run.
    check_equal(model, compiled, x, d, exact=False)


@requires_gpu
def test_cuda_graph_capture_of_inference_and_training():
    model = Field().cuda()
    x, d = inputs(2048, "cuda")
    with torch.no_grad():
        expected = model(x, d)
    # Warm up on a side stream (builds the native objects), then capture.
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), torch.no_grad():
        for _ in range(2):
            model(x, d)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph), torch.no_grad():
        static_out = model(x, d)
    x.copy_(inputs(2048, "cuda", seed=1)[0])
    graph.replay()
    with torch.no_grad():
        torch.testing.assert_close(static_out, model(x, d), rtol=0, atol=0)
    assert not torch.equal(static_out, expected)  # the replay read the new input

    # A whole training step through the compiled ops (forward, backward) captured as one graph.
    torch._dynamo.reset()
    compiled = torch.compile(model, mode="reduce-overhead", fullgraph=True)
    for step in range(4):
        for p in model.parameters():
            p.grad = None
        out = compiled(x, d)
        loss(out).backward()  # the loss eager's run() takes
    grads = [p.grad.clone() for p in model.parameters()]
    _, eager_grads = run(model, x, d)
    for a, b in zip(grads, eager_grads):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-5)
