#!/usr/bin/env python3
"""Differential random-operation tester for mamfs (stdlib only).

Applies one seeded, reproducible sequence of file operations to a directory in a mamfs
mount and to a plain reference directory (on ext4, the backing filesystem mamfs is compared
with: fallocate modes differ between filesystems), and compares after every operation: return
values, errno, bytes read, sizes and link counts (by path and by open descriptor), the
directory listing, and (every --check-every operations, and always while minimizing) the
full content of every file.

On a divergence it prints the seed, shrinks the sequence (prefix cut, then delta debugging,
each candidate re-run on fresh directories) and writes the shortest sequence it found as
JSON (--out); `replay` runs such files (Tests/RobustnessTests/Regressions/*.json).

    fsdiff.py run    --mount M --ref R --seeds 1-8 --ops 25000 [--out DIR] [--check-every N]
    fsdiff.py replay --mount M --ref R FILE.json...

Exit 0: no divergence; 1: divergence (details on stdout as JSON lines); 2: usage/setup.
The last stdout line is a JSON summary {"ops": N, "seconds": S, "divergences": [...]}.
"""
import argparse
import ctypes
import ctypes.util
import errno
import hashlib
import json
import mmap
import os
import random
import shutil
import sys
import time

BLOCK = 4096
MAX_SIZE = 5 * BLOCK + 1234  # keep files small so whole-content checks stay cheap
GROW_LIMIT = 4 * MAX_SIZE    # "grow" ops stop here

# fallocate(2) modes: 0, KEEP_SIZE, PUNCH_HOLE|KEEP_SIZE, ZERO_RANGE, ZERO_RANGE|KEEP_SIZE.
FALLOC_KEEP_SIZE, FALLOC_PUNCH_HOLE, FALLOC_ZERO_RANGE = 0x01, 0x02, 0x10
FALLOCATE_MODES = [0, FALLOC_KEEP_SIZE, FALLOC_PUNCH_HOLE | FALLOC_KEEP_SIZE, FALLOC_ZERO_RANGE,
                   FALLOC_ZERO_RANGE | FALLOC_KEEP_SIZE]

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.fallocate64.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
_libc.fallocate64.restype = ctypes.c_int


def fallocate(fd, mode, offset, length):
    if _libc.fallocate64(fd, mode, offset, length) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def data_for(dseed, length):
    return random.Random(dseed).randbytes(length)


# ---------------------------------------------------------------- generation

OPEN_FLAGS = [
    ("RDONLY", os.O_RDONLY), ("WRONLY", os.O_WRONLY), ("RDWR", os.O_RDWR),
]
OPEN_EXTRA = [
    ("", 0), ("", 0), ("", 0), ("APPEND", os.O_APPEND), ("TRUNC", os.O_TRUNC),
    ("CREAT", os.O_CREAT), ("CREAT", os.O_CREAT), ("CREAT|EXCL", os.O_CREAT | os.O_EXCL),
    ("CREAT|APPEND", os.O_CREAT | os.O_APPEND), ("CREAT|TRUNC", os.O_CREAT | os.O_TRUNC),
]


def flag_bits(names):
    bits = 0
    table = {"RDONLY": os.O_RDONLY, "WRONLY": os.O_WRONLY, "RDWR": os.O_RDWR, "APPEND": os.O_APPEND,
             "TRUNC": os.O_TRUNC, "CREAT": os.O_CREAT, "EXCL": os.O_EXCL}
    for name in names.split("|"):
        if name:
            bits |= table[name]
    return bits


def pick_offset(rng, size_hint):
    """Offsets biased to 4 KiB boundaries and the current end of file."""
    r = rng.random()
    if r < 0.35:
        return max(0, rng.randint(1, 5) * BLOCK + rng.randint(-40, 40))
    if r < 0.55:
        return max(0, size_hint + rng.randint(-50, 50))
    if r < 0.65:
        return 0
    return rng.randint(0, MAX_SIZE)


def pick_length(rng):
    r = rng.random()
    if r < 0.3:
        return rng.randint(1, 32)
    if r < 0.6:
        return rng.randint(1, BLOCK + 64)
    if r < 0.7:
        return rng.choice([BLOCK, 2 * BLOCK, BLOCK - 1, BLOCK + 1])
    if r < 0.72:
        return 0
    return rng.randint(1, 3 * BLOCK)


