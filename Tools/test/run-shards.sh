#!/usr/bin/env bash
# Runs the whole swift-testing suite as several test processes at once (what `make test` does).
#
# Why: swift-testing runs a process's tests on the Swift concurrency pool, one thread per CPU,
# and most of our tests block their thread while a mount, a daemon or a CLI child does the
# work, so one process keeps only as many tests in flight as there are CPUs, however idle they
# are. Each shard is a process with a pool of its own.
#
# Shards are given as swift-testing filters (regular expressions over test IDs such as
# "MAMFSTests.BasicMountTests/writeAndRead(kind:)"); the last shard runs every test the others
# do not (--skip of all their filters), so no test is left out whatever is added later. Tests
# that share something machine-wide guard it themselves (a lock in one process), so each such
# group stays within one shard: the FUSE request tracepoint users are all in the second.
#
# Each shard's output goes to a log in LOG_DIR; the logs are printed one after the other as
# the shards end (so their lines do not interleave), then every shard's exit and wall time.
# Exits 0 when every shard passed, 1 otherwise.
# usage: Tools/test/run-shards.sh PATH/TO/mamfsPackageTests.xctest [LOG_DIR]
set -uo pipefail
[[ $# -ge 1 && -x $1 ]] || { echo "usage: $0 PATH/TO/mamfsPackageTests.xctest [LOG_DIR]" >&2; exit 64; }
bundle=$1
logs=${2:-$(mktemp -d "${TMPDIR:-/tmp}/mamfs-test-shards.XXXXXX")}
mkdir -p "$logs" && rm -f "$logs"/*.log "$logs"/*.status

# One shard per pattern; the patterns must not overlap (checked below against the bundle's
# list of tests, so no test runs twice). Five processes on two CPUs keep the CPUs busy; more
# only made the latency-bound robustness runs (fsdiff) and the fuzzer's build slower without
# ending the whole run sooner. The serialized provider-mount suites of MAMFSTests (one test at
# a time, mostly waiting on daemons and Apache) have a shard of their own, as have the rest of
# MAMFSTests, the differential runs (fsdiff, the longest single test) and the other robustness
# suites; every other test is in the last shard.
serialized='Provider|WebDAV|SecurityProvider|SecurityDescriptor'
shards=(
    "^MAMFSTests\\.($serialized)"
    "^MAMFSTests\\.(?!$serialized)"
    '^RobustnessTests\.DifferentialTests'
    '^RobustnessTests\.(?!DifferentialTests)'
)
skips=()
for pattern in "${shards[@]}"; do skips+=(--skip "$pattern"); done

tests=$("$bundle" --testing-library swift-testing --list-tests 2>/dev/null) || { echo "$0: cannot list the tests of $bundle" >&2; exit 1; }
[[ -n $tests ]] || { echo "$0: $bundle lists no tests" >&2; exit 1; }
overlap=$(for pattern in "${shards[@]}"; do grep -P "$pattern" <<< "$tests"; done | sort | uniq -d)
[[ -z $overlap ]] || { echo "$0: tests in more than one shard:" >&2; echo "$overlap" >&2; exit 1; }

started=$(date +%s)
pids=() names=()
run_shard() { # name, then arguments for the test bundle
    local name=$1; shift
    (
        s=$(date +%s)
        "$bundle" --testing-library swift-testing "$@" > "$logs/$name.log" 2>&1
        rc=$?
        echo "$rc $(($(date +%s) - s))" > "$logs/$name.status"
    ) &
    pids+=($!) names+=("$name")
}
index=0
for pattern in "${shards[@]}"; do
    index=$((index + 1))
    run_shard "shard$index" --filter "$pattern"
done
run_shard "rest" "${skips[@]}"

failed=0
summary=()
for i in "${!pids[@]}"; do
    wait "${pids[$i]}"
    name=${names[$i]}
    cat "$logs/$name.log"
    read -r rc seconds < "$logs/$name.status" || { rc=1 seconds=?; }
    summary+=("$name: exit $rc, ${seconds} s")
    [[ $rc -eq 0 ]] || failed=1
done
echo "test shards ($(($(date +%s) - started)) s in all; logs in $logs):"
printf '  %s\n' "${summary[@]}"
for i in "${!names[@]}"; do
    grep -h -E "^(✘|✔) Test run with" "$logs/${names[$i]}.log" | sed "s/^/  ${names[$i]}: /"
done
# The failures once more at the very end (a CI log may keep only its tail): every line a
# failing shard marked ✘ (the issues recorded and the tests that failed), at most 40 a shard,
# each cut to 600 characters.
if [[ $failed -ne 0 ]]; then
    echo "failures:"
    for i in "${!names[@]}"; do
        grep -h -E "^✘ (Test|Suite) " "$logs/${names[$i]}.log" | cut -c1-600 | sed -n "1,40s/^/  ${names[$i]}: /p"
    done
fi
exit $failed
