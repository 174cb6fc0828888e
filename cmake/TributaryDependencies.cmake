# Third-party dependencies, all from Debian 12 packages
# (scripts/install-deps.sh installs them). Why each was chosen: README.md.

find_package(absl REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
find_package(Threads REQUIRED)
find_package(GTest REQUIRED)
if(TRIBUTARY_BENCHMARKS)
  find_package(benchmark REQUIRED)
endif()

# The CUDA toolkit is optional: detected when present, never required. With
# it, the CUDA backend (engine/backend/cuda) is built for Hopper (sm_90); its
# tests carry the label `gpu` and skip on machines without a device.
option(TRIBUTARY_CUDA "Build the CUDA backend when the toolkit is found" ON)
set(TRIBUTARY_HAVE_CUDA OFF)
if(TRIBUTARY_CUDA)
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(TRIBUTARY_HAVE_CUDA ON)
  endif()
endif()
message(STATUS "Tributary: CUDA backend ${TRIBUTARY_HAVE_CUDA}")

# The service (proto/, server/, client/): gRPC, Protocol Buffers and
# prometheus-cpp. The engine never links these (design.md §1).
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)
find_package(prometheus-cpp CONFIG REQUIRED)
# The OpenAI-compatible HTTP API (server/http_listener.h): an event-driven
# listener on Boost.Asio with Boost.Beast's request parser (header-only,
# Debian's libboost-dev), TLS on OpenSSL, request bodies decoded with zlib
# and brotli.
find_package(Boost 1.74 REQUIRED)
find_package(OpenSSL REQUIRED)
find_package(ZLIB REQUIRED)
pkg_check_modules(BROTLIDEC REQUIRED IMPORTED_TARGET libbrotlidec)
pkg_check_modules(BROTLIENC REQUIRED IMPORTED_TARGET libbrotlienc)  # tests
find_program(TRIBUTARY_GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)
