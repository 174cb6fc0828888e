# Compiler flags for our own targets. Third-party headers are included as
# SYSTEM so that -Werror applies to our code only.

add_library(tributary_warnings INTERFACE)
target_compile_options(tributary_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Werror>)

if(TRIBUTARY_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()

# ThreadSanitizer (`make test-tsan`): the tests whose code runs on more than
# one thread (the engine loop and its inbox, the thread pool, the server and
# its streams). It cannot be combined with AddressSanitizer.
if(TRIBUTARY_SANITIZE_THREAD)
  if(TRIBUTARY_SANITIZE)
    message(FATAL_ERROR "TRIBUTARY_SANITIZE and TRIBUTARY_SANITIZE_THREAD "
                        "cannot be combined (ASan and TSan exclude each other)")
  endif()
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
endif()

# Under either sanitizer the whole-model runs on the CPU emulation of CUDA
# take minutes; they stay out of those builds.
if(TRIBUTARY_SANITIZE OR TRIBUTARY_SANITIZE_THREAD)
  set(TRIBUTARY_ANY_SANITIZER ON)
else()
  set(TRIBUTARY_ANY_SANITIZER OFF)
endif()

# The kernel tests on the CPU emulation of CUDA (cuda_backend_emulated_test)
# also run under the sanitizers on x86-64, where the emulation's own stack
# switch tells AddressSanitizer which fiber's stack runs (elsewhere it
# switches with ucontext, which ASan does not follow): ASan then checks the
# kernels' device memory, which is host memory, as any other (about 50 s).
# The decoder and engine tests on the emulation take minutes under ASan and
# stay out of that build.
# ThreadSanitizer does not follow the emulation's fibers (each CUDA thread runs
# on its own stack, switched by hand), so none of the emulated tests runs there.
if(TRIBUTARY_SANITIZE_THREAD)
  set(TRIBUTARY_EMULATED_KERNEL_TESTS OFF)
elseif(NOT TRIBUTARY_SANITIZE OR CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  set(TRIBUTARY_EMULATED_KERNEL_TESTS ON)
else()
  set(TRIBUTARY_EMULATED_KERNEL_TESTS OFF)
endif()

# tributary_add_tool(NAME SOURCES... LIBS ...): a command-line tool.
function(tributary_add_executable name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE tributary_warnings ${ARG_LIBS})
endfunction()

# tributary_add_test(NAME SOURCES... LIBS... [LABELS ...]): a GoogleTest
# binary registered with CTest (label `unit` unless given). Tests find the
# shared test data and the source tree through these definitions; a test that
# cannot find ../shared fails with a clear message.
function(tributary_add_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE tributary_warnings ${ARG_LIBS}
                        GTest::gtest GTest::gtest_main GTest::gmock)
  target_compile_definitions(${name} PRIVATE
    TRIBUTARY_SHARED_DIR="${TRIBUTARY_SHARED_DIR}"
    TRIBUTARY_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}")
endfunction()

# The virtual environments of the Python test tools (the deployment checks'
# PyPI tools, the openai SDK), shared by every build folder: one per
# requirements file content, under TRIBUTARY_VENV_DIR (default: .venvs next
# to the build folder, i.e. in the source tree for build/, build-asan/ and
# build-tsan/), so that a Release and a sanitizer build make each one once.
# tributary_tools_venv(OUT NAME REQUIREMENTS): OUT = that venv's folder.
set(TRIBUTARY_VENV_DIR "${CMAKE_BINARY_DIR}/../.venvs" CACHE PATH
    "Where the Python test tools' virtual environments are kept")
function(tributary_tools_venv out name requirements)
  file(SHA256 ${requirements} hash)
  string(SUBSTRING ${hash} 0 16 hash)
  get_filename_component(dir "${TRIBUTARY_VENV_DIR}" ABSOLUTE)
  set(${out} "${dir}/${name}-${hash}" PARENT_SCOPE)
endfunction()
