"""The reads of a metrics scrape (app/exporter): the models with their counters, the
latest fresh window of each (model, segment) with its stored documents, the latest
stored estimates, and the recent fresh windows the streak gauges count.

Each is a fixed number of statements, whatever the number of models and
segments; the JSON documents are read as their text (the exporter decodes them
with orjson, several times faster than the drivers' json.loads on ~1,000
documents per scrape). A ``shard`` is ``(index, count)``: the models with
``id % count == index`` (None: every model). The exporter's modules say what
each read is for.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ARRAY,
    ColumnElement,
    Float,
    Row,
    Select,
    Text,
    and_,
    case,
    cast,
    column,
    func,
    literal,
    select,
    true,
    tuple_,
    union_all,
    values,
)
from sqlalchemy.orm import Session

from app.db.models import (
    ALL_SEGMENTS,
    BatchDelta,
    Model,
    QuarantinedDelta,
    WindowAggregate,
    WindowMetrics,
)
from app.statuses import StoredStatus

WA = WindowAggregate
WM = WindowMetrics

KEYS_PER_QUERY = 500
"""Most windows (or groups) named by one statement (bound-parameter limits)."""

WindowId = tuple[int, str, datetime]
"""(model id, segment key, window start)."""
Record = Row[*tuple[Any, ...]]
"""A row read by position."""


WINDOW_KEY = (WM.model_id, WM.segment, WM.window_start)
"""The columns that name a stored window."""


def _among(session: Session, columns: Sequence[Any], keys: Sequence[Any]) -> ColumnElement[bool]:
    """The condition that ``columns`` take one of the tuples of ``keys``: a row IN list,
    on PostgreSQL against a VALUES list (a semi-join; a row IN list of a few hundred
    tuples is planned as as many ORed index probes, about 20 times slower there)."""
    if session.get_bind().dialect.name != "postgresql":
        return tuple_(*columns).in_(keys)
    wanted = values(*(column(f"c{i}", c.type) for i, c in enumerate(columns)), name="wanted")
    return tuple_(*columns).in_(select(wanted.data([tuple(k) for k in keys])))


def _of_shard(model_id: Any, shard: tuple[int, int] | None) -> ColumnElement[bool]:
    """The condition that ``model_id`` is in ``shard`` (always true when None)."""
    return true() if shard is None else model_id % shard[1] == shard[0]


def _counts() -> Any:
    """Per model: its batches, rows, unfolded and quarantined deltas, counted from its
    all-traffic aggregates, its unfolded all-traffic deltas and its quarantined deltas."""
    quarantined = QuarantinedDelta
    counted = quarantined.segment == ALL_SEGMENTS
    parts = union_all(
        select(
            WA.model_id.label("model_id"),
            WA.batches.label("batches"),
            (WA.n + WA.n_unlabelled).label("rows"),
            literal(0).label("unfolded"),
            literal(0).label("quarantined"),
        ).where(WA.segment == ALL_SEGMENTS),
        select(
            BatchDelta.model_id.label("model_id"),
            literal(1).label("batches"),
            (BatchDelta.n + BatchDelta.n_unlabelled).label("rows"),
            literal(1).label("unfolded"),
            literal(0).label("quarantined"),
        ).where(BatchDelta.segment == ALL_SEGMENTS),
        select(
            quarantined.model_id.label("model_id"),
            case((counted, 1), else_=0).label("batches"),
            case((counted, quarantined.n + quarantined.n_unlabelled), else_=0).label("rows"),
            literal(0).label("unfolded"),
            literal(1).label("quarantined"),
        ),
    ).subquery()
    return (
        select(
            parts.c.model_id,
            func.sum(parts.c.batches).label("batches"),
            # a float sum: an integer SUM raises on SQLite past 2^63 (legacy totals)
            func.sum(cast(parts.c.rows, Float)).label("rows"),
            func.sum(parts.c.unfolded).label("unfolded"),
            func.sum(parts.c.quarantined).label("quarantined"),
        )
        .group_by(parts.c.model_id)
        .subquery()
    )


def model_counts(session: Session, shard: tuple[int, int] | None = None) -> Sequence[Record]:
    """Every model (of ``shard``) by name: ``id, name, window, segments, sla,
    label_missingness, label_horizon, exposition`` and its ``batches, rows, unfolded, quarantined``
    counts (0 without any; one statement)."""
    counts = _counts()
    return session.execute(
        select(
            Model.id,
            Model.name,
            Model.window,
            Model.segments,
            Model.sla,
            Model.label_missingness,
            Model.label_horizon,
            Model.exposition,
            func.coalesce(counts.c.batches, 0),
            func.coalesce(counts.c.rows, 0),
            func.coalesce(counts.c.unfolded, 0),
            func.coalesce(counts.c.quarantined, 0),
        )
        .outerjoin(counts, counts.c.model_id == Model.id)
        .where(_of_shard(Model.id, shard))
        .order_by(Model.name)
    ).all()


def _as_text(column: Any) -> Any:
    """A JSON column read as its text."""
    return cast(column, Text)


def _with_aggregate(*columns: Any) -> Select[Any]:
    return select(
        WM.model_id, WM.segment, WM.window_start, WM.computed_at, WA.version, *columns
    ).join(
        WA,
        and_(
            WA.model_id == WM.model_id,
            WA.segment == WM.segment,
            WA.window_start == WM.window_start,
        ),
    )


def _latest(*columns: Any, shard: tuple[int, int] | None = None) -> Select[Any]:
    """SELECT ``columns`` of the latest fresh result with labelled rows per (model, segment)
    and its aggregate."""
    latest = (
        _with_aggregate()
        .with_only_columns(
            WM.model_id.label("model_id"),
            WM.segment.label("segment"),
            func.max(WM.window_start).label("window_start"),
        )
        .where(WM.status == StoredStatus.FRESH, WA.n > 0, _of_shard(WM.model_id, shard))
        .group_by(WM.model_id, WM.segment)
        .subquery()
    )
    return _with_aggregate(*columns).join(
        latest,
        and_(
            latest.c.model_id == WM.model_id,
            latest.c.segment == WM.segment,
            latest.c.window_start == WM.window_start,
        ),
    )


def latest_keys(session: Session, shard: tuple[int, int] | None = None) -> Sequence[Record]:
    """``model_id, segment, window_start, computed_at, version`` of the latest window with
    labelled rows and a fresh result of every (model, segment) (of ``shard``; one
    statement)."""
    return session.execute(_latest(shard=shard)).all()


@dataclass(frozen=True)
class Projection:
    """The members of a latest window's documents a scrape reads: on PostgreSQL only
    these are built and sent (a member absent from a document reads null), elsewhere the
    documents are read whole.

    Attributes
    ----------
    metrics, intervals : sequence of str, optional
        The names read of ``metrics`` and ``intervals`` (None: every one).
    judged : sequence of str
        The names read of the ``maturity`` document's ``metrics`` and ``intervals`` (its
        ``reasons`` whole, ``{}`` when absent; nothing else of it).
    drift : mapping of str to sequence of str
        Per test of the drift verdict (``prior``, ...) the members read of it.
    """

    metrics: Sequence[str] | None
    intervals: Sequence[str] | None
    judged: Sequence[str]
    drift: Mapping[str, Sequence[str]]


def latest_documents(
    session: Session,
    only: Sequence[WindowId] | None = None,
    shard: tuple[int, int] | None = None,
    projection: Projection | None = None,
) -> Iterator[Record]:
    """The latest fresh windows as :func:`latest_keys` reads them, then ``n, positives``,
    the ``metrics, intervals, reasons, drift`` documents as text, whether the detail
    is of the metrics' version and the ``maturity`` document as text (on PostgreSQL
    only the members of ``projection``, if given); fetched :data:`KEYS_PER_QUERY` rows at
    a time.

    With ``only``: those windows instead, if still fresh (one statement per
    :data:`KEYS_PER_QUERY`); else the latest of the models of ``shard`` (one statement).
    """
    documents = (
        WA.n,
        WA.positives,
        WM.metrics,
        WM.intervals,
        WM.reasons,
        WM.drift,
        WM.detail_version == WM.aggregate_version,
        WM.maturity,
    )
    if only is None:
        statements = [_latest(*documents, shard=shard)]
    else:
        statements = _fresh_among(session, _with_aggregate(*documents), only)
    postgres = session.get_bind().dialect.name == "postgresql"
    for statement in statements:
        projected = _projected(statement, projection if postgres else None)
        yield from session.execute(projected.execution_options(yield_per=KEYS_PER_QUERY))


def _projected(statement: Select[Any], projection: Projection | None) -> Select[Any]:
    """The rows of :func:`latest_documents`' ``statement``, its documents as text: whole
    without ``projection``, else built of its members out of each document opened once
    (an inner SELECT kept apart by ``OFFSET 0``, as in :func:`outcome_values`)."""
    columns = list(statement.selected_columns)
    if projection is None:
        for i in (7, 8, 9, 10, 12):
            columns[i] = _as_text(columns[i])
        return statement.with_only_columns(*columns)
    opened = [column.label(f"c{i}") for i, column in enumerate(statement.selected_columns)]
    for i in (7, 8, 10, 12):  # metrics, intervals, drift, maturity
        opened[i] = _opened_copy(statement.selected_columns[i]).label(f"c{i}")
    c = list(statement.with_only_columns(*opened).offset(0).subquery().c)
    metrics, intervals, reasons, drift, current, maturity = c[7:13]
    judged = _object(
        {
            "metrics": _picked(maturity["metrics"], projection.judged),
            "intervals": _picked(maturity["intervals"], projection.judged),
            "reasons": func.coalesce(maturity["reasons"], func.jsonb_build_object()),
        },
        maturity,
    )
    tests = {kind: _picked(drift[kind], members) for kind, members in projection.drift.items()}
    return select(
        *c[:7],
        _as_text(_if_object(metrics, _picked(metrics, projection.metrics))),
        _as_text(_if_object(intervals, _picked(intervals, projection.intervals))),
        _as_text(reasons),
        _as_text(_if_object(drift, _object(tests, drift))),
        current,
        _as_text(_if_object(maturity, judged)),
    )


def _opened_copy(document: Any) -> Any:
    """``document`` decompressed once (PostgreSQL: ``#> '{}'``, the empty path, returns
    it as it is, detoasted), so that the members read out of it do not decompress it each
    again."""
    return document.op("#>")(cast(literal("{}"), ARRAY(Text)))


def _picked(document: Any, names: Sequence[str] | None) -> Any:
    """The object of ``document``'s members ``names`` (None: ``document`` itself)."""
    if names is None:
        return document
    return _object({name: document[name] for name in names}, document)


