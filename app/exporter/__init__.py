"""Prometheus exposition: a collector that reads stored results per scrape (never
computes), the per-process rejection counter, and the registry behind GET /metrics.

Metric names are fixed in :mod:`app.exporter.names`.
"""
