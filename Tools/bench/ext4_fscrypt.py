"""ext4 with native encryption (fscrypt) on a loop-mounted image: the in-kernel peer of run.py.

A sparse image file, `losetup --direct-io=on` (so the image's pages are not cached twice),
`mkfs.ext4 -O encrypt` with the inode tables and journal written at mkfs time (no lazy init
thread writing in the background while a workload runs), mounted with ext4's defaults. The
encrypted directory gets a policy v2 with a fresh random 64-byte key added with
FS_IOC_ADD_ENCRYPTION_KEY: contents AES-256-XTS, names AES-256-CTS, 32-byte name padding
(the fscrypt tool's defaults). The ioctls are made here rather than with Debian's fscrypt
tool, which needs /etc/fscrypt.conf and its own metadata on the filesystems. Teardown removes
the key, unmounts, detaches the loop device and deletes the image.
"""
import fcntl
import os
import struct
import subprocess
import sys


def _ioc(direction, number, size):
    return (direction << 30) | (size << 16) | (ord("f") << 8) | number


_READ, _WRITE = 2, 1
# struct fscrypt_add_key_arg (80 bytes + raw key), struct fscrypt_policy_v1 (12 bytes: the
# ioctl's declared size; a v2 policy is passed through it), struct fscrypt_remove_key_arg (64 bytes).
FS_IOC_ADD_ENCRYPTION_KEY = _ioc(_READ | _WRITE, 23, 80)
FS_IOC_SET_ENCRYPTION_POLICY = _ioc(_READ, 19, 12)
FS_IOC_REMOVE_ENCRYPTION_KEY = _ioc(_READ | _WRITE, 24, 64)
KEY_SPEC_TYPE_IDENTIFIER = 2
POLICY_V2 = 2
MODE_AES_256_XTS, MODE_AES_256_CTS = 1, 4
POLICY_FLAGS_PAD_32 = 0x03
KEY_BYTES = 64
REMOVAL_STATUS_FILES_BUSY = 0x1


class Unavailable(Exception):
    """The kernel or the container refuses a step of the setup; the message names the step."""


class EncryptedExt4:
    """One encrypted directory on its own loop-mounted ext4 image under `base`."""

    def __init__(self, base, size_mib):
        self.image = os.path.join(base, "ext4.img")
        self.root = os.path.join(base, "fs")
        self.directory = os.path.join(self.root, "enc")
        self.size_mib = size_mib
        self.device = None
        self.mounted = False
        self.identifier = None

    def setup(self):
        """Builds it all; raises Unavailable (after undoing what was done) if a step is refused."""
        try:
            if not os.path.exists("/sys/fs/ext4/features/encryption"):
                raise Unavailable("the kernel's ext4 has no encryption support (no /sys/fs/ext4/features/encryption)")
            with open(self.image, "wb") as f:
                f.truncate(self.size_mib << 20)
            self.device = self._run(["losetup", "--find", "--show", "--direct-io=on", self.image]).strip()
            self._run(["mkfs.ext4", "-q", "-F", "-O", "encrypt", "-m", "0",
                       "-E", "lazy_itable_init=0,lazy_journal_init=0", self.device])
            os.makedirs(self.root, exist_ok=True)
            self._run(["mount", "-t", "ext4", self.device, self.root])
            self.mounted = True
            try:
                self.identifier = self._add_key()
            except OSError as e:
                raise Unavailable(f"FS_IOC_ADD_ENCRYPTION_KEY on {self.root}: {e.strerror} (errno {e.errno})") from None
            os.mkdir(self.directory)
            try:
                self._set_policy()
            except OSError as e:
                raise Unavailable(f"FS_IOC_SET_ENCRYPTION_POLICY on {self.directory}: {e.strerror} (errno {e.errno})") from None
        except BaseException:
            try:
                self.teardown()
            except RuntimeError as e:
                print(f"ext4-fscrypt teardown after a failed setup: {e}", file=sys.stderr)
            raise

    def describe(self):
        direct = "?"
        if self.device:
            try:
                with open(f"/sys/block/{os.path.basename(self.device)}/loop/dio") as f:
                    direct = "on" if f.read().strip() == "1" else "off"
            except OSError:
                pass
        return (f"{self.size_mib} MiB sparse image on {self.device} (direct-io {direct}), mkfs.ext4 -O encrypt, "
                "policy v2 AES-256-XTS / AES-256-CTS, random 64-byte key")

    def teardown(self):
        """Removes the key, unmounts, detaches the loop device, deletes the image; every step is
        tried even if an earlier one failed. Raises RuntimeError naming the steps that failed."""
        errors = []
        if self.identifier is not None:
            try:
                self._remove_key()
            except OSError as e:
                errors.append(f"FS_IOC_REMOVE_ENCRYPTION_KEY: {e.strerror}")
            self.identifier = None
        if self.mounted:
            if subprocess.run(["umount", self.root], capture_output=True).returncode != 0:
                errors.append(f"umount {self.root} failed; lazily unmounted")
                subprocess.run(["umount", "-l", self.root], capture_output=True)
            self.mounted = False
        if self.device:
            out = subprocess.run(["losetup", "-d", self.device], capture_output=True, text=True)
            if out.returncode != 0:
                errors.append(f"losetup -d {self.device}: {out.stderr.strip()}")
            self.device = None
        try:
            os.unlink(self.image)
        except FileNotFoundError:
            pass
        if errors:
            raise RuntimeError("; ".join(errors))

    @staticmethod
    def _run(cmd):
        try:
            out = subprocess.run(cmd, capture_output=True, text=True)
        except OSError as e:
            raise Unavailable(f"{cmd[0]}: {e.strerror}") from None
        if out.returncode != 0:
            raise Unavailable(f"{' '.join(cmd)}: {out.stderr.strip() or f'exit status {out.returncode}'}")
        return out.stdout

    @staticmethod
    def _ioctl(path, request, arg):
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.ioctl(fd, request, arg)
        finally:
            os.close(fd)

    def _add_key(self):
        """Adds a fresh random key to the filesystem's keyring; returns its 16-byte identifier."""
        arg = bytearray(80 + KEY_BYTES)
        struct.pack_into("=II32sII", arg, 0, KEY_SPEC_TYPE_IDENTIFIER, 0, b"", KEY_BYTES, 0)
        try:
            with open("/dev/urandom", "rb", buffering=0) as random:
                if random.readinto(memoryview(arg)[80:]) != KEY_BYTES:
                    raise OSError(0, "short read from /dev/urandom")
            self._ioctl(self.root, FS_IOC_ADD_ENCRYPTION_KEY, arg)
            return bytes(arg[8:24])
        finally:
            arg[80:] = bytes(KEY_BYTES)

    def _set_policy(self):
        policy = struct.pack("=BBBB4x16s", POLICY_V2, MODE_AES_256_XTS, MODE_AES_256_CTS, POLICY_FLAGS_PAD_32,
                             self.identifier)
        self._ioctl(self.directory, FS_IOC_SET_ENCRYPTION_POLICY, policy)

    def _remove_key(self):
        arg = bytearray(struct.pack("=II16s16xI20x", KEY_SPEC_TYPE_IDENTIFIER, 0, self.identifier, 0))
        self._ioctl(self.root, FS_IOC_REMOVE_ENCRYPTION_KEY, arg)
        if struct.unpack_from("=I", arg, 40)[0] & REMOVAL_STATUS_FILES_BUSY:
            raise OSError(0, "files still in use (the key stays until they are closed)")
