# syntax=docker/dockerfile:1
#
# Small static images of the two binaries:
#
#   docker build --target controller -t ghcr.io/ferrolb/controller:dev .
#   docker build --target speaker    -t ghcr.io/ferrolb/speaker:dev .
#
# The builder compiles both at once for x86_64-unknown-linux-musl (statically
# linked: no libc in the final images), so the two builds share one cached
# stage. The profile is `dist`: fat LTO, opt-level "s" (the speaker's crate "z") but for the BGP codec
# and the controller's own crate (Cargo.toml; BENCHMARKS.md has the figures). The final stages are distroless/static: CA certificates, tzdata and
# /etc/passwd, no shell, no package manager.

FROM rust:1.95 AS builder
# ring and psm (via kube's TLS and its JSONPath parser) compile C for the
# target: musl-gcc.
RUN apt-get update \
 && apt-get install -y --no-install-recommends musl-tools \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# rust-toolchain.toml pins the toolchain: install it (rustup >= 1.28 reads the
# file when given no name) and the musl target, in their own layer.
COPY rust-toolchain.toml ./
RUN rustup toolchain install \
 && rustup target add x86_64-unknown-linux-musl
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --profile dist --locked -p controller -p speaker \
        --target x86_64-unknown-linux-musl \
 && mkdir /out \
 && cp target/x86_64-unknown-linux-musl/dist/controller /out/ \
 && cp target/x86_64-unknown-linux-musl/dist/speaker /out/

# The controller needs no privilege: it runs as distroless' nonroot user
# (65532), as config/controller/deployment.yaml requires.
FROM gcr.io/distroless/static-debian12:nonroot AS controller
LABEL org.opencontainers.image.title="ferrolb controller" \
      org.opencontainers.image.description="MetalLB-compatible IP address controller" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=builder /out/controller /controller
USER 65532:65532
EXPOSE 7472
ENTRYPOINT ["/controller"]
CMD ["run"]

# The speaker runs as root inside the container so that the one capability the
# DaemonSet adds (NET_RAW, for AF_PACKET) is effective; the DaemonSet drops
# every other one.
FROM gcr.io/distroless/static-debian12 AS speaker
LABEL org.opencontainers.image.title="ferrolb speaker" \
      org.opencontainers.image.description="MetalLB-compatible BGP and layer 2 speaker" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=builder /out/speaker /speaker
EXPOSE 7472 7946
ENTRYPOINT ["/speaker"]
