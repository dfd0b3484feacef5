#!/usr/bin/env python3
"""What `tar x` of small files costs each FUSE daemon in each placement, request by request.

For each mount (the kinds of run.py: mamfs-enc, mamfs-plain, securefs, gocryptfs, bindfs, ...) and
each placement (`same`: daemon and client on CPU 0; `split`: daemon on CPU 1), extracts run.py's
tarball of N small files into the mount (caches dropped first) and reports:
- the wall clock and the daemon's CPU time (utime + stime of the process, seconds);
- the threads the daemon started and ended meanwhile (clone3/clone and exit system calls of
  the process and its threads, counted with `perf stat -p`; "-" without perf);
- the voluntary context switches of its threads (those alive at the end);
- with --latency, one more traced extraction per mount and placement: the requests sent by
  opcode and each opcode's median latency, from the kernel's `fuse_request_send` to its
  `fuse_request_end` (tracefs, kernel 6.14 or later; microseconds). Tracing slows every request,
  so the traced run's wall clock is not reported.
Rounds are interleaved as in run.py. Prints one table per placement (medians over rounds) and
writes every sample as JSON (--out). Needs root.

The backing filesystem's recent history counts: ext4 without a journal passes over every inode
freed in the last 60 s (360 s while its inode table block is dirty) when it allocates one, so
a CREATE right after the `rm -rf` of another extraction costs more than one on a quiet disk.
The order alternates between rounds; the traced extraction is the last round's only.

usage: sudo Tools/bench/placement-cost.py [--mamfs PATH] [--only NAME[,NAME]] [--rounds R]
                                          [--files N] [--dirs D] [--latency] [--busy-poll US]
                                          [--workdir DIR] [--out FILE]
"""
import argparse
import collections
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fuse_trace  # noqa: E402  (the request tracepoints)
import run as bench  # noqa: E402  (the mounts, placements and tree of run.py)

EVENTS = ["fuse_request_send", "fuse_request_end"]
SEND = re.compile(r"\s(\d+\.\d+): fuse_request_send: connection (\d+) req (\d+) opcode \d+ \((\w+)\)")
END = re.compile(r"\s(\d+\.\d+): fuse_request_end: connection (\d+) req (\d+) len")
THREAD_EVENTS = ["syscalls:sys_enter_clone3", "syscalls:sys_enter_clone", "syscalls:sys_enter_exit"]


def voluntary_switches(pid):
    """Sum of voluntary_ctxt_switches over the threads of `pid` alive now."""
    total = 0
    for status in glob.glob(f"/proc/{pid}/task/*/status"):
        try:
            with open(status) as f:
                total += next(int(l.split()[1]) for l in f if l.startswith("voluntary_ctxt_switches:"))
        except (OSError, StopIteration):
            continue  # the thread ended between the listing and the read
    return total


class ThreadCount:
    """`perf stat -p PID` of thread starts and ends over a block; None without perf."""

    def __init__(self, pid, workdir):
        self.pid, self.out, self.process = pid, os.path.join(workdir, "perf-stat.csv"), None

    def __enter__(self):
        if shutil.which("perf"):
            self.process = subprocess.Popen(["perf", "stat", "-x,", "-e", ",".join(THREAD_EVENTS), "-p", str(self.pid),
                                             "-o", self.out], stderr=subprocess.DEVNULL)
            time.sleep(0.5)  # perf attaches to the existing threads before the workload starts
        return self

    def __exit__(self, *_):
        if self.process:
            self.process.send_signal(2)
            self.process.wait()

    def counts(self):
        if not self.process or not os.path.exists(self.out):
            return None
        found = {}
        with open(self.out) as f:
            for line in f:
                fields = line.strip().split(",")
                if len(fields) > 2 and fields[2] in THREAD_EVENTS and fields[0].isdigit():
                    found[fields[2].split("_enter_")[1]] = int(fields[0])
        if not found:
            return None
        return dict(started=found.get("clone3", 0) + found.get("clone", 0), ended=found.get("exit", 0))


def traced(connection, command):
    """Runs `command` with both request tracepoints on: {opcode: [latency µs, ...]}."""
    sent, latencies = {}, collections.defaultdict(list)
    for line in fuse_trace.lines(connection, EVENTS, bench.CLIENT + command, 131072, "placement-cost"):
        m = SEND.search(line)
        if m:
            sent[m.group(3)] = (float(m.group(1)), m.group(4).removeprefix("FUSE_"))
            continue
        m = END.search(line)
        if m and m.group(3) in sent:
            start, opcode = sent.pop(m.group(3))
            latencies[opcode].append((float(m.group(1)) - start) * 1e6)
    return dict(latencies)


