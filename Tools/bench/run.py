#!/usr/bin/env python3
"""mamfs against its peers, side by side in one run (docs/PERFORMANCE.md).

Mounts, all backed by directories under one work directory on the same disk:
  raw          the backing directory itself (no FUSE)
  ext4-fscrypt ext4's native encryption in an encrypted directory on a loop-mounted image in
               the work directory (ext4_fscrypt.py): the in-kernel limit; skipped, with the
               reason in the report, where the kernel or the container refuses it
  bindfs       plain FUSE passthrough (libfuse 2)
  gocryptfs    encrypting, go-fuse
  securefs     encrypting, libfuse 2
  cryfs        encrypting, libfuse 2, aes-256-gcm, default block size (16 KiB)
  fuse-floor   Tools/bench/fuse_floor.c, built here with cc: a libfuse 3 filesystem in memory that
               keeps no data and answers mamfs's requests with no work behind them (the round
               trips alone: what no FUSE filesystem sending those requests can beat)
  fuse-floor-io fuse-floor -o backing=DIR: the same, and each file's bytes read from and written to
               a backing file as an encrypting overlay lays them out (4 KiB blocks, a 16-byte tag
               each), in a backing tree that mirrors the mount's, with no cipher and no check (the
               disk's part no encrypting overlay avoids)
  fuse-floor-crypt fuse-floor -o backing=DIR,cipher: fuse-floor-io with each block sealed with
               AES-256-GCM (OpenSSL) when written and opened when read (the disk's part and the
               cipher's: what no encrypting overlay that seals 4 KiB blocks with OpenSSL avoids)
  mamfs-enc    mamfs, managed account with encryption (Tools/demo/policy-encrypt.json)
  mamfs-plain  mamfs, unmanaged: new files tagged plain
  mamfs-apps   mamfs-enc with caller-aware enforcement on: the benchmark's programs are the
               policy's managedApps, sendData managedApps, protectionLevel block (the cost of
               deciding every request by the caller's executable)
  mamfs-poll   mamfs-enc mounted with -o busy_poll=US (--busy-poll, default 100): a worker polls /dev/fuse
               that long before it sleeps (what the wakeup of the daemon's CPU costs, docs/PERFORMANCE.md)
  base-enc     with --baseline PATH: mamfs-enc of another mamfs binary (an earlier commit)
  base-plain   with --baseline PATH: mamfs-plain of that binary

Every daemon runs in the foreground under this script (its PID is known, so its CPU time and
peak RSS come from /proc/PID) and is pinned with taskset, once per placement
(docs/PERFORMANCE.md): "same" = daemon and client on CPU 0, "split" = client CPU 0, daemon CPU 1.
Rounds are interleaved (round 1: every placement and mount, round 2: the same in reverse order,
so no mount always follows the same neighbour; round 3 as round 1 ...). Workloads:
  1 seq       dd bs=1M conv=fsync write, drop caches, dd read, and with backing cached (MB/s)
  2 small     tar x of N files of 1-16 KiB in D directories, ls -lR, cat all, rm -rf (s)
  3 fio       4 KiB randread and randwrite, invalidate=1, psync          (IOPS)
  4 smallw    dd bs=512 count=131072 (64 MiB of 512-byte writes)         (MB/s)
  5 cli       mamfs encrypt/decrypt of a file on /dev/shm vs cp and openssl enc -aes-256-ctr
              of the same file, each free to use every CPU (mamfs spreads the blocks over
              them; cp and openssl enc use one), and openssl speed -evp aes-256-gcm on CPU 0
              (one core's crypto limit), also with -aead at 4 KiB (one whole message per
              block, as the format seals them)
  6 daemon    daemon CPU seconds (utime+stime) and VmHWM over workloads 1-3, per round

Outputs bench-results/results.json, report.md and chart.png (report.py). Every mount is
unmounted and every daemon stopped on exit, also on failure or Ctrl-C.

usage: Tools/bench/run.py [--quick] [--rounds N] [--only NAME[,NAME]] [--mamfs PATH] [--baseline PATH]
                          [--workloads seq,small,fio,smallw,cli] [--placements same,split]
"""
import argparse
import datetime
import json
import os
import random
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

