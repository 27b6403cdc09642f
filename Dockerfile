# syntax=docker/dockerfile:1
#
# grasp-sync container image.
#
#   docker build -t grasp-sync \
#     --build-arg VERSION=$(git describe --tags --always) \
#     --build-arg COMMIT=$(git rev-parse HEAD) \
#     --build-arg DATE=$(date -u +%Y-%m-%dT%H:%M:%SZ) .
#
# The final stage is debian:bookworm-slim because purgatory shells out to
# git (fetches over https/http/git) and needs CA certificates.

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
# Module downloads are cached in their own layer.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
ARG DATE=unknown
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=linux go build -trimpath \
      -ldflags "-s -w \
        -X github.com/grasp-sync/grasp-sync/internal/version.Version=${VERSION} \
        -X github.com/grasp-sync/grasp-sync/internal/version.Commit=${COMMIT} \
        -X github.com/grasp-sync/grasp-sync/internal/version.Date=${DATE}" \
      -o /out/grasp-sync ./cmd/grasp-sync

FROM debian:bookworm-slim
ARG VERSION=dev
ARG COMMIT=unknown
LABEL org.opencontainers.image.title="grasp-sync" \
      org.opencontainers.image.description="Sync sidecar for Nostr git relays (NIP-34 / GRASP)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}"
# The git directory is shared with the GRASP service's container, whose
# files may belong to another uid; git refuses such repositories unless told
# otherwise. System config, because grasp-sync runs git with a clean
# environment (no GIT_CONFIG_* variables).
RUN apt-get update \
 && apt-get install -y --no-install-recommends git ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 10001 grasp \
 && useradd --uid 10001 --gid 10001 --create-home --home-dir /home/grasp --shell /usr/sbin/nologin grasp \
 && git config --system --add safe.directory '*' \
 && mkdir -p /srv/git \
 && chown 10001:10001 /srv/git
COPY --from=build /out/grasp-sync /usr/local/bin/grasp-sync
# /srv/git is the conventional mount point of the shared git directory; it
# is empty and owned by the runtime user so a fresh named volume is writable.
ENV GRASP_SYNC_LISTEN=:9090
USER 10001:10001
EXPOSE 9090
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s \
  CMD ["grasp-sync", "status", "--timeout", "4s", "--json"]
ENTRYPOINT ["grasp-sync"]
CMD ["run"]
