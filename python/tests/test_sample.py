"""samples/learn_image.py, the CLI's main job in PyTorch, on a short CPU run."""
import importlib.util
import json
import pathlib
import struct

SAMPLE = pathlib.Path(__file__).resolve().parents[2] / "samples" / "learn_image.py"


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR"
    return struct.unpack(">II", head[16:24])


def test_learn_image_sample_trains_and_writes_its_outputs(tmp_path):
    spec = importlib.util.spec_from_file_location("learn_image", SAMPLE)
    sample = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sample)
    out = tmp_path / "out"
    assert sample.main(["--steps", "40", "--batch", "2048", "--out", str(out), "--quiet"]) == 0
    log = json.loads((out / "log.json").read_text())
    assert log["steps_done"] == 40 and len(log["loss_per_step"]) == 40
    assert log["config"]["encoding"]["otype"] == "HashGrid"  # the CLI's default config
    losses = log["loss_per_step"]
    assert losses[-1] < 0.2 * losses[0]
    assert log["psnr_db"] > 18  # a blurry but recognisable picture after 40 small steps
    assert png_size(out / "reconstruction.png") == (256, 256)
    assert png_size(out / "target.png") == (256, 256)
    assert png_size(out / "loss.png") == (800, 480)
    assert (out / "checkpoint.pt").stat().st_size > 0


LEARN_SDF = pathlib.Path(__file__).resolve().parents[2] / "samples" / "learn_sdf.py"


def load_learn_sdf():
    spec = importlib.util.spec_from_file_location("learn_sdf", LEARN_SDF)
    sample = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sample)
    return sample


def test_learn_sdf_sample_trains_through_second_derivatives(tmp_path):
    sample = load_learn_sdf()
    out = tmp_path / "out"
    assert sample.main(["--steps", "40", "--init-steps", "20", "--batch", "256", "--out", str(out), "--quiet"]) == 0
    log = json.loads((out / "log.json").read_text())
    assert log["steps_done"] == 40 and len(log["loss_per_step"]) == 40
    assert log["config"]["encoding"]["otype"] == "HashGrid"  # the CLI's default config
    losses = log["loss_per_step"]
    assert losses[-1] < 0.3 * losses[0]
    # The initialisation's field (the distance to the cube's centre) is off by about 0.2 on average.
    assert log["heldout"]["mae"] < 0.1 and log["heldout"]["surface_mae"] < 0.05
    assert png_size(out / "slices.png") == (3 * 256 + 4 * 8, 256)
    assert png_size(out / "loss.png") == (800, 480)
    assert (out / "checkpoint.pt").stat().st_size > 0


def test_learn_sdf_sample_reads_a_points_file(tmp_path):
    import math
    lines = ["# a sphere of radius 2 around (1, 2, 3)"]
    n = 300
    for i in range(n):
        z = 1 - 2 * (i + 0.5) / n
        r, phi = math.sqrt(1 - z * z), i * 2.399963
        nx, ny = r * math.cos(phi), r * math.sin(phi)
        lines.append(f"{1 + 2 * nx} {2 + 2 * ny} {3 + 2 * z} {nx} {ny} {z}")
    (tmp_path / "sphere.xyzn").write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    sample = load_learn_sdf()
    assert sample.main(["--points", str(tmp_path / "sphere.xyzn"), "--steps", "30", "--init-steps", "10", "--batch",
                        "256", "--out", str(out), "--quiet"]) == 0
    log = json.loads((out / "log.json").read_text())
    assert log["surface"]["training_points"] == 270 and log["surface"]["heldout_surface_points"] == 30
    assert log["heldout"]["surface_mae"] < 0.05


def test_learn_image_sample_optimizer_is_tiny_cuda_nns_adam():
    """The sample's TcnnAdam against tiny-cuda-nn's Adam written out per entry (the C++ optimizer's
    semantics, tests/cpu/test_optimizers.cpp): l2_reg on the weight matrices only, untouched grid
    entries skipped with their own step counters, epsilon before the bias correction."""
    import math
    import torch
    import tinyfuse.tcnn as tcnn
    spec = importlib.util.spec_from_file_location("learn_image", SAMPLE)
    sample = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sample)
    model = tcnn.NetworkWithInputEncoding(
        2, 3, {"otype": "HashGrid", "n_levels": 2, "n_features_per_level": 2, "log2_hashmap_size": 8,
               "base_resolution": 4, "per_level_scale": 2.0},
        {"otype": "FullyFusedMLP", "activation": "ReLU", "output_activation": "None", "n_neurons": 16,
         "n_hidden_layers": 1}, seed=5)
    segments = model.param_segments()
    assert sum(count for _, count, _ in segments) == model.params.numel()
    assert {kind for _, _, kind in segments} == {"matrix", "grid"}
    matrix = [False] * model.params.numel()
    for offset, count, kind in segments:
        for i in range(offset, offset + count):
            matrix[i] = kind == "matrix"
    lr, beta1, beta2, eps, l2 = 0.05, 0.9, 0.99, 1e-15, 0.1  # a large l2 so that misapplying it shows
    opt = sample.TcnnAdam([model], lr=lr, betas=(beta1, beta2), eps=eps, l2_reg=l2)
    n = model.params.numel()
    w = model.params.detach().double().tolist()
    m, v, t = [0.0] * n, [0.0] * n, [0] * n
    gen = torch.Generator().manual_seed(3)
    skipped = 0
    for _ in range(3):
        xy = torch.rand(8, 2, generator=gen) * 0.3  # few samples in a corner: most grid entries untouched
        loss = model(xy).float().square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        g_all = model.params.grad.double().tolist()
        opt.step()
        for i in range(n):
            g = g_all[i]
            if not matrix[i] and g == 0:
                skipped += 1
                continue
            if matrix[i]:
                g += l2 * w[i]
            m[i] = beta1 * m[i] + (1 - beta1) * g
            v[i] = beta2 * v[i] + (1 - beta2) * g * g
            t[i] += 1
            correction = math.sqrt(1 - beta2 ** t[i]) / (1 - beta1 ** t[i])
            w[i] -= lr * correction / (math.sqrt(v[i]) + eps) * m[i]
    assert skipped > 0  # the check covers skipped entries
    assert len(set(t)) > 1  # and entries with different step counts
    got = model.params.detach().double()
    torch.testing.assert_close(got, torch.tensor(w, dtype=torch.float64), rtol=1e-5, atol=1e-6)