from bench_setup import HERE, REPO, build_fuse_floor, build_mamfs, machine, run  # noqa: F401  (build_fuse_floor: for the tests)
from ext4_fscrypt import EncryptedExt4, Unavailable

ACCOUNT_ID = "8c7f3e1a-0000-4000-8000-000000000001"
UPN = "bench@contoso.com"
MOUNTS = ["raw", "ext4-fscrypt", "bindfs", "gocryptfs", "securefs", "cryfs", "fuse-floor", "fuse-floor-io",
          "fuse-floor-crypt", "mamfs-enc", "mamfs-plain", "mamfs-apps", "mamfs-poll"]
# The programs a mount needs besides those every run needs (taskset, openssl, dd, tar).
MOUNT_TOOLS = {"ext4-fscrypt": ["losetup", "mkfs.ext4", "mount", "umount"], "bindfs": ["bindfs"],
               "gocryptfs": ["gocryptfs"], "securefs": ["securefs"], "cryfs": ["cryfs"], "fuse-floor": ["cc", "pkg-config"],
               "fuse-floor-io": ["cc", "pkg-config"], "fuse-floor-crypt": ["cc", "pkg-config"]}
BASELINE_MOUNTS = {"base-enc": "mamfs-enc", "base-plain": "mamfs-plain"}  # mount -> the mamfs kind it runs
# The programs the workloads run on the mounts: mamfs-apps lists them as its managed apps.
BENCH_PROGRAMS = ["tar", "ls", "cat", "rm", "find", "sh", "dd", "fio"]
PLACEMENTS = {"same": 0, "split": 1}  # placement -> daemon CPU; the client is always on CPU 0
CLIENT = ["taskset", "-c", "0"]
# The CLI workload's file-to-file commands may run on every CPU: a whole-file encrypt or decrypt
# is one command whose wall clock is what a user waits for, and cp (its reference) is as free.
CLI_CPUS = ["taskset", "-c", f"0-{os.cpu_count() - 1}"]
PASSPHRASE = "benchmark-passphrase"
# cryfs derives its key with scrypt when it mounts, which takes seconds of CPU.
MOUNT_TIMEOUT = 120

FULL = dict(rounds=3, seq_mib=512, files=5000, dirs=100, fio_mib=256, fio_seconds=20,
            smallw_count=131072, cli_mib=256, cli_reps=5)
QUICK = dict(rounds=2, seq_mib=128, files=1000, dirs=20, fio_mib=64, fio_seconds=5,
             smallw_count=32768, cli_mib=128, cli_reps=3)


