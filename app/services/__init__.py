"""The service's use cases, one room each, on a shared window model.

``models`` (settings, keys, caches) is the ground floor; ``windows`` (what a
window holds and computes, no SQL) builds on it; the use-case rooms
``ingest``, ``refresh`` and ``read`` build on both and never import each
other. SQL lives in app/db; the rooms own their transactions.
"""