# Known open bugs the generator can steer around (--avoid), so a long run keeps finding new
# ones; each has a disabled regression test in Tests/RobustnessTests.
AVOIDABLE = {
    "rdonly-trunc": "open(O_RDONLY|O_TRUNC) does not truncate in mamfs",
}


def generate(seed, count, files=4, slots=6, avoid=()):
    """The op list for `seed` (deterministic; results do not influence it)."""
    rng = random.Random(seed)
    names = ["f%d" % i for i in range(files)]
    open_slots = {}  # slot -> (name, access) as far as the generator can tell
    sizes = {n: 0 for n in names}
    ops = []
    weights = [
        ("open", 10), ("close", 5), ("pwrite", 18), ("write", 6), ("lseek", 3), ("pread", 14),
        ("read", 4), ("truncate", 5), ("ftruncate", 5), ("grow", 3), ("fallocate", 6), ("mmap", 5),
        ("fsync", 3), ("rename", 2), ("link", 2), ("unlink", 2), ("reopen", 3),
    ]
    population = [w[0] for w in weights]
    cum = [w[1] for w in weights]
    for _ in range(count):
        kind = rng.choices(population, cum)[0]
        slot = rng.randrange(slots)
        if kind in ("pwrite", "write", "pread", "read", "ftruncate", "grow", "fallocate", "mmap", "fsync",
                    "close", "lseek", "reopen") and open_slots and rng.random() < 0.9:
            slot = rng.choice(sorted(open_slots))
        name = rng.choice(names)
        if kind in ("open",):
            access = rng.choice(OPEN_FLAGS)[0]
            extra = rng.choice(OPEN_EXTRA)[0]
            if "rdonly-trunc" in avoid and access == "RDONLY" and "TRUNC" in extra:
                access = "RDWR"
            flags = access + ("|" + extra if extra else "")
            op = {"op": "open", "slot": slot, "name": name, "flags": flags, "mode": rng.choice([0o644, 0o600, 0o444])}
            open_slots[slot] = (name, access)
            if "CREAT" in extra and "EXCL" not in extra:
                sizes.setdefault(name, 0)
        elif kind == "reopen":
            op = {"op": "reopen", "slot": slot}
        elif kind == "close":
            op = {"op": "close", "slot": slot}
            open_slots.pop(slot, None)
        elif kind == "pwrite":
            off = pick_offset(rng, sizes.get(name, 0))
            op = {"op": "pwrite", "slot": slot, "off": off, "len": pick_length(rng), "d": rng.getrandbits(32)}
        elif kind == "write":
            op = {"op": "write", "slot": slot, "len": pick_length(rng), "d": rng.getrandbits(32)}
        elif kind == "lseek":
            whence = rng.choice([os.SEEK_SET, os.SEEK_CUR, os.SEEK_END])
            off = pick_offset(rng, 0) if whence == os.SEEK_SET else rng.randint(-100, 5000)
            op = {"op": "lseek", "slot": slot, "off": off, "whence": whence}
        elif kind == "pread":
            op = {"op": "pread", "slot": slot, "off": pick_offset(rng, sizes.get(name, 0)), "len": pick_length(rng)}
        elif kind == "read":
            op = {"op": "read", "slot": slot, "len": pick_length(rng)}
        elif kind == "truncate":
            op = {"op": "truncate", "name": name, "size": pick_offset(rng, 0)}
        elif kind == "ftruncate":
            op = {"op": "ftruncate", "slot": slot, "size": pick_offset(rng, 0)}
        elif kind == "grow":
            # An extending ftruncate by whole blocks and more (holes in the gap).
            op = {"op": "grow", "slot": slot, "by": rng.choice([BLOCK, 2 * BLOCK, 3 * BLOCK]) + rng.randint(-40, 40)}
        elif kind == "fallocate":
            op = {"op": "fallocate", "slot": slot, "mode": rng.choice(FALLOCATE_MODES), "off": pick_offset(rng, 0),
                  "len": rng.choice([rng.randint(1, 2 * BLOCK), rng.randint(1, 4) * BLOCK, rng.randint(1, 64)])}
        elif kind == "mmap":
            op = {"op": "mmap", "slot": slot, "off": rng.randint(0, MAX_SIZE), "len": rng.randint(1, BLOCK + 100),
                  "d": rng.getrandbits(32)}
        elif kind == "fsync":
            op = {"op": rng.choice(["fsync", "fdatasync"]), "slot": slot}
        elif kind == "rename":
            op = {"op": "rename", "name": name, "to": rng.choice(names)}
        elif kind == "link":
            op = {"op": "link", "name": name, "to": rng.choice(names)}
        else:
            op = {"op": "unlink", "name": name}
        ops.append(op)
    return ops, names


