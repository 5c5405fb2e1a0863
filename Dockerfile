# The Sealpost relay. Build: docker build -t sealpost-relay .
# Runs as an unprivileged user; data (the SQLite file, when used) lives in /data.
FROM rust:1-bookworm AS build
WORKDIR /src
# The whole workspace (see .dockerignore): the relay embeds migrations/ at build time.
COPY . .
RUN cargo build --release --locked -p sealpost-relay \
 && mkdir -p web

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --home /data --create-home sealpost
COPY --from=build /src/target/release/sealpost-relay /usr/local/bin/sealpost-relay
COPY --from=build /src/web /srv/web
USER sealpost
WORKDIR /data
ENV SEALPOST_LISTEN=0.0.0.0:8080 \
    SEALPOST_DATABASE_URL=sqlite:///data/sealpost-relay.db \
    SEALPOST_WEB=/srv/web \
    SEALPOST_LOG=info
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --retries=3 CMD curl -fsS http://127.0.0.1:8080/readyz || exit 1
ENTRYPOINT ["sealpost-relay"]
CMD ["serve"]
