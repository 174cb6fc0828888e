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
# The OpenAI-compatible HTTP API (server/http_server.h): cpp-httplib with
# TLS on OpenSSL. Debian builds it as a shared library; its pkg-config file
# carries the CPPHTTPLIB_*_SUPPORT definitions that the library was built
# with (they change its classes' layout, so they must match).
pkg_check_modules(CPPHTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
find_package(OpenSSL REQUIRED)
find_program(TRIBUTARY_GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)
