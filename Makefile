# Convenience entry points over the CMake build. `make demo` and `make test` are the README's quick start.
BUILD ?= build
JOBS  ?= $(shell nproc)

.PHONY: all deps build test demo clean

all: build

deps:
	@bash scripts/install_deps.sh

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

# The whole test suite (ctest prints the closing "N tests passed, N failed" summary).
test: build
	ctest --test-dir $(BUILD) --output-on-failure

# Prepare the default corpus, train the tiny model on it on the CPU, then sample from it.
demo: build
	bash scripts/demo.sh $(BUILD)/packmamba

clean:
	rm -rf $(BUILD)
