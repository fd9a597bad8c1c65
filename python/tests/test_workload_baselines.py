"""The workload suite's PyTorch baseline (benchmarks/torch/torch_workloads.py) computes what tinyfuse
computes: its OneBlob, spherical harmonics and hash grid against tinyfuse.tcnn's encodings on the
CPU, its targets against the built-in picture, its eikonal loss (W4e) against a linear field's;
and rows through tinyfuse.tcnn (benchmarks/python/tcnn_workloads.py) train and report."""
import os
import sys

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "benchmarks", "torch"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "benchmarks", "python"))

import tinyfuse.tcnn as tcnn  # noqa: E402
import torch_workloads as tw  # noqa: E402
import tcnn_workloads  # noqa: E402


def test_oneblob_and_harmonics_equal_tinyfuses():
    torch.manual_seed(0)
    x = torch.rand(300, 2)
    ours = tcnn.Encoding(2, {"otype": "OneBlob", "n_bins": 64})(x)
    torch.testing.assert_close(tw.OneBlob(64, "cpu")(x), ours, atol=1e-6, rtol=0)
    d = torch.rand(300, 3)
    ours = tcnn.Encoding(3, {"otype": "SphericalHarmonics", "degree": 4})(d)
    torch.testing.assert_close(tw.SphericalHarmonics()(d), ours, atol=1e-6, rtol=0)


def test_hash_grids_have_tinyfuses_layout_and_values():
    for spec in tw.load_workloads(["W1", "W3"]):
        cfg = spec["config"]["encoding"] if "encoding" in spec["config"] else spec["config"]["density"]["encoding"]
        dims = 2 if spec["id"] == "W1" else 3
        ours = tcnn.Encoding(dims, cfg)
        grid, width = tw.encoding(cfg, dims, "cpu")
        assert grid.table.numel() == ours.params.numel(), spec["id"]
        with torch.no_grad():
            ours.params.copy_(torch.rand_like(ours.params) - 0.5)
            grid.table.copy_(ours.params.view(-1, 2))
        x = torch.rand(300, dims)
        # Positions differ by float rounding in the finest levels (scale ~ 10^3 - 10^4 cells): the
        # interpolation is continuous, so the outputs differ by about that much, not by a cell.
        torch.testing.assert_close(grid(x), ours(x), atol=2e-3, rtol=0)
        assert width == ours.n_output_dims


def test_image_target_is_the_built_in_picture():
    from tinyfuse import _native
    picture = torch.frombuffer(bytearray(_native.test_pattern(256)), dtype=torch.float32).reshape(256, 256, 3)
    at = torch.tensor([[10.5 / 256, 200.5 / 256], [0.0, 0.0]])
    got = tw.target_values("image", at)
    torch.testing.assert_close(got[0], picture[200, 10])
    torch.testing.assert_close(got[1], picture[0, 0])  # clamped at the border


def test_a_tinyfuse_tcnn_row_trains_and_reports():
    [spec] = tw.load_workloads(["W4"])
    spec = dict(spec, config=dict(spec["config"], encoding=dict(spec["config"]["encoding"], log2_hashmap_size=12)))
    records = tw.run_workload(spec, lambda s, dev: tcnn_workloads.tcnn_model(tcnn, s, dev, False), "tinyfuse.tcnn",
                              torch.device("cpu"), {"training": [9], "inference": [9]}, ["training", "inference"],
                              warmup=1, repeats=6, log=lambda s: None)
    assert [r["mode"] for r in records] == ["training", "inference"]
    train, infer = records
    assert "error" not in train and "error" not in infer
    assert train["loss_fell"] and len(train["losses"]) == 6 and train["samples_per_s"] > 0
    assert infer["finite"] and infer["trained_steps"] == 8
    assert infer["loss_vs_target"] < train["first_loss"]


