#!/usr/bin/env python3
"""Concurrency scenarios at scale, each in several processes (fork):

    concurrency.py SCENARIO DIR SCALE

Prints one JSON object {"errors": [...], "stats": {...}}; exit 0 when errors is empty.
Scenarios:
  rw        3 writers pwrite whole 4 KiB blocks of a record pattern, 3 readers pread blocks:
            every block read is one writer's whole block or zeros (never mixed, never EIO)
  names     4 processes create files and rename them onto shared names in one directory:
            every surviving name reads back a whole record of some created file
  truncate  the truncation regression cases at scale: truncate(0)+rewrite loop, path truncates to random sizes,
            an appender, readers through held O_RDONLY descriptors: no EIO, only valid bytes
"""
import errno
import json
import os
import random
import sys
import time

scenario, directory, scale = sys.argv[1], sys.argv[2], int(sys.argv[3])
BLOCK = 4096


def run_children(funcs):
    """Forks one child per function; returns their error lists and stats."""
    pipes = []
    for func in funcs:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                result = func()
            except Exception as e:  # noqa: BLE001 - reported, not hidden
                result = {"errors": ["%s: %r" % (func.__name__, e)]}
            os.write(w, json.dumps(result).encode())
            os._exit(0)
        os.close(w)
        pipes.append((pid, r))
    results = []
    for pid, r in pipes:
        chunks = []
        while True:
            c = os.read(r, 65536)
            if not c:
                break
            chunks.append(c)
        os.close(r)
        os.waitpid(pid, 0)
        results.append(json.loads(b"".join(chunks) or b'{"errors": ["child died"]}'))
    return results


def record_block(writer, it):
    rec = ("w%02d-%010d|\n" % (writer, it)).encode()  # 16 bytes
    return rec * (BLOCK // len(rec))


def rw():
    path = os.path.join(directory, "shared")
    blocks = 16
    with open(path, "wb") as f:
        f.write(b"\0" * (blocks * BLOCK))

    def writer(n):
        def w():
            fd = os.open(path, os.O_RDWR)
            rng = random.Random(n)
            for it in range(scale):
                os.pwrite(fd, record_block(n, it), rng.randrange(blocks) * BLOCK)
                if it % 97 == 0:
                    os.fsync(fd)
            os.close(fd)
            return {"errors": [], "writes": scale}
        w.__name__ = "writer%d" % n
        return w

    def reader(n):
        def r():
            fd = os.open(path, os.O_RDONLY)
            rng = random.Random(100 + n)
            errs, reads = [], 0
            for _ in range(scale):
                b = rng.randrange(blocks)
                try:
                    data = os.pread(fd, BLOCK, b * BLOCK)
                except OSError as e:
                    errs.append("pread block %d: %s" % (b, errno.errorcode.get(e.errno)))
                    if len(errs) > 5:
                        break
                    continue
                reads += 1
                if len(data) != BLOCK:
                    errs.append("short read %d at block %d" % (len(data), b))
                elif data != b"\0" * BLOCK and data != data[:16] * (BLOCK // 16):
                    errs.append("block %d mixes writes: %r ... %r" % (b, data[:16], data[-16:]))
            os.close(fd)
            return {"errors": errs[:10], "reads": reads}
        r.__name__ = "reader%d" % n
        return r

    return run_children([writer(i) for i in range(3)] + [reader(i) for i in range(3)])


def names():
    shared = ["n%d" % i for i in range(8)]

    def worker(n):
        def w():
            rng = random.Random(n)
            errs = []
            for it in range(scale):
                name = "c-%d-%d" % (n, it)
                p = os.path.join(directory, name)
                try:
                    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                    os.write(fd, (name + "\n").encode() * rng.randint(1, 600))
                    os.close(fd)
                    if rng.random() < 0.8:
                        os.rename(p, os.path.join(directory, rng.choice(shared)))
                    if rng.random() < 0.1:
                        os.unlink(os.path.join(directory, rng.choice(shared)))
                except FileNotFoundError:
                    pass  # another process renamed/unlinked the shared name first
                except OSError as e:
                    errs.append("%s: %s" % (name, errno.errorcode.get(e.errno)))
            return {"errors": errs[:10]}
        w.__name__ = "names%d" % n
        return w

    results = run_children([worker(i) for i in range(4)])
    errs = []
    for name in sorted(os.listdir(directory)):
        try:
            data = open(os.path.join(directory, name), "rb").read()
        except OSError as e:
            errs.append("read %s: %s" % (name, errno.errorcode.get(e.errno)))
            continue
        lines = data.split(b"\n")
        if not data or lines[-1] != b"" or len(set(lines[:-1])) != 1 or not lines[0].startswith(b"c-"):
            errs.append("%s holds %d bytes that are not one file's records" % (name, len(data)))
    results.append({"errors": errs[:10], "survivors": len(os.listdir(directory))})
    return results


def truncate():
    path = os.path.join(directory, "t")
    open(path, "wb").close()
    payload = b"0123456789"

    def rewriter():
        fd = os.open(path, os.O_RDWR)
        for _ in range(scale):
            os.ftruncate(fd, 0)
            os.pwrite(fd, payload, 0)
        os.close(fd)
        return {"errors": []}

    def path_truncator():
        rng = random.Random(5)
        for _ in range(scale):
            os.truncate(path, rng.randint(0, 3 * BLOCK))
        return {"errors": []}

    def appender():
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        for _ in range(scale // 4):
            os.write(fd, b"A" * 6000)
        os.close(fd)
        return {"errors": []}

    def reader(n):
        def r():
            fd = os.open(path, os.O_RDONLY)  # held across all the truncations (a path truncate under an open reader)
            errs, reads = [], 0
            for _ in range(scale):
                try:
                    data = os.pread(fd, 64, 0)
                except OSError as e:
                    errs.append("pread: %s" % errno.errorcode.get(e.errno))
                    if len(errs) > 5:
                        break
                    continue
                reads += 1
                # Valid bytes: a prefix of payload, zeros (a path truncate grew a hole), or 'A's.
                if data and not all(c in b"0123456789A\0" for c in data):
                    errs.append("pread returned %r" % data[:20])
            os.close(fd)
            return {"errors": errs[:10], "reads": reads}
        r.__name__ = "reader%d" % n
        return r

    results = run_children([rewriter, path_truncator, appender, reader(0), reader(1)])
    try:
        with open(path, "rb") as f:
            final = f.read()
        results.append({"errors": [], "final": len(final)})
    except OSError as e:
        results.append({"errors": ["final read: %s" % errno.errorcode.get(e.errno)]})
    return results


started = time.time()
results = {"rw": rw, "names": names, "truncate": truncate}[scenario]()
errors = [e for r in results for e in r.get("errors", [])]
stats = {k: v for r in results for k, v in r.items() if k != "errors"}
stats["seconds"] = round(time.time() - started, 2)
print(json.dumps({"errors": errors, "stats": stats}))
sys.exit(1 if errors else 0)
