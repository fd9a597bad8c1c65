"""The GPU backend through tinyfuse.tcnn (run on the device machine; "skipped: no GPU" elsewhere).
Results are compared with the CPU backend's FP64 reference mode on fresh random inputs."""
import copy
import io

import pytest
import torch

import tinyfuse
import tinyfuse.tcnn as tcnn
from conftest import requires_gpu

pytestmark = requires_gpu

WIDTH64 = {"otype": "Width64FusedMLP", "activation": "ReLU", "output_activation": "None", "n_neurons": 64,
           "n_hidden_layers": 2}


def config(otype, n_neurons=64, n_hidden_layers=2, activation="ReLU"):
    return {"otype": otype, "activation": activation, "output_activation": "None", "n_neurons": n_neurons,
            "n_hidden_layers": n_hidden_layers}


def fp64_reference(n_in, n_out, cfg, params, compute_dtype=torch.float32):
    """PortableMLP in float64 on the CPU (every biased MLP shares its layout), with the parameters
    the GPU computes with: the FP32 master rounded to the network's dtype."""
    ref = tcnn.Network(n_in, n_out, dict(cfg, otype="PortableMLP")).double()
    with torch.no_grad():
        ref.params.copy_(params.detach().to(compute_dtype).double().cpu())
    return ref


def rel_l2(got, want):
    """||got - want|| / ||want||, the GPU suites' measure (tests/gpu)."""
    got, want = got.detach().double().cpu(), want.detach().double().cpu()
    return ((got - want).norm() / want.norm().clamp_min(1e-300)).item()


# The GPU suites' tolerances on rel_l2 (tests/gpu/test_blaslt_mlp.cpp).
TOLERANCE = {torch.float32: 1e-5, torch.float16: 2e-3}


def test_seed_minimal_usage_width64_fused():
    # The acceptance line, with only the import changed.
    net = tcnn.Network(n_input_dims=64, n_output_dims=64, network_config=WIDTH64).to("cuda").eval()
    x = torch.rand(257, 64, device="cuda")
    out = net(x)
    assert out.shape == (257, 64) and out.dtype == torch.float16 and out.device.type == "cuda"
    assert torch.isfinite(out).all()
    ref = fp64_reference(64, 64, WIDTH64, net.params, torch.float16)
    assert rel_l2(out, ref(x.half().double().cpu())) <= TOLERANCE[torch.float16]


def test_width64_fused_backward_is_refused_clearly():
    # Inference-only: the forward under autograd works (above); a backward through it is an error.
    net = tcnn.Network(n_input_dims=64, n_output_dims=64, network_config=WIDTH64).to("cuda")
    out = net(torch.rand(33, 64, device="cuda"))
    assert out.requires_grad and out.shape == (33, 64)
    with pytest.raises(tinyfuse.UnsupportedError, match="Width64FusedMLP is inference-only"):
        out.float().sum().backward()


@pytest.mark.parametrize("otype,dtype", [("PortableMLP", torch.float32), ("BlasLtMLP", torch.float32),
                                         ("BlasLtMLPFP16", torch.float16)])
@pytest.mark.parametrize("batch", [1, 257, 4096])
def test_forward_and_gradients_match_fp64_reference(otype, dtype, batch):
    cfg = config(otype, activation="Tanh")
    net = tcnn.Network(32, 16, cfg, seed=batch).cuda()
    assert net.dtype == dtype and net.loss_scale == (128.0 if dtype == torch.float16 else 1.0)
    ref = fp64_reference(32, 16, cfg, net.params, dtype)
    x = torch.rand(batch, 32, device="cuda", requires_grad=True)
    w = torch.randn(batch, 16, device="cuda")
    out = net(x)
    assert out.dtype == dtype and out.shape == (batch, 16)
    (out.float() * w).sum().backward()
    xr = x.detach().to(dtype).double().cpu().requires_grad_(True)
    out_ref = ref(xr)
    (out_ref * w.double().cpu()).sum().backward()
    tol = TOLERANCE[dtype]
    assert rel_l2(out, out_ref) <= tol, "output"
    assert rel_l2(net.params.grad, ref.params.grad) <= tol, "parameter gradient"
    assert rel_l2(x.grad, xr.grad) <= tol, "input gradient"


