# The two README commands live here. Each does all of its own set-up.
#   make test   install dependencies, build (Release), run every test, then
#               build every test again under AddressSanitizer + UBSan and run
#               it, then the multi-threaded tests under ThreadSanitizer; every
#               stage runs, and a summary of each comes last
#   make build  install dependencies and build (Release)
#   make run    install dependencies, build, and start tributary-server on
#               the embedded default model (ARGS="--flag value" adds flags)

BUILD_DIR ?= build
ASAN_DIR ?= build-asan
TSAN_DIR ?= build-tsan
JOBS ?= $(shell nproc)

.PHONY: deps build run test test-release test-asan test-tsan clean

deps:
	./scripts/install-deps.sh

build: deps
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD_DIR) -j $(JOBS)

run: build
	$(BUILD_DIR)/server/tributary-server $(ARGS)

test-release: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS)

# Every test under AddressSanitizer + UBSan with leak detection (the
# malformed-file catalog, the fuzz regression corpus, the tokenizer vectors,
# the kernels and the decoders); benchmarks are not built, nor the CUDA
# backend (nvcc's host compiler is not the sanitizing clang, and without a
# GPU its tests skip anyway; the Release build compiles it).
test-asan: deps
	cmake -S . -B $(ASAN_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
	  -DTRIBUTARY_SANITIZE=ON -DTRIBUTARY_BENCHMARKS=OFF -DTRIBUTARY_CUDA=OFF
	cmake --build $(ASAN_DIR) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1 ctest --test-dir $(ASAN_DIR) --output-on-failure -j $(JOBS)

# The multi-threaded tests again under ThreadSanitizer (tests/CMakeLists.txt
# says which, why not the gRPC ones, and the TSAN_OPTIONS they run with).
test-tsan: deps
	cmake -S . -B $(TSAN_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
	  -DTRIBUTARY_SANITIZE_THREAD=ON -DTRIBUTARY_BENCHMARKS=OFF -DTRIBUTARY_CUDA=OFF
	cmake --build $(TSAN_DIR) -j $(JOBS) --target tsan_tests
	ctest --test-dir $(TSAN_DIR) --output-on-failure -j $(JOBS) -L tsan

# Every stage runs even when one fails; a summary with each stage's result
# and time comes last, and the exit status is non-zero when any failed.
test: deps
	@./scripts/run-stages.sh $(MAKE) test-release test-asan test-tsan

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR) $(TSAN_DIR)
