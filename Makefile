# rocelab — two commands do all set-up on a fresh Debian 12 machine (as root):
#   make demo   install what is missing, build, run the demo
#   make test   install what is missing, build, run the test suite (plain, then ASan+UBSan, then
#               20 seconds of each fuzzer, two at a time)
# Other targets: build, build-asan, bench, interop, fuzz, clean.

DEB_PACKAGES := build-essential cmake ninja-build pkg-config libboost-dev libpcap-dev \
                libprotobuf-dev protobuf-compiler libcli11-dev libgtest-dev \
                tshark python3-scapy libibverbs-dev librdmacm-dev ibverbs-utils perftest rdmacm-utils \
                iproute2 iperf3 sockperf graphviz chromium libbenchmark-dev clang-14 libclang-rt-14-dev \
                libisal-dev nlohmann-json3-dev ucx-utils libfabric-bin \
                openmpi-bin libopenmpi-dev nftables
JOBS  ?= $(shell nproc)
CTEST_ARGS ?=

# Fuzzing (docs/security.md): every target runs FUZZ_SECONDS (make fuzz) or
# FUZZ_SMOKE_SECONDS (the smoke run that `make test` includes), JOBS at a time,
# from its seeds and its kept corpus (tests/fuzz/kept). Nightly:
# make fuzz FUZZ_SECONDS=3600.
FUZZ_SECONDS ?= 60
FUZZ_SMOKE_SECONDS ?= 20

.PHONY: all deps build build-asan build-fuzz test test-plain test-asan fuzz fuzz-smoke demo bench interop clean

all: build

# Install only the Debian packages that are missing; quick when all are present.
deps:
	@missing=$$(for p in $(DEB_PACKAGES); do \
	    dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing missing Debian packages:" $$missing; \
	  if [ "$$(id -u)" != 0 ]; then echo "error: need root to apt-get install:" $$missing >&2; exit 1; fi; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

build: deps
	cmake -S . -B build -G Ninja -DROCELAB_WERROR=ON >/dev/null
	cmake --build build -j $(JOBS)

build-asan: deps
	cmake -S . -B build-asan -G Ninja -DROCELAB_WERROR=ON -DROCELAB_SANITIZE=ON \
	      -DCMAKE_BUILD_TYPE=Debug >/dev/null
	cmake --build build-asan -j $(JOBS)

test-plain: build
	cd build && ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

# Tests that run unmodified foreign binaries under our preload are labelled
# "noasan": a sanitized shim cannot be preloaded into an unsanitized program.
test-asan: build-asan
	cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j $(JOBS) -LE noasan $(CTEST_ARGS)

# The fuzz targets with libFuzzer, ASan and UBSan (clang; tests/fuzz).
build-fuzz: deps
	cmake -S . -B build-fuzz -G Ninja -DROCELAB_WERROR=ON -DROCELAB_FUZZ=ON \
	      -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 >/dev/null
	cmake --build build-fuzz -j $(JOBS) --target fuzzers

fuzz: build-fuzz
	bash tests/fuzz/run.sh -j $(JOBS) build-fuzz $(FUZZ_SECONDS)

# 20 s per target, two at a time: every known finding at once (the kept
# corpora), and what a 20-second run finds from them.
fuzz-smoke: build-fuzz
	bash tests/fuzz/run.sh -j $(JOBS) build-fuzz $(FUZZ_SMOKE_SECONDS)

# Tests labelled "external" read ../shared (real NICs' captures, Linux's QP
# table), which a user's clone does not have: there they are skipped, by name.
test: test-plain test-asan fuzz-smoke
	@[ -d ../shared ] || echo "note: ../shared is absent: the tests labelled 'external' were skipped (listed above as Skipped)"

demo: build
	bash tools/demo.sh

# BENCH_ARGS="--runs 3 write_bw": fewer runs, one pair (bench/run.sh --help).
bench: build
	bash bench/run.sh $(BENCH_ARGS)

# rocelab against the kernel's Soft-RoCE in a qemu guest (../shared/tools/rxe-qemu);
# minutes per run, so not part of `make test`. ROWS="rc ud" picks rows.
interop: build
	bash tools/interop.sh $(ROWS)

clean:
	rm -rf build build-asan build-fuzz
