"""benchmarks/python/binding_overhead.py against the build it finds: the package's own build has no
C++ timing loops (a developer option), and the script says how to get them instead of failing
inside; a developer build (TINYFUSE_PYTHON_TIMING=ON) runs a short measurement."""
import json
import os
import sys

import pytest

from tinyfuse import _native

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "benchmarks", "python"))

import binding_overhead  # noqa: E402

TIMING = hasattr(_native.Object, "time_inference")


def test_object_has_both_timing_loops_or_neither():
    assert hasattr(_native.Object, "time_training") == TIMING


@pytest.mark.skipif(TIMING, reason="developer build: the timing loops are there")
def test_without_timing_loops_the_benchmark_names_the_rebuild(tmp_path):
    out = tmp_path / "overhead.json"
    with pytest.raises(SystemExit) as e:
        binding_overhead.main(["--batches", "6", "--out", str(out)])
    assert "TINYFUSE_PYTHON_TIMING=ON" in str(e.value.code)
    assert not out.exists()


@pytest.mark.skipif(not TIMING, reason="the package's own build has no timing loops (TINYFUSE_PYTHON_TIMING)")
def test_with_timing_loops_the_benchmark_measures(tmp_path):
    out = tmp_path / "overhead.json"
    assert binding_overhead.main(["--batches", "6", "--repeats", "1", "--min-seconds", "0.01",
                                  "--out", str(out)]) == 0
    records = json.loads(out.read_text())["records"]
    assert [r["mode"] for r in records] == ["inference", "training"]
    assert all(r["cpp_s_per_call"] > 0 and r["torch_s_per_call"] > 0 for r in records)
