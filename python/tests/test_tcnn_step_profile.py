"""benchmarks/python/tcnn_step_profile.py runs a workload's training step through tinyfuse.tcnn on
the CPU and writes its phase times as JSON (the GPU run adds event times and samples/s)."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "benchmarks", "python", "tcnn_step_profile.py")


def test_profile_of_a_cpu_step_writes_its_phases(tmp_path):
    out = tmp_path / "profile.json"
    run = subprocess.run([sys.executable, SCRIPT, "--device", "cpu", "--log2", "6", "--steps", "3", "--out", str(out)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "host us per phase" in run.stdout
    result = json.loads(out.read_text())
    assert result["workload"] == "W1" and result["batch"] == 64 and result["device"] == "cpu"
    for key in ("host_us_synced", "host_us_queued"):
        assert set(result[key]) == {"model", "loss", "backward", "optimizer"}
        assert all(v > 0 for v in result[key].values())
    assert "samples_per_second" not in result  # no CUDA events on the CPU


def test_graph_capture_needs_cuda():
    run = subprocess.run([sys.executable, SCRIPT, "--device", "cpu", "--graph"], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 2
    assert "--graph captures a CUDA graph: it needs --device cuda" in run.stderr
