"""tinyfuse: tiny MLPs on huge batches, with tiny-cuda-nn's config language.

``tinyfuse.tcnn`` is the PyTorch binding (tinycudann's modules). This package itself needs no
PyTorch: it only loads the compiled core and names its errors.
"""

from ._native import (  # noqa: F401
    ConfigError,
    Error,
    OutOfMemoryError,
    ShapeError,
    UnsupportedError,
    built_with_cuda,
    encoding_otypes,
    gpu_count,
    network_otypes,
)

__version__ = "0.1.0"
__all__ = ["ConfigError", "Error", "OutOfMemoryError", "ShapeError", "UnsupportedError", "built_with_cuda", "gpu_count",
           "network_otypes", "encoding_otypes", "__version__"]
