# orgate in a container: a non-root user, nothing written outside the data volume (the root
# filesystem may be read-only), JSON logs, a health check. docs/deployment.md has the recipe.
#
#   docker build -t orgate .
#   docker run -d -p 8080:8080 -e ORGATE_API_KEY -v orgate-data:/var/lib/orgate --read-only orgate
#
# BASE: any Debian-based image with python3 and its venv module (the test command builds one
# from Debian packages, as no image registry is reachable there).
ARG BASE=python:3.12-slim
FROM ${BASE}

RUN useradd --uid 10001 --user-group --home-dir /var/lib/orgate --no-create-home \
        --shell /usr/sbin/nologin orgate \
    && install -d -o orgate -g orgate -m 0700 /var/lib/orgate

COPY pyproject.toml README.md /src/orgate/
COPY src /src/orgate/src
RUN python3 -m venv /opt/orgate \
    && /opt/orgate/bin/pip install --no-cache-dir --disable-pip-version-check '/src/orgate[postgres,redis]' \
    && rm -rf /src/orgate

# Every file orgate writes (the SQLite store, the review queue, the compaction key) goes to the
# data directory; the working directory stays read-only.
ENV PATH=/opt/orgate/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    ORGATE_DATA_DIR=/var/lib/orgate \
    ORGATE_SERVER__HOST=0.0.0.0 \
    ORGATE_SERVER__PORT=8080 \
    ORGATE_SERVER__LOG_FORMAT=json
USER orgate
WORKDIR /opt/orgate
VOLUME ["/var/lib/orgate"]
EXPOSE 8080
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s \
    CMD ["python3", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('ORGATE_SERVER__PORT', '8080'), timeout=2)"]
ENTRYPOINT ["orgate", "serve"]
