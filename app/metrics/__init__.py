"""Pure metric library: numpy, scipy and the standard library only, no I/O.

Every metric is defined in docs/metrics.md. The public entry point is
:func:`evaluate` (``from app.metrics import evaluate``); the building blocks
are importable from the submodules.

Importing the package, or one submodule such as :mod:`app.metrics.labeling`
(the metric names), does not load the whole library: ``evaluate`` is loaded
on first access. Its name is also that of the submodule
:mod:`app.metrics.evaluate`, which the import system binds on this package
once loaded; the package attribute always stays the function, as it was when
the package imported it eagerly.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.metrics.evaluate import evaluate as evaluate

__all__ = ["evaluate"]


class _MetricsPackage(types.ModuleType):
    @property
    def evaluate(self) -> Any:
        from app.metrics.evaluate import evaluate

        return evaluate

    @evaluate.setter
    def evaluate(self, submodule: Any) -> None:
        """The import system binding the submodule: keep the function (see module doc)."""


sys.modules[__name__].__class__ = _MetricsPackage