def _present(document: Any, names: Sequence[str] | None) -> Any:
    """The object of those of ``document``'s members ``names`` it holds (None:
    ``document`` itself): a name it does not hold stays absent, as :func:`_picked` makes
    it null."""
    if names is None:
        return document
    empty = cast(literal("{}"), document.type)
    out: Any = empty
    for name in names:
        holds = document.op("?", is_comparison=True)(name)
        out = out.op("||")(case((holds, _object({name: document[name]}, document)), else_=empty))
    return out


def _object(members: Mapping[str, Any], like: Any) -> Any:
    """``jsonb_build_object`` of ``members``, typed as the document ``like``."""
    pairs = [part for name, value in members.items() for part in (literal(name), value)]
    return func.jsonb_build_object(*pairs, type_=like.type)


def _if_object(document: Any, built: Any) -> Any:
    """``built`` where ``document`` is a JSON object, else ``document`` as it is (SQL or
    JSON null, ...)."""
    return case((func.jsonb_typeof(document) == "object", built), else_=document)


def _fresh_among(session: Session, query: Select[Any], keys: Sequence[WindowId]) -> list[Any]:
    """``query`` restricted to the fresh windows among ``keys``, :data:`KEYS_PER_QUERY`
    keys a statement."""
    keys = list(keys)
    return [
        query.where(
            WM.status == StoredStatus.FRESH,
            _among(session, WINDOW_KEY, keys[i : i + KEYS_PER_QUERY]),
        )
        for i in range(0, len(keys), KEYS_PER_QUERY)
    ]


