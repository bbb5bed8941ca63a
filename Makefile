# Quick start: `make serve` (set up, build, run the server), `make test` (set up, build, run every test).
BUILD      ?= build
BUILD_ASAN ?= build-asan
BUILD_TSAN ?= build-tsan
JOBS       ?= $(shell nproc)
UVLLM_SHARED ?= ../shared
SERVE_ARGS ?= --model $(UVLLM_SHARED)/models/aidreams260K.gguf --port 8080
CMAKE_ARGS ?=
# make soak: N clients on the CPU backend for a set time (tests/soak/soak.py --help)
SOAK_CLIENTS ?= 64
SOAK_SECONDS ?= 600
SOAK_MODEL   ?= $(UVLLM_SHARED)/models/mini-q4_0.gguf
SOAK_ARGS    ?=
# make image: the CPU image (docker/Dockerfile) with the default model baked in
IMAGE        ?= uvllm:latest
DOCKER       ?= docker

.PHONY: all deps build serve test test-arm64 test-unit test-timing-load test-asan test-tsan test-hostile soak \
	fuzz bench image test-deploy format-check clean
all: build

deps:
	@bash scripts/deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

serve: build
	./$(BUILD)/uvllm serve $(SERVE_ARGS)

# ctest -j: the unit binaries that assert no time and the untimed integration tests share the
# cores, the rest run alone (RUN_SERIAL; CMakeLists.txt). Labels: unit, integration, timing
# (asserts a time, rate or load: Release only), deploy (make test-deploy).
test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE deploy

# The aarch64 cross build under qemu-user (no ARM hardware): the kernel tests under three
# CPU models (NEON, dotprod, i8mm), every shared golden, `serve` answering a chat request
# (tests/arm64/run.sh; its own packages and sysroot via scripts/deps.sh --arm64).
test-arm64:
	bash tests/arm64/run.sh build-arm64

test-unit: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -L unit

# The timing tests TIMING_RUNS times each on a host loaded by two busy loops (issue 24's
# must-show; minutes). TIMING_BUILD=build-tsan for the ThreadSanitizer build.
TIMING_RUNS  ?= 20
TIMING_BUILD ?= $(BUILD)
test-timing-load:
	bash tests/timing/under_load.sh $(TIMING_BUILD) $(TIMING_RUNS)

# ASan + UBSan over the unit tests and the integration tests that exercise threads or input
# handling (never a timing test; CMakeLists.txt), compiled at -O1 like the TSan build. The sanitizer and fuzz builds leave out
# the CUDA backend (UVLLM_CUDA=OFF): nvcc's device code is not instrumented and is compiled
# by `make build`; the host twins (unit_gpu_twin) and the worker's simulated-device test
# (unit_engine) are plain C and still run here.
test-asan: deps
	@cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=Debug -DUVLLM_SANITIZE=ON -DUVLLM_CUDA=OFF $(CMAKE_ARGS) >/dev/null
	@cmake --build $(BUILD_ASAN) -j $(JOBS)
	cd $(BUILD_ASAN) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j $(JOBS)

# The unit tests and the integration tests that exercise threads or input handling (never a
# timing test) under ThreadSanitizer, the racy self-tests and a short load on the TSan server
# (CMakeLists.txt, UVLLM_TSAN); any report fails the run.
test-tsan: deps
	@cmake -S . -B $(BUILD_TSAN) -DCMAKE_BUILD_TYPE=Debug -DUVLLM_TSAN=ON -DUVLLM_CUDA=OFF $(CMAKE_ARGS) >/dev/null
	@cmake --build $(BUILD_TSAN) -j $(JOBS)
	cd $(BUILD_TSAN) && ctest --output-on-failure -j $(JOBS)

# 64 connections of each hostile kind (trailer floods, slow bodies, unread answers, huge
# tokenize, slot hogs) for 60 s beside 16 honest streams: RSS within the memory budget,
# /health p99, honest inter-token p99 against a run without attackers, every KV page free
# (tests/hostile/run.sh; writes bench/RESULTS.md "hostile").
test-hostile: build
	bash tests/hostile/run.sh

soak: build
	UVLLM_BIN=$(BUILD)/uvllm python3 tests/soak/soak.py --model $(SOAK_MODEL) \
	    --clients $(SOAK_CLIENTS) --duration $(SOAK_SECONDS) $(SOAK_ARGS)

fuzz: deps
	@CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DUVLLM_FUZZ=ON -DUVLLM_TESTS=OFF -DUVLLM_WERROR=OFF -DUVLLM_CUDA=OFF >/dev/null
	@cmake --build build-fuzz -j $(JOBS) --target fuzzers
	bash tests/fuzz/run.sh build-fuzz

bench: build
	@bash scripts/deps.sh --bench
	bash bench/run.sh

# Needs a docker daemon (DOCKER_HOST) that has debian:bookworm-slim; tests/deploy/run.sh makes both.
image:
	@mkdir -p docker/models
	@install -m 0644 $(UVLLM_SHARED)/models/aidreams260K.gguf docker/models/aidreams260K.gguf
	$(DOCKER) build --network host -f docker/Dockerfile -t $(IMAGE) .

# The image, nginx and the compose stack under private docker daemons, the Kubernetes manifests
# (tests/deploy/run.sh; root, a few minutes), and prefix-affinity routing behind the host's nginx
# (tests/deploy/affinity_test.py).
test-deploy:
	@bash scripts/deps.sh --deploy
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS) >/dev/null
	cd $(BUILD) && ctest --output-on-failure -L deploy

format-check:
	@git ls-files 'src/*.[ch]' 'include/*.h' 'tests/*.[ch]' 'bench/*.c' | xargs clang-format --dry-run --Werror

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) $(BUILD_TSAN) build-fuzz
