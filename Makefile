# Convenience wrapper around CMake. The README's two commands:
#   make run    build, then run the main job (etch run on a fixture program)
#   make test   build, then run the whole test suite
BUILD ?= build
FIXTURES ?= ../shared/fixtures
JOBS ?= 2

.PHONY: all build run test asan fuzz clean

all: build

build:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD) -j$(JOBS)

run: build
	./$(BUILD)/etch run $(FIXTURES)/pte/add_constant_segment.pte --print-output

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

# The test suite under AddressSanitizer + UndefinedBehaviorSanitizer.
asan:
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DETCH_SANITIZE=ON
	cmake --build build-asan -j$(JOBS)
	ctest --test-dir build-asan --output-on-failure -j$(JOBS)

fuzz:
	bash fuzz/run_fuzz.sh 120

clean:
	rm -rf $(BUILD) build-asan
