"""tinycudann's PyTorch modules on tinyfuse: ``import tinyfuse.tcnn as tcnn``.

The package mirrors tinycudann's: the modules live in ``tinyfuse.tcnn.modules`` (tinycudann's
``tinycudann.modules``) and are re-exported here.
"""

from .modules import *  # noqa: F401,F403
from .modules import __all__  # noqa: F401
from .modules import _Backend, _NativeFunction  # noqa: F401  (tests reach the internals through here)
