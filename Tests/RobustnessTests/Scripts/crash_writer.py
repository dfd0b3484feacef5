#!/usr/bin/env python3
"""Heavy writer for the crash rounds: writes until it is killed (or the mount dies).

    crash_writer.py DIR JOURNAL SEED

Journal lines (each flushed and fsynced before the next file is started):
  S name size sha256   written, fsync()ed and closed: must survive a daemon crash exactly
  W name size sha256   written and closed, never fsynced (what happens to it is measured)
Scratch files u-* get unsynced pwrite/ftruncate traffic: they must stay readable (no EIO).
"""
import hashlib
import os
import random
import sys

directory, journal_path, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = random.Random(seed)
journal = os.open(journal_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
scratch = []


def note(kind, name, data):
    os.write(journal, ("%s %s %d %s\n" % (kind, name, len(data), hashlib.sha256(data).hexdigest())).encode())
    os.fsync(journal)


try:
    for i in range(1_000_000):
        choice = rng.random()
        if choice < 0.6:
            synced = rng.random() < 0.7
            name = "%s-%d-%d" % ("s" if synced else "w", seed, i)
            size = rng.choice([0, 1, 4095, 4096, 4097, rng.randint(1, 200_000), rng.randint(1, 1_500_000)])
            data = rng.randbytes(size)
            fd = os.open(os.path.join(directory, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            pos = 0
            while pos < size:
                chunk = rng.choice([1, 100, 4096, 5000, 65536, 131072])
                pos += os.write(fd, data[pos:pos + chunk])
            if synced:
                os.fsync(fd)
            os.close(fd)
            note("S" if synced else "W", name, data)
        else:
            if not scratch or rng.random() < 0.1:
                scratch.append("u-%d-%d" % (seed, i))
            name = rng.choice(scratch)
            fd = os.open(os.path.join(directory, name), os.O_RDWR | os.O_CREAT, 0o644)
            for _ in range(rng.randint(1, 20)):
                if rng.random() < 0.15:
                    os.ftruncate(fd, rng.randint(0, 300_000))
                else:
                    os.pwrite(fd, rng.randbytes(rng.randint(1, 70_000)), rng.randint(0, 300_000))
            os.close(fd)
except OSError:
    pass  # the mount went away under us (ENOTCONN): that is the point