BOTH_KINDS: ColumnElement[bool] = and_(WA.n_unlabelled > 0, WA.n > 0)
"""A window holding unlabelled (scored) and labelled rows."""


def _latest_meeting(condition: ColumnElement[bool], shard: tuple[int, int] | None) -> Any:
    """A subquery of ``model_id, segment, window_start``: the latest fresh window per
    (model, segment) of the models of ``shard`` meeting ``condition``."""
    joined = and_(
        WA.model_id == WM.model_id, WA.segment == WM.segment, WA.window_start == WM.window_start
    )
    return (
        select(
            WM.model_id.label("model_id"),
            WM.segment.label("segment"),
            func.max(WM.window_start).label("window_start"),
        )
        .join(WA, joined)
        .where(WM.status == StoredStatus.FRESH, condition, _of_shard(WM.model_id, shard))
        .group_by(WM.model_id, WM.segment)
        .subquery()
    )


def _is(latest: Any) -> ColumnElement[bool]:
    """The stored result is the window of ``latest`` (:func:`_latest_meeting`)."""
    return and_(
        latest.c.model_id == WM.model_id,
        latest.c.segment == WM.segment,
        latest.c.window_start == WM.window_start,
    )


def _latest_document(
    role: int,
    condition: ColumnElement[bool],
    document: Any = WM.estimate,
    shard: tuple[int, int] | None = None,
) -> Select[Any]:
    """(role, model, segment, start, ``document`` as text) of the latest fresh window per
    (model, segment) of the models of ``shard`` meeting ``condition`` (``document``: the
    stored estimate by default)."""
    latest = _latest_meeting(condition, shard)
    return select(
        literal(role).label("role"), WM.model_id, WM.segment, WM.window_start, _as_text(document)
    ).join(latest, _is(latest))


