"""The synchronous client: log predictions, flush them reliably, read results.

Logging is local and fast: rows are binned into the model's bins and summed
per (window, segment) in memory (:mod:`priorwatch_client.aggregate`). A background
thread sends the sums as compact histogram batches, by size (``flush_rows``
rows logged) and by time (every ``flush_interval_s``), each batch with its own
Idempotency-Key reused on every retry (:mod:`priorwatch_client.retry`). The buffer is
bounded: rows logged but not yet acknowledged never exceed
``max_buffer_rows`` and the histograms held never exceed ``max_buffer_bytes``;
when full, ``log`` waits for room (at most ``block_timeout_s``, then
:class:`~priorwatch_client.errors.BufferFull`). See docs/client.md.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx
import orjson

from priorwatch_client.aggregate import Binner, Bucket, BucketKey, Counts, event_time
from priorwatch_client.errors import (
    ApiError,
    BufferFull,
    ClientError,
    DeliveryError,
    UndeliveredBatch,
)
from priorwatch_client.retry import RetryPolicy, send_with_retries
from priorwatch_client.sums import ProbabilitySums
from priorwatch_client.types import ModelInfo, SlaReport, Window
from priorwatch_client.windows import isoformat_z

log = logging.getLogger("priorwatch.client")

Contribution = tuple[list[Counts], ProbabilitySums | None, int]


class Client:
    """A client of one model of a priorwatch service.

    Parameters
    ----------
    base_url : str
        The service, e.g. ``http://127.0.0.1:8000``.
    token : str
        A key of the model (``ingest`` to log, ``read`` to read) or the admin token.
    model : str
        The model's name.
    timeout : float
        Seconds per HTTP request (connect, read, write).
    flush_interval_s : float
        The background thread sends what was logged at least this often.
    flush_rows : int
        ... and as soon as this many rows wait to be sent.
    max_buffer_rows : int
        Rows logged but not yet acknowledged, at most (back-pressure).
    max_buffer_bytes : int
        Memory of the histograms held (logged and in flight), at most.
    block_timeout_s : float
        How long ``log`` waits for room before raising :class:`BufferFull`.
    retry : RetryPolicy
        Backoff and the total retry time per request (default 10 minutes).
    transport : httpx.BaseTransport, optional
        For tests, proxies or custom TLS.
    clock, sleep, rng, now
        Injected time and randomness (monotonic seconds, sleep, jitter, wall clock).
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        model: str,
        *,
        timeout: float = 10.0,
        flush_interval_s: float = 5.0,
        flush_rows: int = 1_000_000,
        max_buffer_rows: int = 20_000_000,
        max_buffer_bytes: int = 64 * 2**20,
        block_timeout_s: float = 30.0,
        retry: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.model = model
        self._path = f"/v1/models/{quote(model, safe='')}"
        self._retry = retry or RetryPolicy()
        self._clock, self._sleep, self._now = clock, sleep, now
        self._rng = rng or random.Random()
        self.flush_interval_s = flush_interval_s
        self.flush_rows = flush_rows
        self.max_buffer_rows = max_buffer_rows
        self.max_buffer_bytes = max_buffer_bytes
        self.block_timeout_s = block_timeout_s
        headers = {"Authorization": f"Bearer {token}", "User-Agent": "priorwatch-client"}
        # One connection pool per thread of use: the sender's and the caller's.
        self._http = httpx.Client(
            base_url=base_url, headers=headers, timeout=timeout, transport=transport
        )
        self._sender_http = httpx.Client(
            base_url=base_url, headers=headers, timeout=timeout, transport=transport
        )
        self._info: ModelInfo | None = None
        self._binner: Binner | None = None
        self._meta_lock = threading.Lock()
        self._cond = threading.Condition()
        self._open: dict[BucketKey, Bucket] = {}
        self._open_rows = self._inflight_rows = 0
        self._open_bytes = self._inflight_bytes = 0
        self._requested = self._done = 0  # flush generations
        self._last_flush = clock()
        self._failed: list[tuple[UndeliveredBatch, Exception]] = []
        self._closing = False
        self._sender = threading.Thread(target=self._run, name="priorwatch-client", daemon=True)
        self._sender.start()

    # --- context manager ----------------------------------------------------

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            self.close()
            return
        try:  # an error is already propagating: do not mask it with a delivery error
            self.close()
        except ClientError as error:
            log.error("closing after %r: %s", exc, error)

    # --- model metadata -----------------------------------------------------

    def _get(self, path: str, params: Mapping[str, str] | None = None) -> httpx.Response:
        return send_with_retries(
            lambda: self._http.get(path, params=params),
            self._retry,
            what=f"GET {path}",
            clock=self._clock,
            sleep=self._sleep,
            rng=self._rng,
            now=self._now,
        )

    def model_info(self, *, refresh: bool = False) -> ModelInfo:
        """The model's settings (fetched once, or again with ``refresh``)."""
        with self._meta_lock:
            if self._info is None or refresh:
                info = ModelInfo.from_json(self._get(self._path).json())
                if self._binner is None:
                    edges = self._get(f"{self._path}/bins").json()["edges"]
                    self._binner = Binner.of(edges, info.window)
                if self._binner.n_bins != info.n_bins:
                    raise ClientError(f"the model has {info.n_bins} bins, /bins gave another count")
                self._info = info
            return self._info

    def _binner_for(self, segment: str | None) -> Binner:
        info = self.model_info()
        if segment is not None and segment not in info.segments:
            info = self.model_info(refresh=True)  # registered since we last asked?
            if segment not in info.segments:
                raise ValueError(f"segment {segment!r} is not registered for model {self.model!r}")
        assert self._binner is not None
        return self._binner

    # --- logging ------------------------------------------------------------

    def log(
        self,
        scores: Any,
        labels: Any,
        timestamp: datetime | float | None = None,
        segment: str | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> None:
        """Log labelled predictions (arrays of scores in [0, 1] and 0/1 labels).

        ``timestamp`` (a datetime, naive = UTC, or epoch seconds) picks the
        window of every row of the call. **It defaults to now**: right when the
        label is known as the prediction is made, wrong for delayed labels.
        When the labels of predictions sent earlier with :meth:`log_scores`
        arrive, pass each prediction's own ``timestamp``, as it was then;
        without it the labels land in the window of their arrival, and the
        prediction's window never sees them (nothing is refused: the client
        cannot tell a late label from a fresh prediction; docs/client.md,
        "Delayed labels"). With ``idempotency_key``
        the call's rows are sent as a batch of their own under that key
        (other calls with the same key, window and segment join it), so the
        same rows sent again under the same key are recognised by the service
        and counted once (docs/client.md). Raises ``ValueError``
        (:class:`~priorwatch_client.errors.InvalidInput`, naming the field)
        on invalid rows, :class:`BufferFull` when no room came within
        ``block_timeout_s``.
        """
        binner = self._binner_for(segment)
        at = event_time(timestamp, self._now())
        if len(scores) == 0 and len(labels) == 0:
            return
        key = binner.key(at, segment, True, idempotency_key)
        self._add(key, binner.labelled(scores, labels), at)

    def log_scores(
        self,
        scores: Any,
        timestamp: datetime | float | None = None,
        segment: str | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> None:
        """Log scores whose labels are not known (yet): every prediction, as it is made.

        The first half of the delayed-label protocol: the scored rows of the
        window (the label-free estimates, and the completeness of the labels
        that follow). When the labels are known, send the same predictions
        again with :meth:`log`, with **the timestamp given here** (docs/client.md,
        "Delayed labels"). ``timestamp`` (default now), ``segment`` and
        ``idempotency_key`` as for :meth:`log`.

        Sent as ``histogram.unlabelled`` batches, separate from labelled rows
        (a service too old to store unlabelled rows refuses them with a 422,
        reported by :meth:`flush`, without affecting labelled batches).
        """
        binner = self._binner_for(segment)
        at = event_time(timestamp, self._now())
        if len(scores) == 0:
            return
        key = binner.key(at, segment, False, idempotency_key)
        self._add(key, binner.unlabelled(scores), at)

    def _add(self, key: BucketKey, contribution: Contribution, at: datetime) -> None:
        counts, sums, rows = contribution
        new_bytes = sum(c.nbytes for c in counts)
        deadline = self._clock() + self.block_timeout_s
        with self._cond:
            while True:
                if self._closing:
                    raise ClientError("the client is closed")
                held_rows = self._open_rows + self._inflight_rows
                held_bytes = self._open_bytes + self._inflight_bytes
                grows = 0 if key in self._open else new_bytes
                fits = (
                    held_rows + rows <= self.max_buffer_rows
                    and held_bytes + grows <= self.max_buffer_bytes
                )
                if fits or (held_rows == 0 and held_bytes == 0):
                    break
                self._requested = max(self._requested, self._done + 1)  # make room: flush now
                self._cond.notify_all()
                remaining = deadline - self._clock()
                if remaining <= 0:
                    raise BufferFull(
                        f"{held_rows} rows / {held_bytes} bytes wait for acknowledgement; "
                        f"no room for {rows} more rows within {self.block_timeout_s:g} s"
                    )
                self._cond.wait(min(remaining, 1.0))
            bucket = self._open.get(key)
            if bucket is None:
                self._open[key] = Bucket(key, counts, sums, rows, at)
                self._open_bytes += new_bytes
            else:
                bucket.add(counts, sums, rows, at)
            self._open_rows += rows
            if self._open_rows >= self.flush_rows:
                self._cond.notify_all()

    # --- flushing -----------------------------------------------------------

    def flush(self, timeout: float | None = None) -> None:
        """Send everything logged so far and wait until the service acknowledged it.

        Raises
        ------
        DeliveryError
            Batches refused for good (e.g. 422) or whose retries ran out
            since the last ``flush``; it carries their bodies and keys.
        TimeoutError
            ``timeout`` seconds passed first (delivery goes on in the background).
        """
        with self._cond:
            self._requested += 1
            target = self._requested
            self._cond.notify_all()
            deadline = None if timeout is None else self._clock() + timeout
            while self._done < target:
                if not self._sender.is_alive():
                    raise ClientError("the client's sender thread has stopped")
                remaining = None if deadline is None else deadline - self._clock()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError(f"flush not acknowledged within {timeout:g} s")
                self._cond.wait(1.0 if remaining is None else min(remaining, 1.0))
            failed, self._failed = self._failed, []
        if failed:
            raise DeliveryError(tuple(b for b, _ in failed), tuple(e for _, e in failed))

    def close(self) -> None:
        """Flush, stop the background thread and close the connections.

        Raises :class:`DeliveryError` like :meth:`flush` (after closing).
        """
        if self._closing:
            return
        try:
            self.flush()
        finally:
            with self._cond:
                self._closing = True
                self._cond.notify_all()
            self._sender.join()
            self._http.close()
            self._sender_http.close()

    def _flush_due(self) -> bool:
        return (
            self._closing
            or self._requested > self._done
            or self._open_rows >= self.flush_rows
            or (self._open_rows > 0 and self._clock() - self._last_flush >= self.flush_interval_s)
        )

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._flush_due():
                    wait = self.flush_interval_s - (self._clock() - self._last_flush)
                    self._cond.wait(max(0.01, min(wait, 1.0)))
                if self._closing and not self._open:
                    return
                target = self._requested
                taken = list(self._open.values())
                self._open = {}
                self._inflight_rows, self._open_rows = self._open_rows, 0
                self._inflight_bytes, self._open_bytes = self._open_bytes, 0
            failed = [f for f in map(self._deliver, taken) if f is not None]
            with self._cond:
                self._failed.extend(failed)
                self._inflight_rows = self._inflight_bytes = 0
                self._done = max(self._done, target)
                self._last_flush = self._clock()
                self._cond.notify_all()

    def _deliver(self, bucket: Bucket) -> tuple[UndeliveredBatch, Exception] | None:
        idempotency_key = bucket.key.idempotency_key or str(uuid.uuid4())
        batch = UndeliveredBatch(self.model, idempotency_key, bucket.body(), bucket.rows)
        headers = {"Content-Type": "application/json", "Idempotency-Key": batch.idempotency_key}
        path = f"{self._path}/batches"
        try:
            send_with_retries(
                lambda: self._sender_http.post(path, content=batch.body, headers=headers),
                self._retry,
                what=f"POST {path}",
                clock=self._clock,
                sleep=self._sleep,
                rng=self._rng,
                now=self._now,
            )
        except Exception as exc:  # kept for flush(); the sender must go on
            log.error(
                "batch %s (%d rows) not delivered: %s", batch.idempotency_key, bucket.rows, exc
            )
            return batch, exc
        return None

    # --- reading ------------------------------------------------------------

    @staticmethod
    def _params(**values: datetime | str | None) -> dict[str, str]:
        out = {}
        for name, value in values.items():
            if isinstance(value, datetime):
                aware = value if value.utcoffset() is not None else value.replace(tzinfo=UTC)
                out[name.rstrip("_")] = isoformat_z(aware)
            elif value is not None:
                out[name.rstrip("_")] = value
        return out

    def windows(
        self,
        from_: datetime | None = None,
        to: datetime | None = None,
        segment: str | None = None,
        granularity: str | None = None,
    ) -> tuple[Window, ...]:
        """The windows holding data in [from_, to), oldest first (docs/reading.md)."""
        params = self._params(from_=from_, to=to, segment=segment, granularity=granularity)
        doc = self._get(f"{self._path}/windows", params).json()
        return tuple(Window.from_json(w) for w in doc["windows"])

    def window(
        self, start: datetime, segment: str | None = None, granularity: str | None = None
    ) -> Window | None:
        """One window with its curves, or None when it holds no data."""
        aware = start if start.utcoffset() is not None else start.replace(tzinfo=UTC)
        path = f"{self._path}/windows/{quote(isoformat_z(aware), safe='')}"
        try:
            doc = self._get(path, self._params(segment=segment, granularity=granularity)).json()
        except ApiError as exc:
            if exc.type.endswith(":window-not-found"):
                return None
            raise
        return Window.from_json(doc)

    def sla(
        self, from_: datetime | None = None, to: datetime | None = None, segment: str | None = None
    ) -> SlaReport:
        """The SLA report over [from_, to) (docs/reading.md)."""
        params = self._params(from_=from_, to=to, segment=segment)
        return SlaReport.from_json(orjson.loads(self._get(f"{self._path}/sla", params).content))