# ---------------------------------------------------------------- execution

class Side:
    """One directory (mount or reference) with its descriptor slots."""

    def __init__(self, root):
        self.root = root
        self.fds = {}  # slot -> (fd, path-at-open, flags)

    def path(self, name):
        return os.path.join(self.root, name)

    def close_all(self):
        for fd, _, _ in self.fds.values():
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds.clear()

    def apply(self, op):
        """Returns a comparable result tuple; never raises for file-system errors."""
        try:
            return ("ok",) + self._apply(op)
        except OSError as e:
            return ("err", errno.errorcode.get(e.errno, str(e.errno)))
        except ValueError as e:  # mmap of an empty file etc.
            return ("valueerror", str(e).split(":")[0])

    def _fd(self, slot):
        entry = self.fds.get(slot)
        if entry is None:
            raise OSError(errno.EBADF, "empty slot")
        return entry[0]

    def _apply(self, op):
        kind = op["op"]
        if kind == "open":
            old = self.fds.pop(op["slot"], None)
            if old:
                os.close(old[0])
            flags = flag_bits(op["flags"])
            fd = os.open(self.path(op["name"]), flags | os.O_CLOEXEC, op.get("mode", 0o644))
            self.fds[op["slot"]] = (fd, op["name"], flags & ~(os.O_CREAT | os.O_EXCL | os.O_TRUNC))
            return ()
        if kind == "reopen":
            entry = self.fds.pop(op["slot"], None)
            if entry is None:
                raise OSError(errno.EBADF, "empty slot")
            os.close(entry[0])
            fd = os.open(self.path(entry[1]), entry[2] | os.O_CLOEXEC)
            self.fds[op["slot"]] = (fd, entry[1], entry[2])
            return ()
        if kind == "close":
            entry = self.fds.pop(op["slot"], None)
            if entry is None:
                raise OSError(errno.EBADF, "empty slot")
            os.close(entry[0])
            return ()
        if kind == "pwrite":
            return (os.pwrite(self._fd(op["slot"]), data_for(op["d"], op["len"]), op["off"]),)
        if kind == "write":
            return (os.write(self._fd(op["slot"]), data_for(op["d"], op["len"])),)
        if kind == "lseek":
            return (os.lseek(self._fd(op["slot"]), op["off"], op["whence"]),)
        if kind == "pread":
            return (os.pread(self._fd(op["slot"]), op["len"], op["off"]).hex(),)
        if kind == "read":
            return (os.read(self._fd(op["slot"]), op["len"]).hex(),)
        if kind == "truncate":
            os.truncate(self.path(op["name"]), op["size"])
            return ()
        if kind == "ftruncate":
            os.ftruncate(self._fd(op["slot"]), op["size"])
            return ()
        if kind == "grow":
            fd = self._fd(op["slot"])
            size = os.fstat(fd).st_size
            os.ftruncate(fd, min(GROW_LIMIT, size + op["by"]) if size < GROW_LIMIT else size)
            return ()
        if kind == "fallocate":
            fallocate(self._fd(op["slot"]), op.get("mode", 0), op["off"], op["len"])
            return ()
        if kind == "mmap":
            fd = self._fd(op["slot"])
            entry = self.fds[op["slot"]]
            access = entry[2] & os.O_ACCMODE
            if access == os.O_WRONLY:
                return ("skip-wronly",)  # a shared map needs read access (EACCES on every filesystem)
            size = os.fstat(fd).st_size
            if size == 0:
                return ("empty",)
            if access == os.O_RDONLY:
                # A shared read-only map (a direct-I/O handle on the mount) sees the file's bytes.
                m = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
                try:
                    off = op["off"] % size
                    length = min(op["len"], size - off)
                    back = m[off:off + length]
                    whole = hashlib.sha256(m[:]).hexdigest()
                finally:
                    m.close()
                return ("ro", off, length, back.hex(), whole)
            m = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
            try:
                off = op["off"] % size
                length = min(op["len"], size - off)
                m[off:off + length] = data_for(op["d"], length)
                m.flush()
                back = m[max(0, off - 7):off + length + 7]
                whole = hashlib.sha256(m[:]).hexdigest()
            finally:
                m.close()
            return (off, length, back.hex(), whole)
        if kind in ("fsync", "fdatasync"):
            getattr(os, kind)(self._fd(op["slot"]))
            return ()
        if kind == "rename":
            os.rename(self.path(op["name"]), self.path(op["to"]))
            return ()
        if kind == "link":
            os.link(self.path(op["name"]), self.path(op["to"]))
            return ()
        if kind == "unlink":
            os.unlink(self.path(op["name"]))
            return ()
        raise ValueError("unknown op " + kind)

    def snapshot(self, names, content):
        """Sizes/link counts by path and by slot, the listing, and optionally contents."""
        out = {"ls": sorted(os.listdir(self.root))}
        for n in names:
            try:
                st = os.stat(self.path(n))
                item = [st.st_size, st.st_nlink]
                if content:
                    with open(self.path(n), "rb") as f:
                        item.append(hashlib.sha256(f.read()).hexdigest())
            except OSError as e:
                item = ["err", errno.errorcode.get(e.errno, str(e.errno))]
            out[n] = item
        for slot in sorted(self.fds):
            try:
                st = os.fstat(self.fds[slot][0])
                out["fd%d" % slot] = [st.st_size, st.st_nlink]
            except OSError as e:
                out["fd%d" % slot] = ["err", errno.errorcode.get(e.errno, str(e.errno))]
        return out


