#!/usr/bin/env python3
"""Independent decoder for the mamfs protected-file format, version 1 (docs/FORMAT.md).

Written from docs/FORMAT.md, not from the Swift sources, so that the tests catch a drift
between the spec and the code. Needs only the standard library and `cryptography`.

    verify_format.py vectors FILE.json            recompute every test vector (exit 0 / 1)
    verify_format.py generate FILE.json           write the test vectors from their inputs
    verify_format.py decrypt FILE --account-key HEX [-o OUT]
                                                  authenticate and print / write the plaintext
    verify_format.py info FILE                    header fields and sizes as JSON

Exit codes: 0 ok, 1 a vector does not match, 64 usage, 65 authentication or format error
(one line on stderr, no plaintext written), 66 cannot open input, 73 cannot write output.
"""

import argparse
import hashlib
import json
import os
import struct
import sys
import unicodedata

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

MAGIC = bytes([0x89, 0x4D, 0x41, 0x4D, 0x46, 0x53, 0x0D, 0x0A])
VERSION = 1
FLAG_ENCRYPTED = 0x01
FLAG_SPARSE = 0x02              # encrypted only: an all-zero stored block is a hole
FIXED = 13                      # magic(8) version(1) flags(1) H(2) L(1)
ENC_EXTRA = 4 + 16 + 12 + 32 + 16
BLOCK = 4096
NONCE = 12
TAG = 16
OVERHEAD = NONCE + TAG
STORED_BLOCK = BLOCK + OVERHEAD
MAX_HEADER = FIXED + 255 + ENC_EXTRA

EX_OK, EX_MISMATCH, EX_USAGE, EX_DATAERR, EX_NOINPUT, EX_CANTCREAT = 0, 1, 64, 65, 66, 73


class FormatError(Exception):
    """The bytes are not a valid, authentic version-1 file."""


# ---------------------------------------------------------------- sizes

def plaintext_size(body_length):
    """Plaintext bytes of an encrypted body of `body_length` stored bytes; None if impossible."""
    if body_length < 0:
        return None
    full, rest = divmod(body_length, STORED_BLOCK)
    if rest == 0:
        return full * BLOCK
    if rest <= OVERHEAD:
        return None
    return full * BLOCK + rest - OVERHEAD


def body_length(plain_size):
    full, rest = divmod(plain_size, BLOCK)
    return full * STORED_BLOCK + (rest + OVERHEAD if rest else 0)


# ---------------------------------------------------------------- header

def is_canonical_owner(owner):
    """Lowercase, no leading or trailing blanks (tab or Unicode category Zs)."""
    def blank(ch):
        return ch == "\t" or unicodedata.category(ch) == "Zs"
    if owner and (blank(owner[0]) or blank(owner[-1])):
        return False
    return owner == owner.lower()


def build_header(owner, encrypted, key_id=None, file_id=None, file_key=None, account_key=None, wrap_nonce=None,
                 sparse=False):
    owner_bytes = owner.encode("utf-8")
    if len(owner_bytes) > 255:
        raise ValueError("owner longer than 255 bytes")
    if sparse and not encrypted:
        raise ValueError("only an encrypted header can be sparse")
    length = FIXED + len(owner_bytes) + (ENC_EXTRA if encrypted else 0)
    flags = (FLAG_ENCRYPTED if encrypted else 0) | (FLAG_SPARSE if sparse else 0)
    prefix = MAGIC + bytes([VERSION, flags]) + struct.pack("<H", length)
    prefix += bytes([len(owner_bytes)]) + owner_bytes
    if not encrypted:
        return prefix
    if not owner_bytes or len(file_id) != 16 or len(file_key) != 32 or len(wrap_nonce) != NONCE:
        raise ValueError("bad encrypted header inputs")
    aad = prefix + struct.pack("<I", key_id) + file_id
    sealed = AESGCM(account_key).encrypt(wrap_nonce, file_key, aad)  # ciphertext(32) || tag(16)
    return aad + wrap_nonce + sealed


