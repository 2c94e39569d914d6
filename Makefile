# Convenience entry points over the CMake build. `make demo` and `make test` are the README's quick start.
BUILD ?= build
JOBS  ?= $(shell nproc)

.PHONY: all deps build test test-sanitize demo clean

all: build

deps:
	@bash scripts/install_deps.sh

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

# The whole test suite (ctest prints the closing "N tests passed, N failed" summary).
test: build
	ctest --test-dir $(BUILD) --output-on-failure

# The suite again in a CPU-only build under AddressSanitizer and UndefinedBehaviorSanitizer, leaks included: memory
# errors and undefined behaviour wherever the tests reach, the packmamba runs they start among it (CI runs it).
SAN_BUILD ?= build-sanitize
SAN = -fsanitize=address,undefined
test-sanitize: deps
	cmake -S . -B $(SAN_BUILD) -DPM_CUDA=OFF -DCMAKE_BUILD_TYPE=Sanitize \
	  -DCMAKE_C_FLAGS="-O1 -g $(SAN) -fno-sanitize-recover=undefined -fno-omit-frame-pointer" \
	  -DCMAKE_EXE_LINKER_FLAGS="$(SAN)" -DCMAKE_SHARED_LINKER_FLAGS="$(SAN)" >/dev/null
	cmake --build $(SAN_BUILD) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1 ctest --test-dir $(SAN_BUILD) --output-on-failure

# Prepare the default corpus, train the tiny model on it on the CPU, then sample from it.
demo: build
	bash scripts/demo.sh $(BUILD)/packmamba

clean:
	rm -rf $(BUILD)
