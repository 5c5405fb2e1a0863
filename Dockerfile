# The Sealpost relay image: the static relay and the built web app on an empty base, running as
# an unprivileged user, with a health check that needs no shell and no curl.
#
# From source (Docker or podman; the `build` stage builds the relay and the app):
#   docker build -t sealpost-relay .
# From what `cargo xtask dist` built (how releases are made; the context is its image-root):
#   cargo xtask dist image-root
#   podman build --build-arg ARTIFACTS=dist -t sealpost-relay -f Dockerfile target/dist/image-root
ARG ARTIFACTS=source

FROM rust:1-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends nodejs npm python3-venv ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# The whole workspace (see .dockerignore): the relay embeds migrations/ at build time.
COPY . .
# The same command as a release: Zig cross-compiles the relay statically (musl) for this
# architecture, and the browser module and the app are built into image-root/ARCH/.
RUN cargo xtask dist image-root && mv target/dist/image-root /image-root

FROM scratch AS from-source
ARG TARGETARCH
COPY --from=build /image-root/${TARGETARCH}/ /
COPY --from=build --chown=10001:10001 /image-root/writable/ /data/
COPY --from=build --chown=10001:10001 /image-root/writable/ /tmp/

FROM scratch AS from-dist
ARG TARGETARCH
COPY ${TARGETARCH}/ /
COPY --chown=10001:10001 writable/ /data/
COPY --chown=10001:10001 writable/ /tmp/

FROM from-${ARTIFACTS}
USER 10001:10001
WORKDIR /data
ENV SEALPOST_LISTEN=0.0.0.0:8080 \
    SEALPOST_DATABASE_URL=sqlite:///data/sealpost-relay.db \
    SEALPOST_WEB=/srv/sealpost/web \
    SEALPOST_LOG=info
EXPOSE 8080
VOLUME /data
HEALTHCHECK --interval=10s --timeout=5s --start-period=5s --retries=3 \
  CMD ["/usr/local/bin/sealpost-relay", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/sealpost-relay"]
CMD ["serve"]
