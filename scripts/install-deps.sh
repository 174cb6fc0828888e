#!/usr/bin/env bash
# Installs, with apt-get, every Debian 12 package that building and testing
# Tributary needs. Idempotent: does nothing (and needs no network) when all
# packages are already present. The CUDA toolkit is not installed here: it is
# optional and detected by CMake when present.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  # RPC and metrics (server/, client/, proto/)
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev prometheus-cpp-dev
  # the OpenAI-compatible HTTP API: Boost.Asio and Boost.Beast (headers),
  # TLS on OpenSSL, request bodies decoded with zlib and brotli
  libboost-dev libssl-dev zlib1g-dev libbrotli-dev
  # civetweb: prometheus-cpp's exposer runs on it (its CMake package looks
  # for it), so it stays although the HTTP API no longer uses it
  libcivetweb-dev
  # tests and benchmarks: the independent Python gRPC client, promtool
  # (checks the /metrics exposition), curl
  libgtest-dev libgmock-dev libbenchmark-dev
  python3-grpcio python3-protobuf prometheus curl openssl
  # engine leaf libraries: JSON, Unicode, regex, BLAS
  nlohmann-json3-dev libutf8proc-dev libpcre2-dev libopenblas-dev
  # sanitizers and libFuzzer
  clang libclang-rt-14-dev
  # deployment checks (tests/deploy) and the openai SDK test
  # (tests/server): virtual environments for the pinned PyPI packages
  # (prometheus above gives promtool and the end-to-end server)
  python3-venv
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
