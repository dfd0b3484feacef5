#!/usr/bin/env python3
"""Reads every regular file below DIR completely; prints one JSON object
{relative path: [size, sha256] or ["error", errno name]} (hidden entries skipped)."""
import errno
import hashlib
import json
import os
import sys

root = sys.argv[1]
result = {}
for current, dirs, files in os.walk(root):
    dirs[:] = [d for d in dirs if not d.startswith(".")]
    for name in files:
        path = os.path.join(current, name)
        rel = os.path.relpath(path, root)
        try:
            h = hashlib.sha256()
            size = 0
            with open(path, "rb", buffering=0) as f:
                while True:
                    chunk = f.read(1 << 20)
                    if not chunk:
                        break
                    h.update(chunk)
                    size += len(chunk)
            result[rel] = [size, h.hexdigest()]
        except OSError as e:
            result[rel] = ["error", errno.errorcode.get(e.errno, str(e.errno))]
print(json.dumps(result))
