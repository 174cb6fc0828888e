#!/usr/bin/env bash
# The device check of the CUDA backend, in two halves:
#
#   bench/device_check.sh prepare [BUILD_DIR]
#       Here (Debian 12 with the CUDA toolkit, no GPU needed): builds the gpu
#       tests and tributary-gpu-bench, and copies them with the shared
#       libraries the device image lacks (from ldd: Abseil and the like;
#       glibc and libstdc++ are the image's, the CUDA runtime is linked in,
#       cuBLAS and cuBLASLt are the image's, loaded at run time) into
#       .device-carry/, which git ignores.
#
#   bench/device_check.sh run
#       On the device machine, through the device tool:
#         run(command="bash bench/device_check.sh run", carry=[".device-carry"],
#             timeout_s=420)
#       Runs the gpu tests, then tributary-gpu-bench (the device's copy
#       bandwidth and bf16 matmul rate, and the synthetic 27B model's prefill
#       and decode at batch 1, 8, 32 and 64 against them, each beside the
#       straightforward kernels), writes logs to $OUT and prints
#       one table last. Every stage has its own timeout (40 + 90 + 20 + 150
#       s: at most 5 minutes in all); a stage that fails, times out or skips its tests
#       (no device seen) makes the script exit 1.
#
# The binaries have the source tree's path baked in (the tests read the
# fixtures from it); `run` links that path to the checkout it runs in.
set -u -o pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
carry="$here/.device-carry"

prepare() {
  local build="${1:-$here/build-cuda}"
  cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DTRIBUTARY_CUDA=ON || exit 1
  cmake --build "$build" --target cuda_backend_test cuda_decoder_test \
      cuda_sticky_error_test tributary-gpu-bench tributary-run || exit 1
  rm -rf "$carry"
  mkdir -p "$carry/bin" "$carry/lib"
  local bins=("$build/tests/engine/backend/cuda_backend_test"
              "$build/tests/engine/decoder/cuda_decoder_test"
              "$build/tests/engine/decoder/cuda_sticky_error_test"
              "$build/bench/cuda/tributary-gpu-bench"
              "$build/engine/cli/tributary-run")
  cp "${bins[@]}" "$carry/bin/"
  # Libraries the binaries need beyond the C runtime and CUDA's own.
  ldd "${bins[@]}" | awk '/=> \//{print $3}' | sort -u |
    grep -Ev '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|ld-linux[^/]*|libcuda|libcudart|libcublas|libcublasLt)\.so' |
    while read -r lib; do cp -L "$lib" "$carry/lib/"; done
  echo "$here" > "$carry/source_dir"  # baked into the tests
  grep -q '^/.device-carry/' "$here/.gitignore" 2>/dev/null ||
    echo "device_check: add /.device-carry/ to .gitignore" >&2
  du -sh "$carry"
}

run() {
  local out="${OUT:-/tmp/device-check}"
  mkdir -p "$out"
  local summary="$out/summary.txt"
  : > "$summary"
  note() { echo "$*" | tee -a "$summary"; }
  [[ -d "$carry/bin" ]] || { echo "no $carry: run 'prepare' here first"; exit 1; }
  # The fixtures are read through the source path baked in at build time.
  local baked
  baked="$(cat "$carry/source_dir" 2>/dev/null)"
  if [[ -n "$baked" && "$baked" != "$here" && ! -e "$baked" ]]; then
    mkdir -p "$(dirname "$baked")" && ln -s "$here" "$baked"
  fi
  export LD_LIBRARY_PATH="$carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # cuBLAS, which the backend loads with dlopen (the runtime is linked in
  # statically): the image's toolkit, else the pip wheel PyTorch brings.
  if ! ldconfig -p | grep -q libcublas.so.13; then
    local dir
    for dir in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
               $(ls -d /opt/*/.venv/lib/python3*/site-packages/nvidia/cu*/lib 2>/dev/null); do
      if ls "$dir"/libcublas.so.13* >/dev/null 2>&1; then
        export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$dir"
      fi
    done
  fi
  if command -v nvidia-smi > /dev/null; then
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem \
      --format=csv > "$out/nvidia-smi.csv" 2>&1
    note "device: $(tail -1 "$out/nvidia-smi.csv")"
  else
    note "device: no nvidia-smi on this machine"
  fi
  # A binary that does not start says why (a missing library, usually).
  if ! ldd "$carry/bin/tributary-gpu-bench" > "$out/ldd.txt" 2>&1 ||
     grep -q "not found" "$out/ldd.txt"; then
    note "carried binaries miss libraries (see ldd.txt):"
    grep "not found" "$out/ldd.txt" | tee -a "$summary"
  fi

  local status=0
  stage() {  # stage NAME SECONDS COMMAND...
    local name="$1" seconds="$2"
    shift 2
    local start=$SECONDS
    timeout "$seconds" "$@" > "$out/$name.log" 2>&1
    local rc=$?
    local result="passed"
    if [[ $rc -eq 124 ]]; then result="TIMED OUT after ${seconds}s"; status=1
    elif [[ $rc -ne 0 ]]; then result="FAILED (exit $rc)"; status=1
    elif grep -qE "no CUDA device|no cuBLAS on this machine" "$out/$name.log"; then
      # On the device machine a gpu test that skips for want of a device or
      # of cuBLAS means the binary could not use them (a driver/runtime
      # mismatch, a library not found): not a pass. Other skips are by
      # design (a straightforward-kernel case that cuBLAS cannot promise,
      # the no-device report on a machine that has one).
      result="SKIPPED: no device seen"; status=1
    fi
    note "$(printf '%-22s %-24s %4ds' "$name" "$result" $((SECONDS - start)))"
    [[ $rc -ne 0 ]] && tail -5 "$out/$name.log" | sed 's/^/    /' | tee -a "$summary"
    return 0
  }
  # The counts of a gtest log, its seed, and each failed test (a skip on the
  # device machine means the binary found no device: say so).
  tests_summary() {
    local log="$out/$1.log"
    grep -hE "^cuda_backend_test seed|^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ tests?|^\[  FAILED  \] [A-Za-z]" "$log" |
      sed 's/^/    /' | tee -a "$summary"
  }
  stage cuda_backend_test 40 "$carry/bin/cuda_backend_test"
  tests_summary cuda_backend_test
  stage cuda_decoder_test 90 "$carry/bin/cuda_decoder_test"
  tests_summary cuda_decoder_test
  stage cuda_sticky_error_test 20 "$carry/bin/cuda_sticky_error_test"
  tests_summary cuda_sticky_error_test
  stage gpu_bench 150 "$carry/bin/tributary-gpu-bench" --preset qwen3.5-27b \
      --prefill-tokens 8192 --context 1024 --batches 1,8,32,64 --steps 10 \
      --json "$out/gpu_bench.json"
  echo
  echo "=== device check (logs in \$OUT) ==="
  cat "$summary"
  sed -n '/^ceilings:/,$p' "$out/gpu_bench.log"
  return $status
}

case "${1:-}" in
  prepare) shift; prepare "$@" ;;
  run) run ;;
  *) echo "usage: $0 prepare [BUILD_DIR] | run" >&2; exit 2 ;;
esac
