# mamfs: `make demo` runs the demo on real files, `make test` builds and runs every test,
# `make install` / `make deb` install or package it, `make conformance` runs the POSIX suites.
SHELL := /bin/bash
SWIFT ?= $(shell command -v swift 2>/dev/null || echo /opt/swift/usr/bin/swift)
# Extra SwiftPM flags, e.g. SWIFTPM_FLAGS="--scratch-path /tmp/build".
SWIFTPM_FLAGS ?=
APT_PACKAGES := libfuse3-dev fuse3 libssl-dev libsqlite3-dev sqlite3 attr rsync git python3-cryptography scdoc \
	libcurl4-openssl-dev libxml2-dev apache2 apache2-utils libdbus-1-dev dbus-daemon dbus-bin strace gcc pkg-config

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

# The tests mount and run the binary that ships (build-static: what `make deb`, package-check
# and conformance use), and run as several test processes at once (Tools/test/run-shards.sh
# says why); each shard's log is kept in build/test-logs. `swift test` runs them in one process
# with the debug binary (or MAMFS_BIN), more slowly. The two builds run at once (their own
# scratch paths): a release build leaves a CPU idle for minutes (one optimizer per module,
# modules one after the other), which the debug build of the tests fills; each build's output
# is printed when it ends.
test: deps
	$(MAKE) --no-print-directory -j2 --output-sync=target build-static build-tests
	MAMFS_BIN="$(abspath $(STATIC_BIN))" Tools/test/run-shards.sh \
	  "$$($(SWIFT) build $(SWIFTPM_FLAGS) --show-bin-path)/mamfsPackageTests.xctest" build/test-logs

# The test bundle (debug build), what `make test` runs.
.PHONY: build-tests
build-tests:
	$(SWIFT) build --build-tests $(SWIFTPM_FLAGS)

# Long robustness runs (Tests/RobustnessTests with MAMFS_SOAK=1): millions of fsdiff operations
# (FSDIFF_SEEDS x FSDIFF_OPS per mount kind), CRASH_ROUNDS crash rounds, FUZZ_SECONDS of libFuzzer,
# CONCURRENCY_SCALE iterations; each knob can be set in the environment.
.PHONY: soak
soak: deps
	$(SWIFT) build $(SWIFTPM_FLAGS)
	MAMFS_SOAK=1 MAMFS_BIN="$$($(SWIFT) build $(SWIFTPM_FLAGS) --show-bin-path)/mamfs" \
	  $(SWIFT) test $(SWIFTPM_FLAGS) --filter '^RobustnessTests\.'

# Benchmarks (docs/PERFORMANCE.md): mamfs against raw, ext4 with fscrypt (a loop-mounted
# image), bindfs, gocryptfs, securefs and cryfs in one run; needs root.
# It measures the binary that `make install` installs (the static build, .build/static).
# BENCH_FLAGS="--quick" for a short run, "--only mamfs-enc" for one mount.
BENCH_PACKAGES := gocryptfs securefs cryfs bindfs fio rclone e2fsprogs mount
BENCH_FLAGS ?=
.PHONY: bench
bench: deps build-static
	@Tools/install-missing-packages.sh "make bench" $(BENCH_PACKAGES)
	@python3 -c 'import matplotlib' 2>/dev/null || \
	  python3 -m pip install -q matplotlib || \
	  python3 -m pip install -q --break-system-packages matplotlib
	sudo=""; [ "$$(id -u)" -eq 0 ] || sudo="sudo"; \
	$$sudo python3 Tools/bench/run.py --mamfs "$(STATIC_BIN)" $(BENCH_FLAGS)

# The first sync of /usr/share/doc to a WebDAV server (Apache mod_dav_fs on 127.0.0.1) and back,
# against rclone copy of the same tree to the same server (docs/PERFORMANCE.md); needs root.
# BENCH_WEBDAV_ARGS="TREE ROUNDS" to change them, MAMFS_BENCH_ACCOUNT=unmanaged for plain files.
BENCH_WEBDAV_ARGS ?=
.PHONY: bench-webdav
bench-webdav: deps build-static
	@Tools/install-missing-packages.sh "make bench-webdav" rclone apache2 apache2-utils curl
	sudo=""; [ "$$(id -u)" -eq 0 ] || sudo="sudo"; \
	$$sudo Tools/bench/webdav-first-sync.sh "$(STATIC_BIN)" $(BENCH_WEBDAV_ARGS)

# Man pages: man/*.scd (scdoc) -> build/man/PAGE.SECTION; the date is the last commit's.
MAN_PAGES := build/man/mamfs.1 build/man/mamfs-policy.5 build/man/mount.fuse.mamfs.8
.PHONY: man
man: $(MAN_PAGES)
build/man/%: man/%.scd
	@Tools/install-missing-packages.sh "make man" scdoc
	@mkdir -p build/man
	SOURCE_DATE_EPOCH="$$(git log -1 --format=%ct 2>/dev/null || date +%s)" scdoc < $< > $@.tmp && mv $@.tmp $@

# The binary that is installed and packaged: a release build with the Swift runtime linked in
# statically, so it needs nothing from the toolchain at run time (only libc, libstdc++,
# libcrypto, libsqlite3, libfuse3, libcurl, libxml2 and libdbus-1). Its own scratch path keeps the `build` binary as it is.
STATIC_SCRATCH ?= .build/static
STATIC_FLAGS = -c release --static-swift-stdlib --scratch-path $(STATIC_SCRATCH)
STATIC_BIN = $(STATIC_SCRATCH)/release/mamfs
.PHONY: build-static
build-static:
	$(SWIFT) build $(STATIC_FLAGS) --product mamfs

