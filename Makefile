# Convenience wrapper around CMake. The README's two commands:
#   make run    build the etch CLI and libetch.so, then run the main job: the default language
#               model (models/default, committed) writes a short story; needs no Python or torch
#   make test   build with the tests (-DETCH_BUILD_TESTS=ON), then run the whole test suite
#               (on a fresh Debian 12 machine, first tools/setup-debian.sh: the README says so)
# and
#   make build                  the library (static + shared) and CLI; no Python
#   make install [PREFIX=/usr/local] [DESTDIR=...]   build, then cmake --install
BUILD ?= build
FIXTURES ?= ../shared/fixtures
JOBS ?= 2
PREFIX ?= /usr/local

.PHONY: all build run test asan tsan fuzz install clean

all: build

build:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD) -j$(JOBS)

# The shared library too: the Python exporter's operator check loads libetch.so.
run:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD) -j$(JOBS) --target etch etch_shared
	$(BUILD)/etch llm --model models/default/model.pte --tokenizer models/default/tokenizer.model --prompt "Once upon a time" --max-new-tokens 200 --temperature 0.7 --top-p 0.9 --seed 42

test:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DETCH_BUILD_TESTS=ON
	cmake --build $(BUILD) -j$(JOBS)
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

# The test suite under AddressSanitizer + UndefinedBehaviorSanitizer.
asan:
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DETCH_SANITIZE=ON -DETCH_BUILD_TESTS=ON
	cmake --build build-asan -j$(JOBS)
	ctest --test-dir build-asan --output-on-failure -j$(JOBS)

# The threaded tests (background jobs, the thread pool) under ThreadSanitizer.
TSAN_TARGETS = test_async test_shared_program test_threadpool
tsan:
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DETCH_TSAN=ON -DETCH_BUILD_TESTS=ON
	cmake --build build-tsan -j$(JOBS) --target $(TSAN_TARGETS)
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
	  ctest --test-dir build-tsan --output-on-failure -j$(JOBS) -R '^(async|threadpool)\.'

fuzz:
	bash fuzz/run_fuzz.sh 120

# Headers, libetch.a, libetch.so.0, the CLI, etch.pc and the CMake package under PREFIX
# (DESTDIR, when given, is put in front of every installed path, as for staged packaging).
install: build
	DESTDIR="$(DESTDIR)" cmake --install $(BUILD) --prefix "$(PREFIX)"

clean:
	rm -rf $(BUILD) build-asan build-tsan
