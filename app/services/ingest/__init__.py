"""Use case: accept a batch of predictions.

``batch`` is the entry point: it parses the body once (``parse``, with
``sparse`` and ``json_keys``), admits it (``backpressure``, ``idempotency``)
and appends the batch's deltas in one transaction. ``evaluate`` computes the
metrics of a posted batch without storing it.
"""