def log(*args):
    print(time.strftime("%H:%M:%S"), *args, file=sys.stderr, flush=True)


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def cpu_counters():
    """The VM's CPU time so far, all CPUs, in clock ticks: (total, steal). Steal is the time the
    host ran something else while a vCPU of this machine was ready to run (/proc/stat)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return [sum(fields[:8]), fields[7] if len(fields) > 7 else 0]


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def timed(cmd, **kw):
    start = time.perf_counter()
    run(cmd, **kw)
    return time.perf_counter() - start


def proc_cpu_seconds(pid):
    """utime+stime of the whole process (all threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_status_kib(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return None


def is_mounted(path):
    path = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == path for line in f)


class Mount:
    """One filesystem under test at one placement."""

    def __init__(self, name, placement, root, mamfs, cfg=FULL):
        self.name, self.placement, self.mamfs, self.cfg = name, placement, mamfs, cfg
        self.cpu = PLACEMENTS[placement]
        self.base = os.path.join(root, placement, name)
        self.backing = os.path.join(self.base, "backing")
        self.mountpoint = self.backing if name == "raw" else os.path.join(self.base, "mnt")
        self.kernel_fs = None
        if name == "ext4-fscrypt":
            self.kernel_fs = EncryptedExt4(self.base, image_mib(cfg))
            self.mountpoint = self.kernel_fs.directory
        self.process = None
        self.log_file = None

    @property
    def pid(self):
        return self.process.pid if self.process else None

    def start(self):
        """Mounts; raises Unavailable (with nothing left set up) if the system refuses the peer."""
        if self.kernel_fs:
            os.makedirs(self.base, exist_ok=True)
            self.kernel_fs.setup()
            return
        os.makedirs(self.backing, exist_ok=True)
        if self.name == "raw":
            return
        os.makedirs(self.mountpoint, exist_ok=True)
        stdin = None
        pin = ["taskset", "-c", str(self.cpu)]
        passfile = os.path.join(self.base, "pass")
        with open(passfile, "w") as f:
            f.write(PASSPHRASE + "\n")
        if self.name == "bindfs":
            cmd = pin + ["bindfs", "-f", "--no-allow-other", self.backing, self.mountpoint]
        elif self.name == "gocryptfs":
            run(["gocryptfs", "-q", "-init", "-passfile", passfile, self.backing], stdout=subprocess.DEVNULL)
            cmd = pin + ["gocryptfs", "-q", "-fg", "-passfile", passfile, self.backing, self.mountpoint]
        elif self.name == "securefs":
            run(["securefs", "create", "--pass", PASSPHRASE, "--pbkdf", "pkcs5-pbkdf2-hmac-sha256",
                 "-r", "1000", self.backing], stdout=subprocess.DEVNULL)
            cmd = pin + ["securefs", "mount", "--pass", PASSPHRASE, self.backing, self.mountpoint]
        elif self.name in ("fuse-floor", "fuse-floor-io", "fuse-floor-crypt"):
            store = {"fuse-floor-io": ["-o", f"backing={self.backing}"],
                     "fuse-floor-crypt": ["-o", f"backing={self.backing},cipher"]}.get(self.name, [])
            cmd = pin + [build_fuse_floor(os.path.dirname(os.path.dirname(self.base))), self.mountpoint, "-f"] + store
        elif self.name == "cryfs":
            # Creates the filesystem on the first mount; the password is read from stdin.
            cmd = pin + ["cryfs", "-f", "--cipher", "aes-256-gcm", self.backing, self.mountpoint]
            stdin = PASSPHRASE + "\n"
        else:
            state = os.path.join(self.base, "state")
            run([self.mamfs, "init", "--state", state], stdout=subprocess.DEVNULL)
            policy = os.path.join(REPO, "Tools/demo/policy-encrypt.json")
            if self.name == "mamfs-apps":
                policy = self.write_managed_apps_policy(policy)
            run([self.mamfs, "enroll", ACCOUNT_ID, "--upn", UPN, "--policy", policy, "--state", state],
                stdout=subprocess.DEVNULL)
            kind = BASELINE_MOUNTS.get(self.name, self.name)
            account = ["--account", UPN] if kind in ("mamfs-enc", "mamfs-apps", "mamfs-poll") else []
            options = ["-o", f"busy_poll={self.cfg['busy_poll_us']}"] if kind == "mamfs-poll" else []
            cmd = pin + [self.mamfs, "mount", self.backing, self.mountpoint, "-f", "--state", state] + account + options
        self.log_file = open(os.path.join(self.base, "daemon.log"), "w")
        # Own process group: a Ctrl-C at the terminal reaches this script, which unmounts first.
        self.process = subprocess.Popen(cmd, stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
                                        stdout=self.log_file, stderr=subprocess.STDOUT, start_new_session=True,
                                        env=self.daemon_environment())
        if stdin is not None:
            self.process.stdin.write(stdin.encode())
            self.process.stdin.close()
        deadline = time.time() + MOUNT_TIMEOUT
        while not is_mounted(self.mountpoint):
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.process.returncode}; see {self.log_file.name}")
            if time.time() > deadline:
                raise RuntimeError(f"{self.name} did not mount within {MOUNT_TIMEOUT} s")
            time.sleep(0.05)

    def daemon_environment(self):
        if self.name != "cryfs":
            return None
        # No questions, no update check over the network, and the state cryfs keeps about the
        # filesystems it has seen in the work directory rather than in root's home.
        return dict(os.environ, CRYFS_FRONTEND="noninteractive", CRYFS_NO_UPDATE_CHECK="true",
                    CRYFS_LOCAL_STATE_DIR=os.path.join(self.base, "cryfs-state"))

    def setup_description(self):
        return self.kernel_fs.describe() if self.kernel_fs else None

    def write_managed_apps_policy(self, base_policy):
        """The demo's encrypting policy plus managedApps = the resolved executables of the
        benchmark's programs and this interpreter, sendData managedApps, protectionLevel block,
        and the mountpoint as the OneDriveForBusiness location."""
        with open(base_policy) as f:
            policy = json.load(f)
        programs = {os.path.realpath(shutil.which(p)) for p in BENCH_PROGRAMS if shutil.which(p)}
        programs.add(os.path.realpath(sys.executable))
        # The mount is where the account's files belong (a save location the policy allows);
        # everything else on the machine stays the local drive.
        policy.update(managedApps=[{"path": p} for p in sorted(programs)], sendData="managedApps",
                      protectionLevel="block", locations={"OneDriveForBusiness": [os.path.realpath(self.mountpoint)]})
        path = os.path.join(self.base, "policy-apps.json")
        with open(path, "w") as f:
            json.dump(policy, f, indent=2)
        return path

    def stop(self):
        if self.kernel_fs:
            self.kernel_fs.teardown()
            return
        if self.name == "raw" or self.process is None:
            return
        if is_mounted(self.mountpoint):
            if subprocess.run(["fusermount3", "-u", self.mountpoint], stderr=subprocess.DEVNULL).returncode != 0:
                subprocess.run(["fusermount3", "-uz", self.mountpoint], stderr=subprocess.DEVNULL)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
        if self.log_file:
            self.log_file.close()

    def daemon_sample(self):
        if self.pid is None:
            return None
        return dict(cpu=proc_cpu_seconds(self.pid), hwm_kib=proc_status_kib(self.pid, "VmHWM"),
                    rss_kib=proc_status_kib(self.pid, "VmRSS"), threads=proc_status_kib(self.pid, "Threads"))