def latest_estimates(session: Session, shard: tuple[int, int] | None = None) -> Sequence[Record]:
    """``role, model_id, segment, window_start`` and the stored estimate as text of the
    latest fresh window per (model, segment) with unlabelled rows (role 0) and of the
    latest with unlabelled and labelled rows (role 1), of the models of ``shard``; one
    statement (UNION ALL)."""
    return session.execute(
        union_all(
            _latest_document(0, WA.n_unlabelled > 0, shard=shard),
            _latest_document(1, BOTH_KINDS, shard=shard),
        )
    ).all()


def latest_maturity_keys(
    session: Session, shard: tuple[int, int] | None = None
) -> Sequence[Record]:
    """``model_id, segment, window_start, computed_at`` of the latest fresh window per
    (model, segment) holding both kinds of rows, of the models of ``shard`` (one
    statement)."""
    latest = _latest_meeting(BOTH_KINDS, shard)
    return session.execute(select(*WINDOW_KEY, WM.computed_at).join(latest, _is(latest))).all()


def maturity_documents(
    session: Session,
    only: Sequence[WindowId] | None,
    members: Mapping[str, Sequence[str] | None],
    shard: tuple[int, int] | None = None,
) -> Iterator[Record]:
    """``model_id, segment, window_start, computed_at`` and the stored ``maturity`` document
    as text (on PostgreSQL only its ``members``, each whole (None) or only the names given
    of it: a member or name absent from the document reads null) of the fresh windows
    ``only`` (:data:`KEYS_PER_QUERY` per statement), or without them of every window
    :func:`latest_maturity_keys` reads (one statement); fetched :data:`KEYS_PER_QUERY`
    rows at a time."""
    columns = (*WINDOW_KEY, WM.computed_at, _opened(session, WM.maturity).label("maturity"))
    if only is None:
        latest = _latest_meeting(BOTH_KINDS, shard)
        statements = [select(*columns).join(latest, _is(latest))]
    else:
        statements = _fresh_among(session, select(*columns), only)
    postgres = session.get_bind().dialect.name == "postgresql"
    for statement in statements:
        c = list(statement.offset(0).subquery().c)
        document = c[4]
        if postgres:
            picked = {name: _present(document[name], names) for name, names in members.items()}
            document = _if_object(document, _object(picked, document))
        projected = select(*c[:4], _as_text(document))
        yield from session.execute(projected.execution_options(yield_per=KEYS_PER_QUERY))


def fresh_stamps(session: Session, shard: tuple[int, int] | None = None) -> Sequence[Record]:
    """``model_id, segment``, the number of fresh windows and their latest
    ``computed_at``, of every (model, segment) of the models of ``shard`` with a fresh
    window (one statement)."""
    return session.execute(
        select(WM.model_id, WM.segment, func.count(), func.max(WM.computed_at))
        .where(WM.status == StoredStatus.FRESH, _of_shard(WM.model_id, shard))
        .group_by(WM.model_id, WM.segment)
    ).all()


def _recent(limit: int, shard: tuple[int, int] | None = None) -> Any:
    """The ``limit`` most recent fresh windows with labelled rows of every (model, segment)
    (of ``shard``), ranked newest first within each: a subquery of ``model_id, segment,
    window_start, computed_at, rank``."""
    return (
        select(
            WM.model_id,
            WM.segment,
            WM.window_start,
            WM.computed_at,
            func.row_number()
            .over(partition_by=(WM.model_id, WM.segment), order_by=WM.window_start.desc())
            .label("rank"),
        )
        .join(
            WA,
            and_(
                WA.model_id == WM.model_id,
                WA.segment == WM.segment,
                WA.window_start == WM.window_start,
            ),
        )
        .where(WM.status == StoredStatus.FRESH, WA.n > 0, _of_shard(WM.model_id, shard))
    )


