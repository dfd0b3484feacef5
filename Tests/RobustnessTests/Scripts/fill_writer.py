#!/usr/bin/env python3
"""Writes files into DIR until the disk is full (full-disk test).

    fill_writer.py DIR JOURNAL SEED

Journal lines: "S name size sha256" for a file written, fsync()ed and closed without error;
"E name op errno written" for the first failing call on a file (the file is then closed and
kept: its first `written` bytes were reported written). Stops after 6 failures.
"""
import errno
import hashlib
import os
import random
import sys

directory, journal_path, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = random.Random(seed)
journal = open(journal_path, "a")
failures = 0
i = 0
while failures < 6 and i < 100000:
    i += 1
    name = "f-%d-%d" % (seed, i)
    size = rng.choice([rng.randint(1, 9000), rng.randint(4000, 200_000), rng.randint(100_000, 700_000)])
    data = rng.randbytes(size)
    op, written = "open", 0
    try:
        fd = os.open(os.path.join(directory, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            op = "write"
            while written < size:
                written += os.write(fd, data[written:written + rng.choice([4096, 10000, 65536])])
            op = "fsync"
            os.fsync(fd)
            op = "close"
        finally:
            os.close(fd)
        journal.write("S %s %d %s\n" % (name, size, hashlib.sha256(data).hexdigest()))
    except OSError as e:
        failures += 1
        journal.write("E %s %s %s %d %s\n" % (name, op, errno.errorcode.get(e.errno, str(e.errno)), written,
                                              hashlib.sha256(data[:written]).hexdigest()))
    journal.flush()
