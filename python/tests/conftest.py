import pytest
import torch

import tinyfuse

HAS_GPU = torch.cuda.is_available() and tinyfuse.built_with_cuda and tinyfuse.gpu_count() > 0

requires_gpu = pytest.mark.skipif(not HAS_GPU, reason="skipped: no GPU")


def pure_torch_mlp(params, x, n_in, n_out, n_neurons, n_hidden, activation, output_activation, biases=True,
                   padded_out=None):
    """docs/PARAMETERS.md's layout evaluated with plain PyTorch ops: the independent reference."""
    acts = {"ReLU": torch.relu, "Tanh": torch.tanh, "Sigmoid": torch.sigmoid, "None": lambda v: v}
    padded_out = padded_out or n_out
    widths = [n_in] + [n_neurons] * n_hidden + [padded_out]
    offset, h = 0, x
    for layer in range(n_hidden + 1):
        fan_in, fan_out = widths[layer], widths[layer + 1]
        w = params[offset:offset + fan_in * fan_out].view(fan_out, fan_in)
        offset += fan_in * fan_out
        h = h @ w.T
        if biases:
            h = h + params[offset:offset + fan_out]
            offset += fan_out
        h = acts[activation if layer < n_hidden else output_activation](h)
    assert offset == params.numel()
    return h[:, :n_out]
