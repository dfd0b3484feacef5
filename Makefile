# mamfs: `make demo` runs the demo on real files, `make test` builds and runs every test.
SHELL := /bin/bash
SWIFT ?= $(shell command -v swift 2>/dev/null || echo /opt/swift/usr/bin/swift)
# Extra SwiftPM flags, e.g. SWIFTPM_FLAGS="--scratch-path /tmp/build".
SWIFTPM_FLAGS ?=
APT_PACKAGES := libfuse3-dev fuse3 libssl-dev libsqlite3-dev sqlite3 attr rsync git python3-cryptography

.PHONY: deps build demo test

# Installs only what is missing; runs apt-get update only when something is.
deps:
	@Tools/install-missing-packages.sh "make deps" $(APT_PACKAGES)
	@python3 -c 'import cryptography' 2>/dev/null || \
	  python3 -m pip install -q cryptography || \
	  python3 -m pip install -q --break-system-packages cryptography

build:
	$(SWIFT) build -c release $(SWIFTPM_FLAGS)

demo: deps build
	Tools/demo.sh "$$($(SWIFT) build -c release $(SWIFTPM_FLAGS) --show-bin-path)/mamfs"

test: deps
	$(SWIFT) build $(SWIFTPM_FLAGS)
	MAMFS_BIN="$$($(SWIFT) build $(SWIFTPM_FLAGS) --show-bin-path)/mamfs" $(SWIFT) test $(SWIFTPM_FLAGS)

# Long robustness runs (Tests/RobustnessTests with MAMFS_SOAK=1): millions of fsdiff operations
# (FSDIFF_SEEDS x FSDIFF_OPS per mount kind), CRASH_ROUNDS crash rounds, FUZZ_SECONDS of libFuzzer,
# CONCURRENCY_SCALE iterations; each knob can be set in the environment.
.PHONY: soak
soak: deps
	$(SWIFT) build $(SWIFTPM_FLAGS)
	MAMFS_SOAK=1 MAMFS_BIN="$$($(SWIFT) build $(SWIFTPM_FLAGS) --show-bin-path)/mamfs" \
	  $(SWIFT) test $(SWIFTPM_FLAGS) --filter '^RobustnessTests\.'

# Benchmarks (docs/PERFORMANCE.md): mamfs against raw, bindfs, gocryptfs and securefs in
# one run; needs root. BENCH_FLAGS="--quick" for a short run, "--only mamfs-enc" for one mount.
BENCH_PACKAGES := gocryptfs securefs bindfs fio
BENCH_FLAGS ?=
.PHONY: bench
bench: deps
	@Tools/install-missing-packages.sh "make bench" $(BENCH_PACKAGES)
	@python3 -c 'import matplotlib' 2>/dev/null || \
	  python3 -m pip install -q matplotlib || \
	  python3 -m pip install -q --break-system-packages matplotlib
	$(SWIFT) build -c release $(SWIFTPM_FLAGS) --product mamfs
	sudo=""; [ "$$(id -u)" -eq 0 ] || sudo="sudo"; \
	$$sudo python3 Tools/bench/run.py --mamfs "$$($(SWIFT) build -c release $(SWIFTPM_FLAGS) --show-bin-path)/mamfs" $(BENCH_FLAGS)
