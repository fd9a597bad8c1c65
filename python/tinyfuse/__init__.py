"""tinyfuse: tiny MLPs on huge batches, with tiny-cuda-nn's config language.

``tinyfuse.tcnn`` is the PyTorch binding (tinycudann's modules). This package itself needs no
PyTorch: it only loads the compiled core and names its errors.
"""

import os as _os
import site as _site
import sys as _sys


def _point_at_cublaslt():
    # tinyfuse opens cuBLASLt only when a BlasLtMLP is built (src/cuda/blaslt_library.cu): by its
    # soname, which finds the CUDA toolkit's or the one PyTorch loaded. Where neither is, the
    # nvidia-cublas wheel's copy in site-packages (pip install tinyfuse[cuda]) is named here.
    if _os.environ.get("TINYFUSE_CUBLASLT_LIBRARY"):
        return
    for base in [*_site.getsitepackages(), _site.getusersitepackages(), *_sys.path]:
        for sub in (("nvidia", "cu13", "lib"), ("nvidia", "cublas", "lib")):
            path = _os.path.join(base, *sub, "libcublasLt.so.13")
            if _os.path.isfile(path):
                _os.environ["TINYFUSE_CUBLASLT_LIBRARY"] = path
                return


_point_at_cublaslt()

from ._native import (  # noqa: E402,F401
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