# make install [PREFIX=/usr/local] [DESTDIR=] [INSTALL_BIN=a mamfs binary, instead of building]
PREFIX ?= /usr/local
DESTDIR ?=
BINDIR ?= $(PREFIX)/bin
SBINDIR ?= /sbin
MANDIR ?= $(PREFIX)/share/man
BASH_COMPLETION_DIR ?= $(PREFIX)/share/bash-completion/completions
SYSTEMD_USER_DIR ?= $(PREFIX)/lib/systemd/user
SYSTEMD_SYSTEM_DIR ?= $(PREFIX)/lib/systemd/system
INSTALL_BIN ?=
INSTALLED_FILES = $(BINDIR)/mamfs $(SBINDIR)/mount.fuse.mamfs \
	$(MANDIR)/man1/mamfs.1 $(MANDIR)/man5/mamfs-policy.5 $(MANDIR)/man8/mount.fuse.mamfs.8 \
	$(BASH_COMPLETION_DIR)/mamfs $(SYSTEMD_USER_DIR)/mamfs@.service $(SYSTEMD_SYSTEM_DIR)/mamfs@.service
.PHONY: install uninstall
install: $(if $(INSTALL_BIN),,build-static) man
	umask 022 && \
	install -D -s -m 0755 "$(or $(INSTALL_BIN),$(STATIC_BIN))" "$(DESTDIR)$(BINDIR)/mamfs" && \
	install -D -m 0755 Tools/mount.mamfs "$(DESTDIR)$(SBINDIR)/mount.fuse.mamfs" && \
	sed -i 's|^installed_mamfs=.*|installed_mamfs="$(BINDIR)/mamfs"|' "$(DESTDIR)$(SBINDIR)/mount.fuse.mamfs" && \
	install -D -m 0644 build/man/mamfs.1 "$(DESTDIR)$(MANDIR)/man1/mamfs.1" && \
	install -D -m 0644 build/man/mamfs-policy.5 "$(DESTDIR)$(MANDIR)/man5/mamfs-policy.5" && \
	install -D -m 0644 build/man/mount.fuse.mamfs.8 "$(DESTDIR)$(MANDIR)/man8/mount.fuse.mamfs.8" && \
	install -D -m 0644 packaging/bash-completion/mamfs "$(DESTDIR)$(BASH_COMPLETION_DIR)/mamfs" && \
	for kind in user system; do \
	  dir="$(DESTDIR)$$( [ $$kind = user ] && echo "$(SYSTEMD_USER_DIR)" || echo "$(SYSTEMD_SYSTEM_DIR)")"; \
	  install -D -m 0644 packaging/systemd/$$kind/mamfs@.service "$$dir/mamfs@.service" && \
	  sed -i 's|@BINDIR@|$(BINDIR)|g' "$$dir/mamfs@.service" || exit 1; \
	done

# Removes the installed files; in a DESTDIR it also removes the directories left empty (without
# DESTDIR, directories such as /usr/local/share/man/man5 may be the system's and stay).
uninstall:
	for file in $(INSTALLED_FILES); do rm -f "$(DESTDIR)$$file"; done
	if [ -n "$(DESTDIR)" ]; then \
	  for file in $(INSTALLED_FILES); do \
	    dir=$$(dirname "$(DESTDIR)$$file"); \
	    while [ "$$dir" != "$(DESTDIR)" ] && [ "$$dir" != / ] && rmdir "$$dir" 2>/dev/null; do dir=$$(dirname "$$dir"); done; \
	  done; \
	fi

# make deb: build/mamfs_VERSION_ARCH.deb, the files of `make install PREFIX=/usr`.
# make package-check: builds it, checks its control file and libraries, installs it into a
# scratch root and mounts with the installed helper and binary.
DEB_ROOT = build/deb/root
.PHONY: deb package-check
deb: build-static man
	rm -rf "$(DEB_ROOT)"
	$(MAKE) --no-print-directory install DESTDIR="$(CURDIR)/$(DEB_ROOT)" PREFIX=/usr INSTALL_BIN="$(STATIC_BIN)"
	Tools/package/deb.sh "$(DEB_ROOT)" packaging/debian/control.in build
package-check: deps deb
	Tools/package/check.sh build "$(CURDIR)/$(STATIC_BIN)"

# POSIX conformance (docs/ROBUSTNESS.md): pjdfstest on a managed and an unmanaged mount, fsx and
# fsstress on the managed one, from MAMFS_THIRD_PARTY (default ../shared/third_party; skipped
# when absent). Needs root. Knobs: FSX_SEEDS (5), FSX_OPS (100000), FSSTRESS_SECONDS (60).
.PHONY: conformance xfstests
conformance: deps build-static
	Tools/conformance/run.sh "$(STATIC_BIN)"

# xfstests generic/quick on a managed mount (about 25 min; sets up users and
# /sbin/mount.fuse.mamfsx, so meant for a scratch machine). XFSTESTS_ARGS overrides the tests;
# XFSTESTS_FS=gocryptfs runs them on gocryptfs, the peer the results are compared with.
XFSTESTS_ARGS ?=
XFSTESTS_FS ?= mamfs
xfstests: deps build-static
	XFSTESTS_FS=$(XFSTESTS_FS) Tools/conformance/xfstests.sh "$(STATIC_BIN)" $(XFSTESTS_ARGS)
