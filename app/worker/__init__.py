"""The worker: claims dirty windows and stores their results (docs/worker.md).

``loop`` (the claim loop), ``queue`` (all queue SQL), ``jobs`` (the loop's
database job source), ``runner`` (process and in-process entry points),
``settings`` (PRIORWATCH_WORKER_* knobs).
"""
