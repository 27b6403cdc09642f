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
#
# The binary checks the signatures the sidecar still verifies with
# libsecp256k1 (cgo, `-tags libsecp256k1`). go-nostr compiles its own copy of
# libsecp256k1's C source into the binary, so the build stage needs only a C
# compiler (the golang image has gcc and libc6-dev, with the static libc.a)
# and the final stage no library at all: neither Debian's libsecp256k1-dev
# nor libsecp256k1-1 is used.
# A plain `go build ./cmd/grasp-sync` stays pure Go.
#
# The binary is static (glibc linked in; Go's own DNS resolver and user
# lookup, tags netgo and osusergo), so the same file also runs in strfry's
# Alpine image as its write-policy plugin, `grasp-sync strfry-policy`
# (deploy/docker-compose.yml and deploy/kubernetes copy it there). .ci/image
# runs it in an image that holds nothing but the binary.

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
    CGO_ENABLED=1 GOOS=linux go build -trimpath -tags libsecp256k1,netgo,osusergo \
      -ldflags "-s -w -linkmode external -extldflags -static \
        -X github.com/grasp-sync/grasp-sync/internal/version.Version=${VERSION} \
        -X github.com/grasp-sync/grasp-sync/internal/version.Commit=${COMMIT} \
        -X github.com/grasp-sync/grasp-sync/internal/version.Date=${DATE}" \
      -o /out/grasp-sync ./cmd/grasp-sync

FROM debian:bookworm-slim
# The git directory is shared with the GRASP service's container, whose
# files may belong to another uid; git refuses such repositories unless told
# otherwise. System config, because grasp-sync runs git with a clean
# environment (no GIT_CONFIG_* variables).
#
# Smaller: grasp-sync runs only git's C plumbing (init, fetch over
# http/https/git, cat-file, for-each-ref, update-ref, symbolic-ref), so
# Debian's git loses what only its Perl scripts, manual pages and server-side
# or mail commands need: perl (perl-base, which dpkg needs, stays), git-man,
# scalar, git-shell, git-daemon, git-http-push and git-imap-send;
# git-http-backend stays: the sidecar's read-only git server
# (git_http.listen) runs it. /usr/lib/git-core/git becomes a hard link to
# the identical /usr/bin/git. The purge forces past git's dependency on perl, so a derived
# image that installs more packages needs `apt-get install perl git-man`
# (or `apt-get -f install`) first. .ci/image fetches over smart HTTP with
# this image's git as purgatory does.
RUN apt-get update \
 && apt-get install -y --no-install-recommends git ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && dpkg --purge --force-depends perl libperl5.36 perl-modules-5.36 liberror-perl git-man \
 && rm -f /usr/bin/scalar /usr/bin/git-shell \
      /usr/lib/git-core/scalar /usr/lib/git-core/git-shell /usr/lib/git-core/git-daemon \
      /usr/lib/git-core/git-http-push \
      /usr/lib/git-core/git-imap-send /usr/lib/git-core/git-add--interactive \
 && cmp /usr/bin/git /usr/lib/git-core/git \
 && ln -f /usr/bin/git /usr/lib/git-core/git \
 && groupadd --gid 10001 grasp \
 && useradd --uid 10001 --gid 10001 --create-home --home-dir /home/grasp --shell /usr/sbin/nologin grasp \
 && git config --system --add safe.directory '*' \
 && mkdir -p /srv/git \
 && chown 10001:10001 /srv/git
# After the packages, so that layer stays cached from one commit to the next.
ARG VERSION=dev
ARG COMMIT=unknown
LABEL org.opencontainers.image.title="grasp-sync" \
      org.opencontainers.image.description="Sync sidecar for Nostr git relays (NIP-34 / GRASP)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}"
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
