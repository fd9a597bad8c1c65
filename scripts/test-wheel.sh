#!/usr/bin/env bash
# Installs a wheel from scripts/build-wheel.sh into a fresh venv and runs a small training job on
# the CPU there, with no compiler and no CUDA toolkit on PATH or the library path: what a user
# without them gets. Where the wheel has the CUDA backend and PyTorch sees a GPU, the same job then
# trains on the GPU too (REQUIRE_GPU=1 fails when none is usable instead of skipping). PyTorch is borrowed from an environment that has it ($TORCH_PYTHON, else
# scripts/test-python.sh's build-python/venv, else $PYTHON) through a .pth file, or comes from PyPI.
#   scripts/test-wheel.sh dist/tinyfuse-*.whl
set -euo pipefail
cd "$(dirname "$0")/.."
wheel=${1:?usage: scripts/test-wheel.sh WHEEL}
py=${PYTHON:-python3}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
torch_site=""
for cand in "${TORCH_PYTHON:-}" build-python/venv/bin/python "$py"; do
  [ -n "$cand" ] && command -v "$cand" >/dev/null 2>&1 || continue
  torch_site=$("$cand" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))' 2>/dev/null) && break
  torch_site=""
done
"$py" -m venv "$dir/venv"
if [ -n "$torch_site" ]; then
  # After the venv's own site-packages on sys.path, so the wheel's tinyfuse is the one imported.
  echo "$torch_site" > "$("$dir/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/borrowed_torch.pth"
  echo "test-wheel: PyTorch from $torch_site" >&2
else
  "$dir/venv/bin/python" -m pip install -q "torch>=2.1"
fi
# --ignore-installed: the borrowed environment may hold a tinyfuse of the same version (test-python's
# venv, where torch came from PyPI), which pip would otherwise take as already installed.
"$dir/venv/bin/python" -m pip install -q --no-deps --ignore-installed --disable-pip-version-check "$wheel"
# The extension may need no CUDA library to load (cudart is static, cuBLASLt opened on demand).
so=$(find "$dir/venv" -name '_native*.so' | head -n 1)
if readelf -d "$so" | grep -E 'NEEDED.*(libcudart|libcublas|libcuda\.)'; then
  echo "test-wheel: FAILED: $so needs a CUDA library to load" >&2
  exit 1
fi
cd "$dir"  # away from the source tree, so the installed package is the one imported
env -i HOME="$dir" PATH=/usr/bin:/bin VENV="$dir/venv" REQUIRE_GPU="${REQUIRE_GPU:-0}" "$dir/venv/bin/python" - <<'PY'
import shutil
assert shutil.which("nvcc") is None, "nvcc is on PATH"
import math
import os

import torch
import tinyfuse
import tinyfuse.tcnn as tcnn
assert os.path.realpath(tinyfuse.__file__).startswith(os.path.realpath(os.environ["VENV"])), tinyfuse.__file__
torch.manual_seed(0)
config = {"encoding": {"otype": "HashGrid", "n_levels": 8, "n_features_per_level": 2, "log2_hashmap_size": 14,
                       "base_resolution": 16, "per_level_scale": 1.5},
          "network": {"otype": "FullyFusedMLP", "activation": "ReLU", "output_activation": "None",
                      "n_neurons": 64, "n_hidden_layers": 2}}


def train(device):
    torch.manual_seed(0)
    model = tcnn.NetworkWithInputEncoding(2, 3, config["encoding"], config["network"]).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x = torch.rand(4096, 2, device=device)
    target = torch.stack([torch.sin(6 * x[:, 0]), torch.cos(6 * x[:, 1]), x[:, 0] * x[:, 1]], dim=1)
    losses = []
    for step in range(30):
        loss = ((model(x).float() - target) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert all(map(math.isfinite, losses)) and losses[-1] < 0.5 * losses[0], (device, losses)
    return losses


losses = train("cpu")
print(f"test-wheel: tinyfuse {tinyfuse.__version__} (CUDA backend built: {tinyfuse.built_with_cuda}, "
      f"GPUs: {tinyfuse.gpu_count()}) trained on the CPU: loss {losses[0]:.4f} -> {losses[-1]:.4f}")
gpu = tinyfuse.built_with_cuda and tinyfuse.gpu_count() > 0 and torch.cuda.is_available()
if gpu:
    losses = train("cuda")
    print(f"test-wheel: trained on {torch.cuda.get_device_name()} (compute capability "
          f"{'.'.join(map(str, torch.cuda.get_device_capability()))}): loss {losses[0]:.4f} -> {losses[-1]:.4f}")
elif os.environ["REQUIRE_GPU"] == "1":
    raise SystemExit(f"test-wheel: FAILED: REQUIRE_GPU=1 but no usable GPU (CUDA backend built: "
                     f"{tinyfuse.built_with_cuda}, tinyfuse GPUs: {tinyfuse.gpu_count()}, "
                     f"torch.cuda: {torch.cuda.is_available()})")
PY
echo "test-wheel: OK"
