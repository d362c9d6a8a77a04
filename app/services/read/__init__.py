"""Use case: read window results and SLA reports.

``windows`` reads stored results, and merges stored windows into longer ones
on the fly; ``sla_report`` evaluates a model's SLA objectives over a period.
"""
