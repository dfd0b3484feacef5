"""What a bench run builds, and the machine it runs on (Tools/bench/run.py imports these).

build_mamfs: the mamfs that `make install` installs; build_fuse_floor: Tools/bench/fuse_floor.c
with mamfs's /dev/fuse transport; machine: the CPU, memory, disk and peer versions of the report.
"""
import os
import platform
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def build_fuse_floor(root):
    """Tools/bench/fuse_floor.c and its store (fuse_floor_store.c) with mamfs's /dev/fuse
    transport (Sources/CFuseTransport) and AES-GCM route (Sources/CCipher), compiled into `root`
    (once per run); its path."""
    binary = os.path.join(root, "fuse_floor")
    if not os.path.exists(binary):
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "fuse3"], check=True, capture_output=True,
                               text=True).stdout.split()
        transport = os.path.join(REPO, "Sources", "CFuseTransport")
        cipher = os.path.join(REPO, "Sources", "CCipher")
        run(["cc", "-O2", "-Wall", "-o", binary, "-I", os.path.join(transport, "include"), "-I", os.path.join(cipher, "include"),
             os.path.join(HERE, "fuse_floor.c"), os.path.join(HERE, "fuse_floor_store.c"), os.path.join(transport, "transport.c"),
             os.path.join(transport, "busy_poll.c"), os.path.join(cipher, "CCipher.c"), "-pthread"] + flags + ["-lcrypto"])
    return binary


def machine(workdir):
    cpu = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem = int(f.readline().split()[1]) // 1024
    fs = subprocess.run(["df", "--output=source,fstype", workdir], capture_output=True, text=True).stdout.split("\n")[1]
    versions = {}
    for name, cmd in [("gocryptfs", ["gocryptfs", "-version"]), ("securefs", ["securefs", "version"]),
                      ("cryfs", ["cryfs", "--version"]), ("bindfs", ["bindfs", "--version"]),
                      ("e2fsprogs", ["mkfs.ext4", "-V"]), ("fio", ["fio", "--version"]),
                      ("openssl", ["openssl", "version"])]:
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=10,
                                 env=dict(os.environ, CRYFS_NO_UPDATE_CHECK="true"))
            versions[name] = (out.stdout or out.stderr).strip().splitlines()[0]
        except (OSError, IndexError, subprocess.TimeoutExpired):
            versions[name] = "?"
    return dict(cpu=cpu, vcpus=os.cpu_count(), mem_mib=mem, kernel=platform.release(), disk=" ".join(fs.split()),
                versions=versions)


def build_mamfs():
    """The binary `make install` installs (`make build-static`: release, Swift runtime linked in
    statically), built in a scratch directory of its own so a root run leaves the tree alone."""
    scratch = os.environ.get("MAMFS_BENCH_SCRATCH", "/tmp/build-bench-rel")
    run(["make", "-C", REPO, "build-static", f"STATIC_SCRATCH={scratch}"])
    return os.path.join(scratch, "release", "mamfs")