class Runner:
    def __init__(self, mount, ref):
        self.mount = mount
        self.ref = ref
        self.counter = 0

    def fresh(self, tag):
        self.counter += 1
        name = "fsdiff-%d-%s-%d" % (os.getpid(), tag, self.counter)
        dirs = []
        for base in (self.mount, self.ref):
            d = os.path.join(base, name)
            os.mkdir(d)
            dirs.append(d)
        return dirs

    def cleanup(self, dirs):
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)

    def execute(self, ops, names, check_every=1, tag="run", keep=False):
        """Runs ops on fresh dirs. Returns None or a divergence dict (index = first diverging op)."""
        dirs = self.fresh(tag)
        sides = [Side(d) for d in dirs]
        try:
            for i, op in enumerate(ops):
                results = [s.apply(op) for s in sides]
                if results[0] != results[1]:
                    return {"index": i, "op": op, "what": "result", "mount": short(results[0]), "ref": short(results[1])}
                full = check_every <= 1 or (i + 1) % check_every == 0 or i == len(ops) - 1
                snaps = [s.snapshot(names, full) for s in sides]
                if snaps[0] != snaps[1]:
                    return {"index": i, "op": op, "what": "state", "mount": diff_only(snaps[0], snaps[1]),
                            "ref": diff_only(snaps[1], snaps[0])}
            return None
        finally:
            for s in sides:
                s.close_all()
            if not keep:
                self.cleanup(dirs)

    def diverges(self, ops, names):
        return self.execute(ops, names, check_every=1, tag="min") is not None

    def minimize(self, ops, names, found, budget_s=120):
        """Prefix cut, then ddmin over single ops/chunks; every probe runs on fresh dirs."""
        start = time.time()
        current = ops[:found["index"] + 1]
        # An earlier index may diverge when every op's content is checked.
        d = self.execute(current, names, check_every=1, tag="min")
        if d is None:
            return current  # not reproducible in isolation (should not happen: single-threaded)
        current = current[:d["index"] + 1]
        n = 2
        while len(current) >= 2 and time.time() - start < budget_s:
            chunk = max(1, len(current) // n)
            reduced = False
            for i in range(0, len(current), chunk):
                if time.time() - start >= budget_s:
                    break
                candidate = current[:i] + current[i + chunk:]
                if not candidate:
                    continue
                d = self.execute(candidate, names, check_every=1, tag="min")
                if d is not None:
                    current = candidate[:d["index"] + 1]
                    n = max(n - 1, 2)
                    reduced = True
                    break
            if not reduced:
                if chunk == 1:
                    break
                n = min(len(current), n * 2)
        return current


def short(value):
    text = json.dumps(value)
    return value if len(text) < 400 else text[:400] + "..."


def diff_only(a, b):
    return {k: a.get(k) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}


def parse_seeds(text):
    seeds = []
    for part in text.split(","):
        if "-" in part:
            lo, hi = part.split("-")
            seeds.extend(range(int(lo), int(hi) + 1))
        elif part:
            seeds.append(int(part))
    return seeds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run")
    run.add_argument("--mount", required=True)
    run.add_argument("--ref", required=True)
    run.add_argument("--seeds", default="1")
    run.add_argument("--ops", type=int, default=10000, help="operations per seed")
    run.add_argument("--files", type=int, default=4)
    run.add_argument("--slots", type=int, default=6)
    run.add_argument("--check-every", type=int, default=8, help="whole-content check period")
    run.add_argument("--out", help="directory for minimized divergences (JSON)")
    run.add_argument("--label", default="", help="recorded in the JSON (e.g. managed)")
    run.add_argument("--minimize-seconds", type=float, default=120)
    run.add_argument("--avoid", default="", help="comma list of known bugs to steer around: " + ", ".join(AVOIDABLE))
    run.add_argument("--keep-going", action="store_true", help="continue with the next seed after a divergence")
    rep = sub.add_parser("replay")
    rep.add_argument("--mount", required=True)
    rep.add_argument("--ref", required=True)
    rep.add_argument("files", nargs="*")
    args = parser.parse_args()

    for d in (args.mount, args.ref):
        if not os.path.isdir(d):
            print("fsdiff: not a directory: %s" % d, file=sys.stderr)
            return 2
    if args.cmd == "run":
        unknown = [a for a in args.avoid.split(",") if a and a not in AVOIDABLE]
        if unknown:
            print("fsdiff: unknown --avoid %s" % ",".join(unknown), file=sys.stderr)
            return 2
    runner = Runner(args.mount, args.ref)
    started = time.time()
    total = 0
    divergences = []

    if args.cmd == "replay":
        for path in args.files:
            with open(path) as f:
                case = json.load(f)
            d = runner.execute(case["ops"], case["names"], check_every=1, tag="replay")
            total += len(case["ops"])
            if d is not None:
                d["file"] = path
                divergences.append(d)
                print(json.dumps({"divergence": d}), flush=True)
    else:
        for seed in parse_seeds(args.seeds):
            ops, names = generate(seed, args.ops, args.files, args.slots,
                                  avoid=[a for a in args.avoid.split(",") if a])
            t0 = time.time()
            d = runner.execute(ops, names, check_every=args.check_every, tag="s%d" % seed)
            total += len(ops) if d is None else d["index"] + 1
            if d is None:
                print(json.dumps({"seed": seed, "ops": len(ops), "seconds": round(time.time() - t0, 2)}), flush=True)
                continue
            print("fsdiff: DIVERGENCE seed=%d at op %d: %s" % (seed, d["index"], json.dumps(short(d))), flush=True)
            minimal = runner.minimize(ops, names, d, budget_s=args.minimize_seconds)
            final = runner.execute(minimal, names, check_every=1, tag="final") or d
            case = {"seed": seed, "label": args.label, "names": names, "divergence": final, "ops": minimal,
                    "note": "fsdiff.py run --seeds %d --ops %d --files %d --slots %d --avoid '%s'; minimized from %d ops"
                            % (seed, args.ops, args.files, args.slots, args.avoid, d["index"] + 1)}
            print("fsdiff: seed=%d shortest reproducing sequence: %d ops" % (seed, len(minimal)), flush=True)
            for op in minimal:
                print("  " + json.dumps(op), flush=True)
            if args.out:
                os.makedirs(args.out, exist_ok=True)
                path = os.path.join(args.out, "fsdiff-%s-seed%d.json" % (args.label or "case", seed))
                with open(path, "w") as f:
                    json.dump(case, f, indent=1)
                print("fsdiff: wrote " + path, flush=True)
            divergences.append({"seed": seed, "ops": len(minimal), "divergence": final})
            if not args.keep_going:
                break
    print(json.dumps({"ops": total, "seconds": round(time.time() - started, 2), "divergences": divergences}), flush=True)
    return 1 if divergences else 0


if __name__ == "__main__":
    sys.exit(main())
