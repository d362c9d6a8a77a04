"""Pure metric library: numpy, scipy and the standard library only, no I/O.

Every metric is defined in docs/metrics.md. The public entry point is
:func:`app.metrics.evaluate.evaluate`; the building blocks are importable
from the submodules. The package itself imports nothing, so a module that
needs one submodule (e.g. the metric names of :mod:`app.metrics.labeling`)
does not load the whole library.
"""
