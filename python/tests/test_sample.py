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