def image_mib(cfg):
    """The ext4-fscrypt image size: twice the largest file or tree one workload writes (each
    removes its files before the next starts), plus room for ext4's journal and inode tables."""
    largest = max(cfg["seq_mib"], cfg["fio_mib"], cfg["smallw_count"] * 512 >> 20, cfg["files"] * 20 // 1024)
    return 2 * largest + 256


def make_tree_tarball(path, files, dirs):
    """A reproducible tree of `files` files of 1-16 KiB (random bytes) in `dirs` directories."""
    rng = random.Random(6)
    with tempfile.TemporaryDirectory(dir=os.path.dirname(path)) as tmp:
        top = os.path.join(tmp, "tree")
        for d in range(dirs):
            os.makedirs(os.path.join(top, f"d{d:03}"))
        for i in range(files):
            with open(os.path.join(top, f"d{i % dirs:03}", f"f{i:05}.bin"), "wb") as f:
                f.write(rng.randbytes(rng.randint(1024, 16384)))
        with tarfile.open(path, "w") as tar:
            tar.add(top, arcname="tree")


def workload_seq(m, cfg):
    target = os.path.join(m.mountpoint, "seq.dat")
    drop_caches()
    t = timed(CLIENT + ["dd", "if=/dev/zero", f"of={target}", "bs=1M", f"count={cfg['seq_mib']}",
                        "conv=fsync", "status=none"])
    write = cfg["seq_mib"] * 1.048576 / t
    drop_caches()
    t = timed(CLIENT + ["dd", f"if={target}", "of=/dev/null", "bs=1M", "status=none"])
    read = cfg["seq_mib"] * 1.048576 / t
    drop_caches()
    read_backing_files(m)
    cached = cfg["seq_mib"] * 1.048576 / timed(CLIENT + ["dd", f"if={target}", "of=/dev/null", "bs=1M", "status=none"])
    os.unlink(target)
    return {"seq_write_MBps": write, "seq_read_MBps": read, "seq_read_cached_MBps": cached}


def read_backing_files(m):
    """Reads the mount's files on the disk (below its base, on that filesystem) into the cache."""
    run(["find", m.base, "-xdev", "-type", "f", "-exec", "cat", "{}", "+"], stdout=subprocess.DEVNULL)


def workload_small(m, cfg, tarball):
    target = os.path.join(m.mountpoint, "small")
    os.mkdir(target)
    drop_caches()
    extract = timed(CLIENT + ["tar", "-xf", tarball, "-C", target])
    drop_caches()
    ls = timed(CLIENT + ["ls", "-lR", target], stdout=subprocess.DEVNULL)
    drop_caches()
    cat = timed(CLIENT + ["sh", "-c", 'find "$1" -type f -exec cat {} + > /dev/null', "-", target])
    drop_caches()
    rm = timed(CLIENT + ["rm", "-rf", target])
    return {"small_extract_s": extract, "small_ls_s": ls, "small_cat_s": cat, "small_rm_s": rm}


def fio_iops(target, rw, cfg):
    out = subprocess.run(CLIENT + ["fio", "--name=bench", f"--filename={target}", f"--size={cfg['fio_mib']}m",
                                   "--bs=4k", f"--rw={rw}", "--ioengine=psync", "--invalidate=1",
                                   "--fallocate=none", "--time_based", f"--runtime={cfg['fio_seconds']}",
                                   "--randseed=6", "--output-format=json"],
                         check=True, capture_output=True, text=True).stdout
    job = json.loads(out[out.index("{"):])["jobs"][0]
    return job["read" if rw == "randread" else "write"]["iops"]


def workload_fio(m, cfg):
    target = os.path.join(m.mountpoint, "fio.dat")
    # Lay the file out untimed, with real (not sparse) contents on every filesystem.
    run(CLIENT + ["dd", "if=/dev/urandom", f"of={target}", "bs=1M", f"count={cfg['fio_mib']}", "conv=fsync",
                  "status=none"])
    drop_caches()
    r = fio_iops(target, "randread", cfg)
    w = fio_iops(target, "randwrite", cfg)
    os.unlink(target)
    return {"fio_randread_iops": r, "fio_randwrite_iops": w}


def workload_smallw(m, cfg):
    target = os.path.join(m.mountpoint, "smallw.dat")
    t = timed(CLIENT + ["dd", "if=/dev/zero", f"of={target}", "bs=512", f"count={cfg['smallw_count']}", "status=none"])
    os.unlink(target)
    return {"smallw_MBps": cfg["smallw_count"] * 512 / 1e6 / t}


def cpu_timed(cmd):
    """Wall seconds, CPU seconds (user+sys) and user seconds of one command. openssl speed
    reports user time, so user time is the like-for-like figure for the crypto path; sys time
    is the file I/O, which openssl speed does not do."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    run(cmd, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    user = after.ru_utime - before.ru_utime
    return wall, user + (after.ru_stime - before.ru_stime), user


def openssl_speed(block, aead=False):
    """MB/s of `openssl speed -evp aes-256-gcm` at `block` bytes on CPU 0. Without `aead` it times
    EVP updates of one long message; with it (-aead), whole messages as TLS seals them (IV, AAD,
    the block, tag): what the format does for each 4 KiB block."""
    out = subprocess.run(CLIENT + ["openssl", "speed"] + (["-aead"] if aead else [])
                         + ["-evp", "aes-256-gcm", "-bytes", str(block), "-seconds", "3"],
                         check=True, capture_output=True, text=True).stdout
    line = [l for l in out.splitlines() if l.startswith("AES-256-GCM")][-1]
    return float(line.split()[-1].rstrip("k")) * 1000 / 1e6  # MB/s (openssl's 'k' = 1000 bytes)


def workload_cli(mamfs, cfg, shm):
    state = os.path.join(shm, "state")
    if not os.path.isdir(state):
        run([mamfs, "init", "--state", state], stdout=subprocess.DEVNULL)
        run([mamfs, "enroll", ACCOUNT_ID, "--upn", UPN, "--policy",
             os.path.join(REPO, "Tools/demo/policy-encrypt.json"), "--state", state], stdout=subprocess.DEVNULL)
        with open(os.path.join(shm, "plain"), "wb") as f:
            for _ in range(cfg["cli_mib"]):
                f.write(os.urandom(1 << 20))
    plain, enc, dec, ctr, copy = (os.path.join(shm, n) for n in ("plain", "enc", "dec", "ctr", "copy"))
    mb = cfg["cli_mib"] * 1.048576
    # Each command runs cli_reps times, interleaved with the others (cp, encrypt, decrypt, openssl
    # enc), so that the host's drift within a round reaches all of them alike. Wall MB/s is the
    # median over the repetitions; CPU and user MB/s are over their sums, since the kernel samples
    # the user/system split at the tick and one 256 MiB run takes only a few ticks of user time.
    # Every repetition's seconds are kept in "reps".
    commands = [
        ("copy", ["cp", plain, copy]),  # the file-to-file limit without any cipher
        ("cli_encrypt", [mamfs, "encrypt", plain, "--account", UPN, "-o", enc, "--state", state]),
        ("cli_decrypt", [mamfs, "decrypt", enc, "-o", dec, "--state", state]),
        ("openssl_ctr", ["openssl", "enc", "-aes-256-ctr", "-K", "00" * 32, "-iv", "00" * 16, "-in", plain, "-out", ctr]),
    ]
    reps = []
    for _ in range(cfg["cli_reps"]):
        for p in (enc, dec, ctr, copy):
            if os.path.exists(p):
                os.unlink(p)
        rep = {}
        for name, cmd in commands:
            rep[name] = dict(zip(("wall_s", "cpu_s", "user_s"), cpu_timed(CLI_CPUS + cmd)))
            if name == "cli_decrypt" and not filecmp_equal(plain, dec):
                raise RuntimeError("mamfs decrypt did not give back the plaintext")
        reps.append(rep)
    for p in (enc, dec, ctr, copy):
        os.unlink(p)
    res = {}
    for name, _ in commands:
        walls = [r[name]["wall_s"] for r in reps]
        res[f"{name}_MBps"] = statistics.median(mb / w for w in walls)
        res[f"{name}_cpu_MBps"] = mb * len(reps) / sum(r[name]["cpu_s"] for r in reps)
        user = sum(r[name]["user_s"] for r in reps)
        if user > 0:
            res[f"{name}_user_MBps"] = mb * len(reps) / user
    res["reps"] = reps
    res["openssl_gcm16k_MBps"] = openssl_speed(16384)
    res["openssl_gcm4k_MBps"] = openssl_speed(4096)
    res["openssl_gcm4k_aead_MBps"] = openssl_speed(4096, aead=True)
    return res


def filecmp_equal(a, b):
    return subprocess.run(["cmp", "-s", a, b]).returncode == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds, shorter fio, smaller sizes")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--only", help="comma-separated mounts: " + ",".join(MOUNTS))
    ap.add_argument("--placements", default="same,split")
    ap.add_argument("--workloads", default="seq,small,fio,smallw,cli")
    ap.add_argument("--mamfs", help="release mamfs binary (default: build it)")
    ap.add_argument("--baseline", help="a second release mamfs binary (e.g. of an earlier commit), "
                    "run as base-enc and base-plain beside the others, and in the CLI workload")
    ap.add_argument("--busy-poll", type=int, default=100, metavar="US",
                    help="mamfs-poll's -o busy_poll (microseconds, 1-1000; default 100)")
    ap.add_argument("--out", default=os.path.join(REPO, "bench-results"))
    ap.add_argument("--workdir", default="/var/tmp", help="where the backing directories go (one disk)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run.py needs root (drop_caches, FUSE mounts)")
    cfg = dict(QUICK if args.quick else FULL)
    if args.rounds:
        cfg["rounds"] = args.rounds
    if not 1 <= args.busy_poll <= 1000:
        sys.exit("--busy-poll: expected microseconds from 1 to 1000")
    cfg["busy_poll_us"] = args.busy_poll
    if not os.path.isdir(args.workdir):
        sys.exit(f"--workdir {args.workdir}: not a directory")
    known = MOUNTS + (list(BASELINE_MOUNTS) if args.baseline else [])
    mounts = args.only.split(",") if args.only else known
    unknown = set(mounts) - set(known)
    if unknown:
        sys.exit(f"unknown mount(s) {','.join(sorted(unknown))}; choose from {','.join(known)}")
    placements = args.placements.split(",")
    workloads = args.workloads.split(",")
    tools = ["taskset", "openssl", "dd", "tar"] + (["fio"] if "fio" in workloads else [])
    for tool in tools + sorted({t for name in mounts for t in MOUNT_TOOLS.get(name, [])}):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is not installed (make bench installs the Debian packages)")
    mamfs = os.path.abspath(args.mamfs) if args.mamfs else build_mamfs()
    baseline = os.path.abspath(args.baseline) if args.baseline else None
    if baseline and not os.access(baseline, os.X_OK):
        sys.exit(f"--baseline {args.baseline}: not an executable file")
    os.makedirs(args.out, exist_ok=True)

    host = machine(args.workdir)
    root = tempfile.mkdtemp(prefix="mamfs-bench-", dir=args.workdir)
    shm = tempfile.mkdtemp(prefix="mamfs-bench-cli-", dir="/dev/shm")
    active = []

    def teardown(*_):
        for m in reversed(active):
            try:
                m.stop()
            except Exception as e:  # keep tearing down the others
                log(f"teardown {m.name}/{m.placement}: {e}")
        active.clear()
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(shm, ignore_errors=True)

    def on_signal(signum, _frame):
        teardown()
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    results = dict(started=datetime.datetime.now().isoformat(timespec="seconds"), quick=args.quick, config=cfg,
                   machine=host, mamfs=mamfs, baseline=baseline, mounts=mounts, placements=placements, samples=[],
                   daemon=[], cli=[], cli_base=[], loadavg=[], skipped=[], setup=[])
    try:
        tarball = os.path.join(root, "tree.tar")
        if "small" in workloads:
            make_tree_tarball(tarball, cfg["files"], cfg["dirs"])
        for placement in placements:
            for name in mounts:
                m = Mount(name, placement, root, baseline if name in BASELINE_MOUNTS else mamfs, cfg)
                active.append(m)
                try:
                    m.start()
                except Unavailable as e:
                    active.remove(m)
                    results["skipped"].append(dict(mount=name, placement=placement, reason=str(e)))
                    log(f"skipped {name}/{placement}: {e}")
                    continue
                if m.setup_description():
                    results["setup"].append(dict(mount=name, placement=placement, setup=m.setup_description()))
        log(f"mounted {len(active)} filesystems under {root}; load {loadavg()}")
        for rnd in range(1, cfg["rounds"] + 1):
            results["loadavg"].append(dict(round=rnd, start=loadavg(), cpu_start=cpu_counters()))
            for m in (active if rnd % 2 == 1 else active[::-1]):
                before = m.daemon_sample()
                sample = dict(round=rnd, placement=m.placement, mount=m.name, loadavg=loadavg())
                if "seq" in workloads:
                    sample.update(workload_seq(m, cfg))
                if "small" in workloads:
                    sample.update(workload_small(m, cfg, tarball))
                if "fio" in workloads:
                    sample.update(workload_fio(m, cfg))
                after = m.daemon_sample()
                if before and after:
                    results["daemon"].append(dict(round=rnd, placement=m.placement, mount=m.name,
                                                  cpu_s=after["cpu"] - before["cpu"], hwm_kib=after["hwm_kib"],
                                                  rss_kib=after["rss_kib"], threads=after["threads"]))
                if "smallw" in workloads:
                    sample.update(workload_smallw(m, cfg))
                results["samples"].append(sample)
                daemon = results["daemon"][-1] if before and after else None
                log(f"round {rnd} {m.placement:5} {m.name:12} " +
                    " ".join(f"{k}={v:.1f}" for k, v in sample.items() if isinstance(v, float)) +
                    (f" daemon_rss={daemon['rss_kib'] // 1024}MiB threads={daemon['threads']}" if daemon else ""))
            if "cli" in workloads:
                c = workload_cli(mamfs, cfg, shm)
                c.update(round=rnd, loadavg=loadavg())
                results["cli"].append(c)
                log(f"round {rnd} cli " + " ".join(f"{k}={v:.0f}" for k, v in c.items() if isinstance(v, float)))
                if baseline:
                    b = workload_cli(baseline, cfg, shm)
                    b.update(round=rnd, loadavg=loadavg())
                    results["cli_base"].append(b)
                    log(f"round {rnd} cli (baseline) " + " ".join(f"{k}={v:.0f}" for k, v in b.items() if isinstance(v, float)))
            results["loadavg"][-1].update(end=loadavg(), cpu_end=cpu_counters())
    finally:
        teardown()
        results["finished"] = datetime.datetime.now().isoformat(timespec="seconds")
        with open(os.path.join(args.out, "results.json"), "w") as f:
            json.dump(results, f, indent=1)
    subprocess.run([sys.executable, os.path.join(HERE, "report.py"), os.path.join(args.out, "results.json")], check=True)
    log(f"wrote {args.out}/report.md and chart.png")


if __name__ == "__main__":
    main()
