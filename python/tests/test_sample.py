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
