#!/usr/bin/env python3
"""FUSE requests per small-file workload, counted by the kernel, for mamfs and its peers.

For each mount (the same kinds as run.py: mamfs-enc, securefs, gocryptfs, bindfs, ...), runs the
small-file workload of run.py (tar x of N files, ls -lR, cat of every file, rm -rf; caches dropped
before each phase) and counts the requests the kernel sends to that mount's FUSE connection in
each phase, by opcode, from the `fuse:fuse_request_send` tracepoint (tracefs; kernel 6.14 or
later). Counts do not depend on the machine's load, so they explain a time gap between two
filesystems that wall clocks on a shared machine cannot.

Prints one table per phase (opcode x mount) and writes them as JSON (--out). Needs root.
usage: Tools/bench/fuse-requests.py [--mamfs PATH] [--only NAME[,NAME]] [--files N] [--dirs D] [--out FILE]
"""
import argparse
import collections
import json
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fuse_trace  # noqa: E402  (the request tracepoints)
import run as bench  # noqa: E402  (the mounts and the tree of run.py)

LINE = re.compile(r"connection (\d+) req \d+ opcode \d+ \((\w+)\)")
PHASES = ["tar x", "ls -lR", "cat", "rm -rf"]


def counted(connection, command):
    """Runs `command` (pinned like run.py's client) with the tracepoint on; {opcode: count}."""
    counts = collections.Counter()
    for line in fuse_trace.lines(connection, ["fuse_request_send"], bench.CLIENT + command, 65536, "fuse-requests"):
        m = LINE.search(line)
        if m and int(m.group(1)) == connection:
            counts[m.group(2).removeprefix("FUSE_")] += 1
    return dict(counts)


def phases(mountpoint, tarball):
    target = os.path.join(mountpoint, "small")
    os.mkdir(target)
    connection = fuse_trace.connection_of(mountpoint)
    out = {}
    for phase, command in [("tar x", ["tar", "-xf", tarball, "-C", target]), ("ls -lR", ["ls", "-lR", target]),
                           ("cat", ["sh", "-c", 'find "$1" -type f -exec cat {} + > /dev/null', "-", target]),
                           ("rm -rf", ["rm", "-rf", target])]:
        bench.drop_caches()
        out[phase] = counted(connection, command)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mamfs", default=os.path.join(bench.REPO, ".build/release/mamfs"))
    ap.add_argument("--only", default="mamfs-enc,securefs,gocryptfs")
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--dirs", type=int, default=40)
    ap.add_argument("--out")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("fuse-requests: needs root (tracefs, drop_caches)")
    fuse_trace.ensure(["fuse_request_send"], "fuse-requests")
    mamfs = os.path.abspath(args.mamfs)
    root = tempfile.mkdtemp(prefix="mamfs-fuse-requests-", dir="/var/tmp")
    mounts, results = [], {}
    try:
        tarball = os.path.join(root, "tree.tar")
        bench.make_tree_tarball(tarball, args.files, args.dirs)
        for name in args.only.split(","):
            m = bench.Mount(name, "same", root, mamfs)
            mounts.append(m)
            m.start()
            results[name] = phases(m.mountpoint, tarball)
            m.stop()
    finally:
        for m in mounts:
            m.stop()
        shutil.rmtree(root, ignore_errors=True)
    names = list(results)
    print(f"FUSE requests per phase, {args.files} files in {args.dirs} directories")
    for phase in PHASES:
        opcodes = sorted({op for n in names for op in results[n][phase]},
                         key=lambda op: -max(results[n][phase].get(op, 0) for n in names))
        print(f"\n{phase} | " + " | ".join(names))
        for op in opcodes:
            print(f"{op} | " + " | ".join(str(results[n][phase].get(op, 0)) for n in names))
        print("total | " + " | ".join(str(sum(results[n][phase].values())) for n in names))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(files=args.files, dirs=args.dirs, mamfs=mamfs, results=results), f, indent=2)


if __name__ == "__main__":
    main()