def test_native_call_overwrites_a_poisoned_output():
    net = tcnn.Network(32, 16, config("PortableMLP"), seed=7).cuda()
    x = torch.rand(1000, 32, device="cuda")
    net(x)
    backend = net._backends[(x.device, torch.float32)]
    out = torch.full((1000, backend.padded_output_width), float("nan"), device="cuda")
    p = net.params.detach()
    backend.native.inference(p.data_ptr(), backend.param_code, x.data_ptr(), backend.input_code, 1000,
                             out.data_ptr(), backend.output_code, torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    assert torch.isfinite(out).all()
    ref = fp64_reference(32, 16, config("PortableMLP"), net.params)
    assert rel_l2(out, ref(x.double().cpu())) <= TOLERANCE[torch.float32]


def test_work_goes_on_the_current_stream():
    # The input is written on a side stream behind a long sleep; only a call queued on that same
    # stream sees the real values.
    net = tcnn.Network(32, 16, config("PortableMLP"), seed=3).cuda()
    real = torch.rand(4096, 32, device="cuda")
    expected = net(real).detach()
    x = torch.zeros_like(real)
    side = torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)
        x.copy_(real)
        out_train = net(x)  # parameters need gradients: the autograd path
        with torch.no_grad():
            out = net(x)
    side.synchronize()
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    torch.testing.assert_close(out_train.detach(), expected, rtol=0, atol=0)


def test_training_on_gpu_reduces_the_loss():
    torch.manual_seed(0)
    net = tcnn.Network(2, 1, config("PortableMLP", n_neurons=32, activation="Tanh")).cuda()
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    x = torch.rand(2048, 2, device="cuda")
    y = torch.sin(6 * x[:, :1]) * torch.cos(4 * x[:, 1:])
    first = None
    for _ in range(200):
        opt.zero_grad()
        loss = (net(x).float() - y).square().mean()
        loss.backward()
        opt.step()
        first = first or loss.item()
    assert loss.item() < 0.2 * first


def test_no_grad_matches_training_path_and_cpu_copy():
    net = tcnn.Network(32, 16, config("PortableMLP"), seed=9).cuda()
    x = torch.rand(300, 32, device="cuda")
    trained = net(x)
    with torch.inference_mode():
        inferred = net(x)
    torch.testing.assert_close(trained.detach(), inferred, rtol=0, atol=0)
    buf = io.BytesIO()
    torch.save(net, buf)
    buf.seek(0)
    cpu = torch.load(buf, map_location="cpu", weights_only=False)
    assert rel_l2(cpu(x.cpu()), inferred) <= TOLERANCE[torch.float32]
    back = copy.deepcopy(cpu).cuda()
    torch.testing.assert_close(back(x), inferred, rtol=0, atol=0)


def test_input_on_another_device_is_an_error():
    net = tcnn.Network(32, 16, config("PortableMLP"))
    with pytest.raises(ValueError, match="cuda:0 but the parameters are on cpu"):
        net(torch.rand(4, 32, device="cuda"))
    with pytest.raises(NotImplementedError, match="float64 parameters run only on the CPU"):
        net.double().cuda()(torch.rand(4, 32, device="cuda", dtype=torch.float64))


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_second_gpu():
    net = tcnn.Network(32, 16, config("PortableMLP"), seed=4).to("cuda:1")
    x = torch.rand(500, 32, device="cuda:1")
    out = net(x)
    assert out.device == x.device
    ref = fp64_reference(32, 16, config("PortableMLP"), net.params)
    assert rel_l2(out, ref(x.double().cpu())) <= TOLERANCE[torch.float32]