def test_the_eikonal_loss_is_l1_plus_the_weighted_eikonal_term():
    # f(x) = 2 x0 - x1: f = 2 x0 - x1, grad = (2, -1, 0), |grad| = sqrt(5) on every row.
    lin = torch.nn.Linear(3, 1, bias=False)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[2.0, -1.0, 0.0]]))
    x = torch.rand(10, 3)
    y = torch.rand(10, 1)
    want = (2 * x[:5, 0] - x[:5, 1] - y[:5, 0]).abs().mean() + 0.1 * (5 ** 0.5 - 1) ** 2
    got = tw.eikonal_loss(lin, x, y, 0.1)
    torch.testing.assert_close(got, want)
    got.backward()  # through the input gradient: d/dw of 0.1 (|w| - 1)^2 = 0.2 (|w| - 1) w / |w| on the eikonal half
    l1 = torch.sign(2 * x[:5, 0] - x[:5, 1] - y[:5, 0]).unsqueeze(1) * x[:5]
    grad = l1.mean(0) + 0.2 * (5 ** 0.5 - 1) * torch.tensor([2.0, -1.0, 0.0]) / 5 ** 0.5
    torch.testing.assert_close(lin.weight.grad[0], grad)


def test_the_eikonal_workload_trains_through_tinyfuse_tcnn_and_refuses_compile():
    [spec] = tw.load_workloads(["W4e"])
    assert tw.eikonal_weight(spec) == 0.1 and tw.eikonal_weight(tw.load_workloads(["W4"])[0]) is None
    spec = dict(spec, config=dict(spec["config"], encoding=dict(spec["config"]["encoding"], log2_hashmap_size=12)))
    build = lambda s, dev: tcnn_workloads.tcnn_model(tcnn, s, dev, False)  # noqa: E731
    records = tw.run_workload(spec, build, "tinyfuse.tcnn", torch.device("cpu"), {"training": [9], "inference": [9]},
                              ["training", "inference"], warmup=1, repeats=6, log=lambda s: None)
    train, infer = records
    assert "error" not in train and "error" not in infer, records
    assert train["loss_fell"] and len(train["losses"]) == 6
    [compiled] = tw.run_workload(spec, tw.torch_model, "torch-compile", torch.device("cpu"), {"training": [9]},
                                 ["training"], warmup=1, repeats=2, compiled=True, log=lambda s: None)
    assert compiled["error"] == tw.EIKONAL_NOT_COMPILED


def test_the_finite_difference_workaround_matches_the_eikonal_loss_on_a_linear_field_and_trains():
    # Central differences are exact on a linear field: the workaround's loss and gradients equal
    # the double backward's, up to the FP32 rounding both losses apply to f (|f| < 4, so 2^-24 * 4
    # over the 2h = 2e-3 of a difference: ~1e-4 relative in grad_x f, a few 1e-6 in the loss).
    lin = torch.nn.Linear(3, 1, bias=False)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[2.0, -1.0, 0.5]]))
    x, y = torch.rand(12, 3, dtype=torch.float64), torch.rand(12, 1, dtype=torch.float64)
    lin = lin.double()
    want = tw.eikonal_loss(lin, x, y, 0.1)
    (gw,) = torch.autograd.grad(want, lin.weight)
    got = tw.eikonal_loss_fd(lin, x, y, 0.1)
    (gg,) = torch.autograd.grad(got, lin.weight)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=0)
    torch.testing.assert_close(gg, gw, rtol=1e-3, atol=0)
    # W4e through tinyfuse.tcnn with the workaround: trains, its variant named as such, and
    # torch.compile is not refused (first order only).
    [spec] = tw.load_workloads(["W4e"])
    spec = dict(spec, config=dict(spec["config"], encoding=dict(spec["config"]["encoding"], log2_hashmap_size=12)))
    build = lambda s, dev: tcnn_workloads.tcnn_model(tcnn, s, dev, False)  # noqa: E731
    [train] = tw.run_workload(spec, build, "tinyfuse.tcnn-fd", torch.device("cpu"), {"training": [9]}, ["training"],
                              warmup=1, repeats=6, log=lambda s: None, eikonal_gradient="fd")
    assert "error" not in train and train["loss_fell"] and train["variant"] == "tinyfuse.tcnn-fd", train
    with pytest.raises(ValueError, match="eikonal_gradient"):
        tw.run_workload(spec, build, "x", torch.device("cpu"), {"training": [9]}, ["training"], warmup=1, repeats=1,
                        eikonal_gradient="forward")
