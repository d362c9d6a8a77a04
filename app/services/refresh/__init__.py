"""Use case: keep stored window results current (what the worker runs).

``groups`` claims a group of windows, computes and stores them; ``tiers`` and
``budget`` decide between the summary and the detail tier; ``document`` shapes
a stored result; ``retention`` deletes windows past their model's retention.
"""
