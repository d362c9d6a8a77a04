"""priorwatch: prior-invariant performance monitoring for binary classifiers."""

__version__ = "0.1.0"
