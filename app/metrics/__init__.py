"""Pure metric library: numpy, scipy and the standard library only, no I/O.

Every formula of spec/metrics.md lives here. The public entry point is
:func:`evaluate`; the building blocks are importable from the submodules.
"""

from app.metrics.evaluate import evaluate

__all__ = ["evaluate"]
