"""The demo scenario of ``priorwatch simulate``: a synthetic model and its summary (CLI only)."""
