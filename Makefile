# The two README commands live here. Each does all of its own set-up.
#   make test   install dependencies, build (Release), run every test, then the
#               sanitizer build of the loader and tokenizer tests
#   make build  install dependencies and build (Release)

BUILD_DIR ?= build
ASAN_DIR ?= build-asan
JOBS ?= $(shell nproc)

.PHONY: deps build test test-release test-asan clean

deps:
	./scripts/install-deps.sh

build: deps
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD_DIR) -j $(JOBS)

test-release: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS)

# The loader and tokenizer under AddressSanitizer + UBSan (malformed-file
# catalog, fuzz regression corpus, tokenizer vectors).
test-asan: deps
	cmake -S . -B $(ASAN_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
	  -DTRIBUTARY_SANITIZE=ON -DTRIBUTARY_TESTS_ONLY_BASE=ON
	cmake --build $(ASAN_DIR) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1 ctest --test-dir $(ASAN_DIR) --output-on-failure -j $(JOBS)

test: test-release test-asan

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR)
