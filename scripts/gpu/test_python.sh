#!/usr/bin/env bash
# Runs on the device machine (through the device tool, carry .whl/ from
# scripts/gpu/prepare_python_carry.sh): unpacks the wheels next to the system's PyTorch, runs the
# Python package's tests and the binding-overhead benchmark. Writes under $OUT: pytest.log,
# pytest.xml, overhead.json, overhead.log. Usage: scripts/gpu/test_python.sh [tests|bench]...
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
site=$(mktemp -d)
for w in .whl/*.whl; do python3 -m zipfile -e "$w" "$site"; done
export PYTHONPATH="$site" LD_LIBRARY_PATH="$PWD/.whl/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
python3 -c 'import torch, tinyfuse; print("torch", torch.__version__, "cuda", torch.version.cuda, "|", torch.cuda.get_device_name(0), "| tinyfuse", tinyfuse.__version__, "CUDA built:", tinyfuse.built_with_cuda, "GPUs:", tinyfuse.gpu_count())' | tee "$OUT/versions.txt"
cat .whl/commit >> "$OUT/versions.txt"
steps=("${@:-tests bench}")
status=0
for step in ${steps[*]}; do
  case "$step" in
    tests)
      (cd python/tests && python3 -m pytest -q -rs -p no:cacheprovider --junitxml="$OUT/pytest.xml" .) > "$OUT/pytest.log" 2>&1 || status=1
      tail -n 30 "$OUT/pytest.log" ;;
    bench)
      for dev in cuda cpu; do
        python3 benchmarks/python/binding_overhead.py --device "$dev" --out "$OUT/overhead-$dev.json" >> "$OUT/overhead.log" 2>&1 || status=1
      done
      cat "$OUT/overhead.log" ;;
  esac
done
exit $status
