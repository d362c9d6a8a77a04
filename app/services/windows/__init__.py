"""The window model, without SQL: what a window holds and what it computes.

``sums`` (and its row codec ``aggregate_row``) is a window's additive content,
``deltas`` what a batch adds to it, ``limits`` the count ceilings, ``compute``
the metrics, intervals and drift verdict of a window (``shape``: their JSON
form, intervals and curves as points), ``estimate`` its
label-free estimate, ``reference`` and ``reference_cache`` the drift baseline
period. The use-case rooms (ingest, refresh, read) build on it.
"""