def parse_header(data):
    """Returns None for an untagged file, else a dict. Raises FormatError. Does not unwrap."""
    if len(data) < len(MAGIC) or data[:len(MAGIC)] != MAGIC:
        return None
    if len(data) < FIXED:
        raise FormatError("header truncated")
    version, flags = data[8], data[9]
    if version != VERSION:
        raise FormatError(f"unknown format version {version}")
    if flags & ~(FLAG_ENCRYPTED | FLAG_SPARSE) & 0xFF:
        raise FormatError(f"unknown flags 0x{flags:02x}")
    declared = struct.unpack_from("<H", data, 10)[0]
    owner_len = data[12]
    encrypted = bool(flags & FLAG_ENCRYPTED)
    sparse = bool(flags & FLAG_SPARSE)
    if sparse and not encrypted:
        raise FormatError("sparse flag on a plain header")
    expected = FIXED + owner_len + (ENC_EXTRA if encrypted else 0)
    if declared != expected:
        raise FormatError(f"header length {declared}, expected {expected}")
    if len(data) < expected:
        raise FormatError("header truncated")
    try:
        owner = data[FIXED:FIXED + owner_len].decode("utf-8")
    except UnicodeDecodeError:
        raise FormatError("owner is not UTF-8") from None
    if not is_canonical_owner(owner):
        raise FormatError("owner is not canonical (lowercase, trimmed)")
    header = {"owner": owner, "encrypted": encrypted, "sparse": sparse, "length": expected}
    if encrypted:
        if not owner:
            raise FormatError("encrypted file without owner")
        p = FIXED + owner_len
        header["key_id"] = struct.unpack_from("<I", data, p)[0]
        header["file_id"] = bytes(data[p + 4:p + 20])
        header["wrap_nonce"] = bytes(data[p + 20:p + 32])
        header["wrapped_key"] = bytes(data[p + 32:p + 80])   # ciphertext(32) || tag(16)
        header["aad"] = bytes(data[:p + 20])
    return header


def unwrap_file_key(header, account_key):
    try:
        key = AESGCM(account_key).decrypt(header["wrap_nonce"], header["wrapped_key"], header["aad"])
    except InvalidTag:
        raise FormatError("file key does not authenticate (header altered or wrong account key)") from None
    if len(key) != 32:
        raise FormatError("file key has the wrong length")
    return key


# ---------------------------------------------------------------- body

def block_aad(file_id, index):
    return file_id + struct.pack("<Q", index)


