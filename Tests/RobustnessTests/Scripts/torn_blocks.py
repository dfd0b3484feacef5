#!/usr/bin/env python3
"""Reads FILE 4 KiB block by block; prints "BLOCKS FAILED": how many blocks there are and how
many reads failed with EIO (a block torn by a crash fails authentication; the others must read)."""
import errno
import os
import sys

fd = os.open(sys.argv[1], os.O_RDONLY)
size = os.fstat(fd).st_size
blocks = (size + 4095) // 4096
failed = 0
for index in range(blocks):
    try:
        os.pread(fd, 4096, index * 4096)
    except OSError as e:
        if e.errno != errno.EIO:
            raise
        failed += 1
print(blocks, failed)
