# syntax=docker/dockerfile:1
# priorwatch image: one image for the API, the workers and the migrations.
#
#   docker build -t priorwatch .
#   docker run --rm -p 8000:8000 -v priorwatch-data:/var/lib/priorwatch priorwatch \
#     sh -c 'priorwatch migrate && exec priorwatch serve --host 0.0.0.0 --port 8000'
#
# (embedded mode: SQLite file in /var/lib/priorwatch, worker in the API process).
# With Postgres, set PRIORWATCH_DATABASE_URL and run `priorwatch migrate` once,
# `priorwatch serve ...` for each API replica and `priorwatch worker` for each
# worker: see docker-compose.yml and docs/operations.md.

# ---- build: install the package and its dependencies into a virtualenv -------
FROM python:3.11-slim AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src

# Dependencies first, exactly as pinned by requirements.lock (`make lock`): every
# runtime and build dependency at one version with its hashes, so the image
# holds what CI tested (make install uses the same pins). This layer is rebuilt
# only when the lock changes, not on every source edit.
COPY requirements.lock ./
RUN pip install --require-hashes -r requirements.lock

# The package itself (.dockerignore lets only what `pip install .` needs in),
# built with the locked setuptools and wheel, nothing else downloaded.
COPY . .
RUN pip install --no-deps --no-build-isolation . \
    && priorwatch --help > /dev/null

# ---- runtime: the virtualenv on a clean base, as an unprivileged user --------
FROM python:3.11-slim AS runtime

LABEL org.opencontainers.image.title="priorwatch" \
      org.opencontainers.image.description="Prior-invariant performance monitoring for binary classifiers" \
      org.opencontainers.image.licenses="Apache-2.0"

ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

RUN groupadd --system --gid 10001 priorwatch \
    && useradd --system --uid 10001 --gid priorwatch --no-create-home \
        --home-dir /var/lib/priorwatch --shell /usr/sbin/nologin priorwatch \
    && install -d -o priorwatch -g priorwatch -m 0750 /var/lib/priorwatch /var/cache/priorwatch

COPY --from=build /opt/venv /opt/venv

# Working directory = data directory: the default SQLite URL
# (sqlite:///./priorwatch.db) lands here, and so would a .env file.
WORKDIR /var/lib/priorwatch
USER 10001:10001

EXPOSE 8000
# Liveness of the API (workers and the migrate job disable it in compose).
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"]

CMD ["priorwatch", "serve", "--host", "0.0.0.0", "--port", "8000"]