def encrypt_body(file_key, file_id, plaintext, nonces, holes=()):
    """`nonces[i]` for block i; the blocks in `holes` are stored as zeros (sparse files only)."""
    aes = AESGCM(file_key)
    out = bytearray()
    for index in range((len(plaintext) + BLOCK - 1) // BLOCK):
        chunk = plaintext[index * BLOCK:(index + 1) * BLOCK]
        if index in holes:
            out += bytes(len(chunk) + OVERHEAD)
            continue
        nonce = nonces[index]
        out += nonce + aes.encrypt(nonce, chunk, block_aad(file_id, index))
    return bytes(out)


def decrypt_body(file_key, file_id, body, sparse=False):
    """Plaintext of an encrypted body; with `sparse`, a stored block of only zero bytes is a
    hole (that many zero plaintext bytes), without it such a block fails like any other."""
    size = plaintext_size(len(body))
    if size is None:
        raise FormatError(f"encrypted body of {len(body)} bytes is not a valid length "
                          f"(a last block of 1..{OVERHEAD} stored bytes: truncated or corrupt)")
    aes = AESGCM(file_key)
    out = bytearray()
    for index, start in enumerate(range(0, len(body), STORED_BLOCK)):
        stored = body[start:start + STORED_BLOCK]
        if sparse and stored.count(0) == len(stored):
            out += bytes(len(stored) - OVERHEAD)
            continue
        try:
            out += aes.decrypt(stored[:NONCE], stored[NONCE:], block_aad(file_id, index))
        except InvalidTag:
            raise FormatError(f"block {index} does not authenticate") from None
    assert len(out) == size
    return bytes(out)


def decode_file(data, account_key):
    """Plaintext of a whole stored file (untagged, plain-tagged or encrypted)."""
    header = parse_header(data)
    if header is None:
        return data
    body = data[header["length"]:]
    if not header["encrypted"]:
        return body
    if account_key is None:
        raise KeyError("the file is encrypted: --account-key is required")
    return decrypt_body(unwrap_file_key(header, account_key), header["file_id"], body, header["sparse"])


# ---------------------------------------------------------------- vectors

def pattern(kind, length, holes=()):
    """Byte i is i % 251, except in the blocks listed in `holes`, which are zeros."""
    if kind != "i % 251":
        raise ValueError(f"unknown plaintext pattern {kind!r}")
    return bytes(0 if i // BLOCK in holes else i % 251 for i in range(length))


def seq(start, count):
    return bytes((start + i) & 0xFF for i in range(count))


def generate():
    """The published vectors, computed from their inputs by this implementation."""
    account_key, file_key = seq(0x00, 32), seq(0x20, 32)
    file_id, wrap_nonce = seq(0x40, 16), seq(0x50, 12)
    nonces = [seq(0x60, 12), seq(0x70, 12)]
    owner = "8c7f3e1a-0000-4000-8000-000000000001"
    plain = pattern("i % 251", BLOCK + 10)
    header = build_header(owner, True, 1, file_id, file_key, account_key, wrap_nonce)
    body = encrypt_body(file_key, file_id, plain, nonces)
    plain_header = build_header(owner, False)
    unmanaged_header = build_header("", False)
    hello = b"hello, mamfs\n"
    # A sparse file: blocks 0 and 2 hold data, block 1 (full) and block 3 (the last, 10 bytes)
    # are holes; same keys, file id and wrap nonce as above, flags = encrypted | sparse.
    holes = [1, 3]
    sparse_plain = pattern("i % 251", 3 * BLOCK + 10, holes)
    sparse_nonces = [seq(0x60, 12), None, seq(0x80, 12), None]
    sparse_header = build_header(owner, True, 1, file_id, file_key, account_key, wrap_nonce, sparse=True)
    sparse_body = encrypt_body(file_key, file_id, sparse_plain, sparse_nonces, holes)
    inputs = {"account_key": account_key.hex(), "file_key": file_key.hex(), "file_id": file_id.hex(),
              "wrap_nonce": wrap_nonce.hex(), "owner": owner, "key_id": 1}
    sizes = [0, 1, 28, 29, 30, 4095, 4096, 4097, STORED_BLOCK - 1, STORED_BLOCK, STORED_BLOCK + 1,
             STORED_BLOCK + 28, STORED_BLOCK + 29, 3 * STORED_BLOCK, 3 * 1024 * 1024 + 17,
             body_length(3 * 1024 * 1024 + 17), body_length(64 * 1024 * 1024)]
    return {
        "format": "mamfs protected file",
        "format_version": VERSION,
        "generator": "Tools/verify_format.py generate (Python cryptography, from docs/FORMAT.md)",
        "block_size": BLOCK,
        "stored_block_size": STORED_BLOCK,
        "encrypted": [{
            "name": "owner 8c7f3e1a-..., key id 1, 2 blocks (4096 + 10 bytes)",
            **inputs,
            "header": header.hex(),
            "plaintext_pattern": "i % 251",
            "plaintext_length": len(plain),
            "plaintext_sha256": hashlib.sha256(plain).hexdigest(),
            "block_nonces": [n.hex() for n in nonces],
            "body": body.hex(),
        }],
        "sparse": [{
            "name": "sparse: 4 blocks, block 1 (4096 bytes) and block 3 (last, 10 bytes) are holes",
            **inputs,
            "header": sparse_header.hex(),
            "header_without_flag": header.hex(),
            "plaintext_pattern": "i % 251",
            "plaintext_length": len(sparse_plain),
            "holes": holes,
            "plaintext_sha256": hashlib.sha256(sparse_plain).hexdigest(),
            "block_nonces": ["" if n is None else n.hex() for n in sparse_nonces],
            "body": sparse_body.hex(),
        }],
        "plain": [
            {"name": "plain-tagged, managed owner", "owner": owner, "header": plain_header.hex(),
             "plaintext": hello.hex(), "stored": (plain_header + hello).hex()},
            {"name": "plain-tagged, unmanaged (empty owner)", "owner": "", "header": unmanaged_header.hex(),
             "plaintext": hello.hex(), "stored": (unmanaged_header + hello).hex()},
        ],
        "sizes": [{"body_length": n, "plaintext_size": plaintext_size(n)} for n in sizes],
    }


def encrypted_inputs(v):
    """account key, file key, file id, wrap nonce, header and body of an encrypted vector."""
    return tuple(bytes.fromhex(v[k]) for k in ("account_key", "file_key", "file_id", "wrap_nonce", "header", "body"))


def check_vectors(doc):
    """Recomputes every vector; returns a list of failure messages."""
    failures = []

    def expect(cond, what):
        if not cond:
            failures.append(what)

    expect(doc.get("format_version") == VERSION, "format_version")
    expect(doc.get("block_size") == BLOCK and doc.get("stored_block_size") == STORED_BLOCK, "block sizes")
    for v in doc.get("encrypted", []):
        name = v.get("name", "?")
        try:
            account_key, file_key, file_id, wrap_nonce, header, body = encrypted_inputs(v)
            plain = pattern(v["plaintext_pattern"], v["plaintext_length"])
            expect(hashlib.sha256(plain).hexdigest() == v["plaintext_sha256"], f"{name}: plaintext sha256")
            built = build_header(v["owner"], True, v["key_id"], file_id, file_key, account_key, wrap_nonce)
            expect(built == header, f"{name}: header bytes")
            parsed = parse_header(header)
            expect(parsed is not None and parsed["owner"] == v["owner"] and parsed["key_id"] == v["key_id"]
                   and parsed["file_id"] == file_id, f"{name}: header fields")
            expect(unwrap_file_key(parsed, account_key) == file_key, f"{name}: unwrapped file key")
            nonces = [bytes.fromhex(n) for n in v["block_nonces"]]
            expect(encrypt_body(file_key, file_id, plain, nonces) == body, f"{name}: body bytes")
            expect(decode_file(header + body, account_key) == plain, f"{name}: decrypted body")
            expect(plaintext_size(len(body)) == len(plain), f"{name}: size formula")
        except (KeyError, ValueError, FormatError) as e:
            failures.append(f"{name}: {e}")
    for v in doc.get("sparse", []):
        name = v.get("name", "?")
        try:
            account_key, file_key, file_id, wrap_nonce, header, body = encrypted_inputs(v)
            unflagged = bytes.fromhex(v["header_without_flag"])
            holes = v["holes"]
            plain = pattern(v["plaintext_pattern"], v["plaintext_length"], holes)
            expect(hashlib.sha256(plain).hexdigest() == v["plaintext_sha256"], f"{name}: plaintext sha256")
            built = build_header(v["owner"], True, v["key_id"], file_id, file_key, account_key, wrap_nonce, sparse=True)
            expect(built == header, f"{name}: header bytes")
            expect(build_header(v["owner"], True, v["key_id"], file_id, file_key, account_key, wrap_nonce) == unflagged,
                   f"{name}: header bytes without the flag")
            parsed = parse_header(header)
            expect(parsed is not None and parsed["sparse"] and parsed["encrypted"], f"{name}: sparse flag parsed")
            nonces = [bytes.fromhex(n) if n else None for n in v["block_nonces"]]
            expect(encrypt_body(file_key, file_id, plain, nonces, holes) == body, f"{name}: body bytes")
            for index in holes:
                start = index * STORED_BLOCK
                expect(body[start:start + STORED_BLOCK].count(0) == len(body[start:start + STORED_BLOCK]),
                       f"{name}: hole {index} is stored as zeros")
            expect(decode_file(header + body, account_key) == plain, f"{name}: decrypted body")
            # Without the flag, the same body's holes are blocks that fail their tag.
            try:
                decode_file(unflagged + body, account_key)
                failures.append(f"{name}: holes read without the sparse flag")
            except FormatError:
                pass
            # The flag cannot be added by rewriting the flags byte: the wrap's AAD covers it.
            forged = bytearray(unflagged)
            forged[9] |= FLAG_SPARSE
            try:
                decode_file(bytes(forged) + body, account_key)
                failures.append(f"{name}: a forged sparse flag authenticated")
            except FormatError:
                pass
        except (KeyError, ValueError, FormatError) as e:
            failures.append(f"{name}: {e}")
    for v in doc.get("plain", []):
        name = v.get("name", "?")
        try:
            header, stored = bytes.fromhex(v["header"]), bytes.fromhex(v["stored"])
            expect(build_header(v["owner"], False) == header, f"{name}: header bytes")
            expect(stored == header + bytes.fromhex(v["plaintext"]), f"{name}: stored bytes")
            parsed = parse_header(stored)
            expect(parsed is not None and not parsed["encrypted"] and parsed["owner"] == v["owner"],
                   f"{name}: header fields")
            expect(decode_file(stored, None) == bytes.fromhex(v["plaintext"]), f"{name}: body")
        except (KeyError, ValueError, FormatError) as e:
            failures.append(f"{name}: {e}")
    for s in doc.get("sizes", []):
        n, m = s["body_length"], s["plaintext_size"]
        expect(plaintext_size(n) == m, f"sizes: plaintext_size({n}) = {plaintext_size(n)}, vector says {m}")
        if m is not None:
            expect(body_length(m) == n, f"sizes: body_length({m}) = {body_length(m)}, vector says {n}")
    if not doc.get("encrypted") or not doc.get("sparse") or not doc.get("plain") or not doc.get("sizes"):
        failures.append("vector file has an empty section")
    return failures


# ---------------------------------------------------------------- commands

def die(code, message):
    print(f"verify_format: {message}", file=sys.stderr)
    sys.exit(code)


def read_input(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        die(EX_NOINPUT, f"cannot read {path}: {e.strerror}")


def cmd_vectors(args):
    try:
        doc = json.loads(read_input(args.file))
    except json.JSONDecodeError as e:
        die(EX_MISMATCH, f"{args.file}: not JSON: {e}")
    failures = check_vectors(doc)
    for f in failures:
        print(f"MISMATCH {f}", file=sys.stderr)
    if failures:
        return EX_MISMATCH
    print(f"{args.file}: all vectors match")
    return EX_OK


def cmd_generate(args):
    with open(args.file, "w") as f:
        json.dump(generate(), f, indent=2)
        f.write("\n")
    return EX_OK


def cmd_decrypt(args):
    account_key = None
    if args.account_key is not None:
        try:
            account_key = bytes.fromhex(args.account_key)
        except ValueError:
            die(EX_USAGE, "--account-key is not hex")
        if len(account_key) != 32:
            die(EX_USAGE, "--account-key must be 32 bytes (64 hex digits)")
    data = read_input(args.file)
    try:
        plain = decode_file(data, account_key)
    except FormatError as e:
        die(EX_DATAERR, f"{args.file}: authentication failed: {e}")
    except KeyError as e:
        die(EX_USAGE, f"{args.file}: {e.args[0]}")
    if args.output:
        try:
            with open(args.output, "wb") as f:
                f.write(plain)
        except OSError as e:
            die(EX_CANTCREAT, f"cannot write {args.output}: {e.strerror}")
    else:
        sys.stdout.buffer.write(plain)
        sys.stdout.buffer.flush()
    return EX_OK


def cmd_info(args):
    with open_or_die(args.file) as f:
        prefix = f.read(MAX_HEADER)
        stored = os.fstat(f.fileno()).st_size
    try:
        header = parse_header(prefix)
    except FormatError as e:
        die(EX_DATAERR, f"{args.file}: {e}")
    info = {"tagged": header is not None, "stored_size": stored}
    if header is None:
        info.update(owner=None, encrypted=False, header_length=0, plaintext_size=stored)
    else:
        info.update(owner=header["owner"], encrypted=header["encrypted"], header_length=header["length"])
        body = stored - header["length"]
        if header["encrypted"]:
            size = plaintext_size(body)
            if size is None:
                die(EX_DATAERR, f"{args.file}: stored size {stored} is not a valid encrypted length")
            info.update(plaintext_size=size, key_id=header["key_id"], file_id=header["file_id"].hex(),
                        sparse=header["sparse"])
        else:
            info.update(plaintext_size=body)
    print(json.dumps(info))
    return EX_OK


def open_or_die(path):
    try:
        return open(path, "rb")
    except OSError as e:
        die(EX_NOINPUT, f"cannot read {path}: {e.strerror}")


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("vectors", help="recompute the test vectors in FILE.json")
    p.add_argument("file")
    p.set_defaults(run=cmd_vectors)
    p = sub.add_parser("generate", help="write the test vectors to FILE.json")
    p.add_argument("file")
    p.set_defaults(run=cmd_generate)
    p = sub.add_parser("decrypt", help="authenticate and decrypt a stored file")
    p.add_argument("file")
    p.add_argument("--account-key", help="the owner's account key, 64 hex digits")
    p.add_argument("-o", "--output", help="write the plaintext here instead of stdout")
    p.set_defaults(run=cmd_decrypt)
    p = sub.add_parser("info", help="header fields and sizes as JSON")
    p.add_argument("file")
    p.set_defaults(run=cmd_info)
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return EX_USAGE if e.code else EX_OK
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