def extract(m, tarball, workdir, latency):
    """One `tar x` into a fresh directory of the mount; the sample, and the traced one."""
    target = os.path.join(m.mountpoint, "small")
    os.mkdir(target)
    bench.drop_caches()
    cpu0, switches0 = bench.proc_cpu_seconds(m.pid), voluntary_switches(m.pid)
    with ThreadCount(m.pid, workdir) as threads:
        wall = bench.timed(bench.CLIENT + ["tar", "-xf", tarball, "-C", target])
    sample = dict(wall_s=wall, daemon_cpu_s=bench.proc_cpu_seconds(m.pid) - cpu0,
                  voluntary_switches=voluntary_switches(m.pid) - switches0, threads=threads.counts())
    subprocess.run(["rm", "-rf", target], check=True)
    if latency:
        os.mkdir(target)
        bench.drop_caches()
        lat = traced(fuse_trace.connection_of(m.mountpoint), ["tar", "-xf", tarball, "-C", target])
        sample["requests"] = {op: len(v) for op, v in lat.items()}
        sample["median_us"] = {op: statistics.median(v) for op, v in lat.items()}
        subprocess.run(["rm", "-rf", target], check=True)
    return sample


def report(results, names, placements, files):
    def med(values):
        values = [v for v in values if v is not None]
        return statistics.median(values) if values else None

    for placement in placements:
        print(f"\n`{placement}`: tar x of {files} files, medians over rounds")
        print("| mount | wall s | daemon CPU s | threads started / ended | voluntary switches | requests |")
        print("|---|---|---|---|---|---|")
        for name in names:
            samples = results[placement][name]
            threads = [s["threads"] for s in samples if s["threads"]]
            started = f"{med([t['started'] for t in threads]):.0f} / {med([t['ended'] for t in threads]):.0f}" if threads else "-"
            requests = med([sum(s["requests"].values()) for s in samples if "requests" in s])
            print(f"| {name} | {med([s['wall_s'] for s in samples]):.2f} | {med([s['daemon_cpu_s'] for s in samples]):.2f} | "
                  f"{started} | {med([s['voluntary_switches'] for s in samples]):.0f} | "
                  f"{'-' if requests is None else f'{requests:.0f}'} |")
        traced = [n for n in names if any("median_us" in s for s in results[placement][n])]
        if traced:
            opcodes = sorted({op for n in traced for s in results[placement][n] for op in s.get("requests", {})},
                             key=lambda op: -max(s.get("requests", {}).get(op, 0) for n in traced for s in results[placement][n]))
            print(f"\n`{placement}`: median latency per request, µs (requests)")
            print("| opcode | " + " | ".join(traced) + " |")
            print("|---|" + "---|" * len(traced))
            for op in opcodes:
                cells = []
                for n in traced:
                    lat = med([s["median_us"].get(op) for s in results[placement][n] if "median_us" in s])
                    count = med([s["requests"].get(op) for s in results[placement][n] if "requests" in s])
                    cells.append("-" if lat is None else f"{lat:.0f} ({count:.0f})")
                print(f"| {op} | " + " | ".join(cells) + " |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mamfs", default=os.path.join(bench.REPO, ".build/static/release/mamfs"))
    ap.add_argument("--only", default="mamfs-enc,mamfs-plain,securefs,bindfs")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--files", type=int, default=bench.FULL["files"])
    ap.add_argument("--dirs", type=int, default=bench.FULL["dirs"])
    ap.add_argument("--latency", action="store_true", help="also trace each request's latency (tracefs)")
    ap.add_argument("--busy-poll", type=int, default=100, metavar="US", help="mamfs-poll's -o busy_poll (run.py's default)")
    ap.add_argument("--workdir", default="/var/tmp", help="where the backing directories go (another filesystem: its own allocator)")
    ap.add_argument("--out")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("placement-cost: needs root (drop_caches, taskset of the daemons, tracefs)")
    if args.latency:
        fuse_trace.ensure(EVENTS, "placement-cost", "; run without --latency")
    mamfs = os.path.abspath(args.mamfs)
    names = args.only.split(",")
    placements = list(bench.PLACEMENTS)
    root = tempfile.mkdtemp(prefix="mamfs-placement-cost-", dir=args.workdir)
    results = {p: {n: [] for n in names} for p in placements}
    current = None
    try:
        tarball = os.path.join(root, "tree.tar")
        bench.make_tree_tarball(tarball, args.files, args.dirs)
        for r in range(args.rounds):
            order = [(p, n) for p in placements for n in names]
            for placement, name in (order if r % 2 == 0 else reversed(order)):
                current = bench.Mount(name, placement, root, mamfs, dict(bench.FULL, files=args.files, dirs=args.dirs,
                                                                                   busy_poll_us=args.busy_poll))
                current.start()
                sample = extract(current, tarball, root, args.latency and r == args.rounds - 1)
                current.stop()
                shutil.rmtree(current.base, ignore_errors=True)
                current = None
                results[placement][name].append(sample)
                bench.log(f"round {r + 1} {placement} {name}: {sample['wall_s']:.2f} s, daemon CPU {sample['daemon_cpu_s']:.2f} s")
    finally:
        if current:
            current.stop()
        shutil.rmtree(root, ignore_errors=True)
    report(results, names, placements, args.files)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(files=args.files, dirs=args.dirs, mamfs=mamfs, results=results), f, indent=2)


if __name__ == "__main__":
    main()