def recent_keys(
    session: Session,
    groups: Collection[tuple[int, str]] | None,
    limit: int,
    shard: tuple[int, int] | None = None,
) -> list[Record]:
    """``model_id, segment, window_start, computed_at`` of the ``limit`` most recent fresh
    windows with labelled rows of every (model, segment) of the models of ``shard`` (one
    statement), or of ``groups`` (:data:`KEYS_PER_QUERY` per statement), by group and
    newest first within each."""
    ranked = _recent(limit, shard)
    if groups is None:
        filters = [ranked]
    else:
        wanted = sorted(groups)
        filters = [
            ranked.where(_among(session, WINDOW_KEY[:2], wanted[i : i + KEYS_PER_QUERY]))
            for i in range(0, len(wanted), KEYS_PER_QUERY)
        ]
    out: list[Record] = []
    for statement in filters:
        recent = statement.subquery()
        out.extend(
            session.execute(
                select(
                    recent.c.model_id, recent.c.segment, recent.c.window_start, recent.c.computed_at
                )
                .where(recent.c.rank <= limit)
                .order_by(recent.c.model_id, recent.c.segment, recent.c.window_start.desc())
            ).all()
        )
    return out


def _judged(completeness: Any, completed: Any, labelled: Any) -> Any:
    """A stored number as an SLA objective reads it (floats read from the documents):
    ``completed`` (in the ``maturity`` document) where the window was completed
    (``completeness`` is not null), else ``labelled`` (as in
    :func:`app.sla.objectives.judged_documents`); null where the document holds none."""
    return case((completeness.is_not(None), completed), else_=labelled)


def _opened(session: Session, document: Any) -> Any:
    """``document`` as a value read once: on PostgreSQL a decompressed copy, so the paths
    read out of it do not decompress it each again (its null members dropped: a path to
    one reads null either way)."""
    if session.get_bind().dialect.name != "postgresql":
        return document
    return _opened_copy(document)


def outcome_values(
    session: Session,
    keys: Sequence[WindowId] | None,
    flags: Sequence[str],
    metrics: Sequence[str],
    recent: tuple[int, tuple[int, int] | None] = (1, None),
) -> Iterator[Record]:
    """What the streaks test in the fresh windows ``keys`` (:data:`KEYS_PER_QUERY` per
    statement), extracted in SQL from the stored documents: ``model_id, segment,
    window_start, computed_at``, the drift verdict's flag of each kind of ``flags``,
    whether the detail is of the metrics' version, then per name of ``metrics`` its
    value and its interval's lower and upper bounds, the completed ones where the window
    has a ``maturity`` document (as the SLA report judges it).

    Without ``keys``: those of the windows :func:`recent_keys` reads without groups,
    ``recent`` being its ``(limit, shard)`` (one statement: naming thousands of windows
    costs more, in bound parameters alone, than reading them).

    Each stored document is opened once per row (:func:`_opened`, in an inner SELECT
    kept apart by ``OFFSET 0``, which PostgreSQL does not flatten); the outer SELECT reads
    the paths out of those values.
    """
    if keys is None:
        ranked = _recent(*recent).subquery()
        wanted = select(ranked.c.model_id, ranked.c.segment, ranked.c.window_start).where(
            ranked.c.rank <= recent[0]
        )
        conditions: list[ColumnElement[bool]] = [tuple_(*WINDOW_KEY).in_(wanted)]
    else:
        conditions = [
            _among(session, WINDOW_KEY, keys[i : i + KEYS_PER_QUERY])
            for i in range(0, len(keys), KEYS_PER_QUERY)
        ]
    for condition in conditions:
        yield from session.execute(_outcome_statement(session, condition, flags, metrics)).all()


def _outcome_statement(
    session: Session, condition: ColumnElement[bool], flags: Sequence[str], metrics: Sequence[str]
) -> Select[Any]:
    """The SELECT of :func:`outcome_values` of the fresh windows meeting ``condition``."""
    inner = (
        select(
            *WINDOW_KEY,
            WM.computed_at,
            _opened(session, WM.drift).label("drift"),
            (WM.detail_version == WM.aggregate_version).label("current"),
            _opened(session, WM.metrics).label("metrics"),
            _opened(session, WM.intervals).label("intervals"),
            _opened(session, WM.maturity).label("maturity"),
        )
        .where(WM.status == StoredStatus.FRESH, condition)
        .offset(0)
        .subquery()
    )
    c = inner.c
    completeness = c.maturity["completeness"].as_float()
    columns = [c.drift[(kind, "flag")].as_boolean() for kind in flags]
    columns.append(c.current)
    for name in metrics:
        completed = c.maturity[("metrics", name)].as_float()
        columns.append(_judged(completeness, completed, c.metrics[name].as_float()))
        for bound in ("lower", "upper"):
            completed = c.maturity[("intervals", name, bound)].as_float()
            labelled = c.intervals[(name, bound)].as_float()
            columns.append(_judged(completeness, completed, labelled))
    return select(c.model_id, c.segment, c.window_start, c.computed_at, *columns)
