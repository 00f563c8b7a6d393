# Convenience wrapper around CMake. The README's two commands:
#   make run    build the etch CLI, then run the main job: the default language model
#               (models/default, committed) writes a short story; needs no torch
#   make test   build, then run the whole test suite
BUILD ?= build
FIXTURES ?= ../shared/fixtures
JOBS ?= 2

.PHONY: all build run test asan fuzz clean

all: build

build:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD) -j$(JOBS)

run:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD) -j$(JOBS) --target etch
	./$(BUILD)/etch llm --model models/default/model.pte --tokenizer models/default/tokenizer.model --prompt "Once upon a time" --max-new-tokens 200 --temperature 0.7 --top-p 0.9 --seed 42

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
