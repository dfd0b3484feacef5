# mamfs: `make demo` runs the demo on real files, `make test` builds and runs every test.
SHELL := /bin/bash
SWIFT ?= $(shell command -v swift 2>/dev/null || echo /opt/swift/usr/bin/swift)
# Extra SwiftPM flags, e.g. SWIFTPM_FLAGS="--scratch-path /tmp/build".
SWIFTPM_FLAGS ?=
APT_PACKAGES := libfuse3-dev fuse3 libssl-dev libsqlite3-dev sqlite3 attr rsync git python3-cryptography

.PHONY: deps build demo test

# Installs only what is missing; runs apt-get update only when something is.
deps:
	@missing=""; \
	for package in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$package 2>/dev/null | grep -q "install ok installed" || \
	    missing="$$missing $$package"; \
	done; \
	if [ -n "$$missing" ]; then \
	  sudo=""; [ "$$(id -u)" -eq 0 ] || sudo="sudo"; \
	  echo "make deps: installing$$missing"; \
	  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q && \
	  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
	fi
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
