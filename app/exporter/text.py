"""Prometheus text format (0.0.4) for the collector's series, written directly.

prometheus_client's ``generate_latest`` validates and escapes every label of
every sample (about 30 us per sample here); at 100 models x 10 segments the
window families hold ~150,000 samples, so the scrape would take seconds.
:func:`sample_lines` writes the same lines with each distinct label value
and label prefix escaped once; tests/unit/exporter/test_text.py checks that
the text parses to exactly the samples of ``generate_latest`` over the same
series.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from functools import lru_cache

from app.exporter.names import FamilySpec

Sample = tuple[tuple[str, ...], float]
"""(label values in the family's label order, value)."""
Series = dict[str, list[Sample]]
"""Samples by family name."""


@lru_cache(maxsize=1 << 16)
def escape_label_value(value: str) -> str:
    """Escape ``\\``, ``"`` and newlines as the text format requires (cached: label
    values are registered names and metric names, a bounded set)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    """Escape ``\\`` and newlines of a HELP line."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    """A sample value as Prometheus parses it (``repr`` of the float; ``+Inf``, ``NaN``)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def exposed_name(spec: FamilySpec) -> str:
    """The sample name: counters end in ``_total``."""
    return spec.name + "_total" if spec.kind == "counter" else spec.name


@lru_cache(maxsize=256)
def _line_parts(spec: FamilySpec) -> tuple[str, tuple[str, ...], str]:
    """The sample name of ``spec``, the ``label="`` openings of all its labels but the
    last, and that of the last (built once per family, not per window)."""
    keys = [f'{label}="' for label in spec.labels] or [""]
    return exposed_name(spec), tuple(keys[:-1]), keys[-1]


def sample_lines(spec: FamilySpec, samples: Iterable[Sample]) -> str:
    """One line per sample of the family (no HELP/TYPE, no trailing newline).

    Samples that share all labels but the last (e.g. every metric of one
    window) share one escaped prefix, built once.
    """
    name, head_keys, last_key = _line_parts(spec)
    if not spec.labels:
        return "\n".join(f"{name} {format_value(value)}" for _, value in samples)
    prefixes: dict[tuple[str, ...], str] = {}
    lines: list[str] = []
    append, isfinite, esc = lines.append, math.isfinite, escape_label_value
    for labels, value in samples:
        head = labels[:-1]
        prefix = prefixes.get(head)
        if prefix is None:
            pairs = "".join([k + esc(v) + '",' for k, v in zip(head_keys, head, strict=True)])
            prefix = prefixes[head] = f"{name}{{{pairs}{last_key}"
        last = labels[-1]
        append(f'{prefix}{esc(last)}"}} {repr(value) if isfinite(value) else format_value(value)}')
    return "\n".join(lines)


def render_families(specs: Iterable[FamilySpec], parts: Mapping[str, Iterable[str]]) -> str:
    """HELP and TYPE of every family, each followed by its blocks of sample lines."""
    lines: list[str] = []
    for spec in specs:
        name = exposed_name(spec)
        lines.append(f"# HELP {name} {escape_help(spec.help)}")
        lines.append(f"# TYPE {name} {spec.kind}")
        lines.extend(block for block in parts.get(spec.name, ()) if block)
    lines.append("")
    return "\n".join(lines)


def render_series(specs: Iterable[FamilySpec], samples: Series) -> str:
    """The whole text exposition of ``samples`` (every family of ``specs``), no timestamps."""
    specs = tuple(specs)
    return render_families(
        specs, {spec.name: [sample_lines(spec, samples.get(spec.name, ()))] for spec in specs}
    )