SDF_GRID = {"otype": "HashGrid", "n_levels": 8, "n_features_per_level": 2, "log2_hashmap_size": 15,
            "base_resolution": 8, "per_level_scale": 1.5, "interpolation": "Smoothstep"}


@pytest.mark.parametrize("otype,activation", [("FullyFusedMLP", "Softplus"), ("FullyFusedMLP", "ReLU"),
                                              ("FullyFusedMLP", "Sigmoid"), ("PortableMLP", "Tanh")])
def test_eikonal_gradients_match_the_cpu(otype, activation):
    # The SDF shape's eikonal step on CUDA against the same module in float64 on the CPU.
    torch.manual_seed(5)
    cfg = config(otype, activation=activation)
    net = tcnn.NetworkWithInputEncoding(3, 1, SDF_GRID, cfg).cuda()
    with torch.no_grad():
        net.params.add_(torch.empty_like(net.params).uniform_(-0.2, 0.2))
    ref = tcnn.NetworkWithInputEncoding(3, 1, SDF_GRID, cfg).double()
    with torch.no_grad():
        ref.params.copy_(net.params.detach().to(net.dtype).double().cpu())
    x = torch.rand(1024, 3, device="cuda") * 0.9 + 0.05

    def eikonal(m, xs):
        xs = xs.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(m(xs).float().sum(), xs, create_graph=True)
        m.params.grad = None
        ((g.double().norm(dim=1) - 1) ** 2).mean().backward()
        return m.params.grad

    want = eikonal(ref, x.double().cpu())
    got = eikonal(net, x)
    assert rel_l2(got, want) <= (1e-4 if net.dtype == torch.float32 else 3e-2)


def test_a_training_step_captures_in_a_cuda_graph():
    """A hash-grid model's whole step (forward, loss, backward, capturable Adam) captured in one CUDA
    graph: the native calls neither synchronise nor allocate outside the stream, and replays give
    the parameters that eager steps from the same start give (up to the order of the grid's
    atomics)."""
    torch.manual_seed(3)
    enc = {"otype": "HashGrid", "n_levels": 8, "n_features_per_level": 2, "log2_hashmap_size": 14,
           "base_resolution": 16, "per_level_scale": 1.5}
    model = tcnn.NetworkWithInputEncoding(2, 3, enc, config("FullyFusedMLP")).cuda()
    start = model.params.detach().clone()
    batches = [(torch.rand(1 << 14, 2, device="cuda"), torch.rand(1 << 14, 3, device="cuda")) for _ in range(4)]

    def body(opt, x, y):
        opt.zero_grad(set_to_none=False)
        loss = ((model(x).float() - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    opt = torch.optim.Adam(model.parameters(), lr=1e-2, capturable=True)
    sx, sy = batches[0][0].clone(), batches[0][1].clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            body(opt, sx, sy)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        body(opt, sx, sy)
    with torch.no_grad():
        model.params.copy_(start)
    for state in opt.state.values():
        for v in state.values():
            if torch.is_tensor(v):
                v.zero_()
    for x, y in batches:
        sx.copy_(x)
        sy.copy_(y)
        graph.replay()
    replayed = model.params.detach().clone()
    assert not torch.equal(replayed, start)  # the replays did train

    with torch.no_grad():
        model.params.copy_(start)
    eager = torch.optim.Adam(model.parameters(), lr=1e-2)
    for x, y in batches:
        body(eager, x, y)
    # Adam's first steps move every touched parameter by about lr whatever the gradient's size, so
    # a gradient summed to the other sign (atomics' order, a sum near 0) moves its entry by 2 lr:
    # about 2e-3 of the update's norm for each such entry here. A step that did not replay (a kernel
    # left out of the graph, a stale pointer) differs by O(1).
    assert rel_l2(replayed - start, model.params.detach() - start) < 1e-2
