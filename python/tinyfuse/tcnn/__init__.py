"""tinycudann's PyTorch modules on tinyfuse: ``import tinyfuse.tcnn as tcnn``.

The package mirrors tinycudann's: the modules live in ``tinyfuse.tcnn.modules`` (tinycudann's
``tinycudann.modules``) and are re-exported here. What differs from tinycudann is listed in the
README's Python section.
"""

from .modules import *  # noqa: F401,F403
from .modules import __all__  # noqa: F401
from .trainer import FusedTrainer  # noqa: F401

__all__ = [*__all__, "FusedTrainer"]


def __getattr__(name):  # module attributes computed when read (system_compute_capability)
    from . import modules
    return getattr(modules, name)
