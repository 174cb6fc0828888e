# tributary-server image: a build stage (the toolchain, everything
# scripts/install-deps.sh installs) and a slim runtime stage holding only the
# server, the client (for HEALTHCHECK), the embedded default model and the
# shared libraries they link. Ports (design.md §5): 8000 the OpenAI-compatible
# HTTP API, 50051 gRPC API, 50052
# plaintext health-only gRPC (probes), 9464 Prometheus /metrics.
#
# CPU (the defaults, plain Debian 12):
#   docker build -t tributary:cpu .
# GPU (NVIDIA CUDA 13 images; both stages must be the same distribution and
# release, since the runtime stage installs the packages the build stage's
# binaries were linked against; the CUDA runtime is linked into the server,
# and cuBLAS, which it loads at run time (engine/backend/cuda/cublas_api.h),
# comes with the CUDA runtime image, not from ldd):
#   docker build -t tributary:gpu \
#     --build-arg BUILD_IMAGE=nvidia/cuda:13.0.0-devel-ubuntu24.04 \
#     --build-arg RUNTIME_IMAGE=nvidia/cuda:13.0.0-runtime-ubuntu24.04 .
# Without a registry: scripts/build-image.sh (podman, debootstrap).
# Why each choice: deploy/README.md.

ARG BUILD_IMAGE=debian:bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim

# ---------------------------------------------------------------- build ----
FROM ${BUILD_IMAGE} AS build
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ARG JOBS=4
ENV DEBIAN_FRONTEND=noninteractive
WORKDIR /src

# The dependencies first, alone, so that a source change reuses this layer.
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN ./scripts/install-deps.sh && rm -rf /var/lib/apt/lists/*

COPY . .
# Only what the image ships is built: the server and the client (no tests,
# no benchmarks, no engine tools). They are installed by CMake's own rules,
# directory by directory (server/, client/, then the top level's, which is
# the default model alone), so the paths are the ones compiled into the
# model lookup, and a new tool elsewhere does not need building here.
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_INSTALL_PREFIX=/usr/local -DTRIBUTARY_BENCHMARKS=OFF \
 && cmake --build build -j "${JOBS}" --target tributary-server tributary tributary-load \
 && export DESTDIR=/staging \
 && cmake -P build/server/cmake_install.cmake \
 && cmake -P build/client/cmake_install.cmake \
 && cmake -DCMAKE_INSTALL_LOCAL_ONLY=ON -P build/cmake_install.cmake

# The runtime packages, derived from what the two binaries really link: every
# library ldd resolves, mapped to its package by dpkg. On any distribution
# this names exactly the runtime halves of the -dev packages used above.
RUN set -e; \
    for bin in /staging/usr/local/bin/tributary-server /staging/usr/local/bin/tributary; do \
      ldd "$bin"; \
    done | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u > /tmp/libs; \
    while read -r lib; do \
      real=$(readlink -f "$lib"); \
      owner=$(dpkg -S "$lib" 2>/dev/null || dpkg -S "$real" 2>/dev/null \
              || dpkg -S "${real#/usr}" 2>/dev/null) \
        || { echo "no package owns $lib" >&2; exit 1; }; \
      echo "${owner%%:*}"; \
    done < /tmp/libs | sort -u > /staging/runtime-packages; \
    cat /staging/runtime-packages

# -------------------------------------------------------------- runtime ----
FROM ${RUNTIME_IMAGE} AS runtime
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV DEBIAN_FRONTEND=noninteractive

COPY --from=build /staging/runtime-packages /usr/local/share/tributary/runtime-packages
# hadolint ignore=DL3008
RUN apt-get update \
 && xargs -a /usr/local/share/tributary/runtime-packages \
      apt-get install -y --no-install-recommends passwd \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 10001 tributary \
 && useradd --uid 10001 --gid tributary --no-create-home --no-log-init \
      --home-dir /nonexistent --shell /usr/sbin/nologin tributary

COPY --from=build /staging/usr/local/bin/tributary-server /staging/usr/local/bin/tributary /usr/local/bin/
COPY --from=build /staging/usr/local/share/tributary/models /usr/local/share/tributary/models

# Fail the build, not the first pod, when a shared library is missing.
RUN ! ldd /usr/local/bin/tributary-server /usr/local/bin/tributary | grep 'not found' \
 && tributary-server --help > /dev/null

# Numeric, so that Kubernetes' runAsNonRoot can verify it.
USER 10001:10001
EXPOSE 50051 50052 9464 8000

# The plaintext health-only port: it answers even when the API port needs TLS
# or a token. start-period covers loading the model.
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
  CMD ["tributary", "health", "--target", "127.0.0.1:50052", "--timeout", "4"]

# All interfaces: in a container, localhost is unreachable from outside.
# Further flags (`--model /models/x`, `--drain-grace 20`) are appended by
# `docker run IMAGE ...` or the pod's args.
ENTRYPOINT ["tributary-server", "--host", "0.0.0.0"]
