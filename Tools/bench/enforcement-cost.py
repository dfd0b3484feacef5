#!/usr/bin/env python3
"""The cost of caller-aware enforcement, measured three ways on two mounts side by side.

Two managed (encrypting) mounts with the demo policy; on `apps` the policy also names the
workload's programs as its managedApps, with sendData managedApps, protectionLevel block and
the mountpoint as the OneDriveForBusiness location (as the benchmark's mamfs-apps), so every
open and create is decided by the caller's executable. Each round runs, on both mounts in
alternating order, with caches dropped before each phase: tar x of N files, ls -lR, cat of
every file, mv of their directory (one rename, for which `apps` walks the tree and reads
each file's header to ask where its work files land), rm -rf.

  --mode time       (default) wall seconds and daemon CPU ticks per phase: medians and minima
                    over the rounds, and apps/enc ratios of both
  --mode syscalls   strace -c -f of each daemon per phase (one round): the syscalls by count
  --mode callgrind  each daemon under valgrind --tool=callgrind (one round): the daemon's
                    user-space instructions over all phases (repeatable whatever else runs)

usage: Tools/bench/enforcement-cost.py PATH/TO/mamfs(release) [--mode M] [--rounds R] [--files N]
Needs root (drop_caches, FUSE). Leaves nothing mounted; its files are under a mktemp directory.
"""
import argparse
import io
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
UPN = "bench@contoso.com"
ACCOUNT = "8c7f3e1a-0000-4000-8000-0000000000b1"
PROGRAMS = ["tar", "ls", "cat", "mv", "rm", "find", "sh", "taskset"]
PHASES = ["tar", "ls", "cat", "mv", "rm"]


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def cpu_ticks(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def make_tarball(path, files):
    rnd = random.Random(1)
    with tarfile.open(path, "w") as tar:
        for i in range(files):
            data = rnd.randbytes(rnd.randint(1024, 16384))
            info = tarfile.TarInfo(f"d{i % 60}/f{i}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


class Mount:
    def __init__(self, mamfs, base, name, wrapper):
        self.name, self.base = name, os.path.join(base, name)
        self.backing, self.mountpoint = self.base + "/backing", self.base + "/mnt"
        os.makedirs(self.backing)
        os.makedirs(self.mountpoint)
        state = self.base + "/state"
        keyfile = self.base + "/pass"
        with open(keyfile, "w") as f:
            f.write("enforcement-cost-passphrase\n")
        env = dict(os.environ, MAMFS_PASSPHRASE_FILE=keyfile)
        run([mamfs, "init", "--state", state], stdout=subprocess.DEVNULL, env=env)
        with open(os.path.join(REPO, "Tools/demo/policy-encrypt.json")) as f:
            policy = json.load(f)
        if name == "apps":
            programs = {os.path.realpath(shutil.which(p)) for p in PROGRAMS if shutil.which(p)}
            policy.update(managedApps=[{"path": p} for p in sorted(programs)], sendData="managedApps",
                          protectionLevel="block",
                          locations={"OneDriveForBusiness": [os.path.realpath(self.mountpoint)]})
        with open(self.base + "/policy.json", "w") as f:
            json.dump(policy, f)
        run([mamfs, "enroll", ACCOUNT, "--upn", UPN, "--policy", self.base + "/policy.json", "--state", state],
            stdout=subprocess.DEVNULL, env=env)
        prefix = wrapper(self) if wrapper else ["taskset", "-c", "1"]
        self.log = open(self.base + "/daemon.log", "w")
        self.process = subprocess.Popen(prefix + [mamfs, "mount", self.backing, self.mountpoint, "-f",
                                                  "--state", state, "--account", UPN],
                                        stdout=self.log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        deadline = time.time() + 120
        while not self.mounted():
            if self.process.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"{name} did not mount; see {self.log.name}")
            time.sleep(0.05)

    def mounted(self):
        with open("/proc/mounts") as f:
            return any(line.split()[1] == self.mountpoint for line in f)

    def stop(self):
        if self.mounted():
            if subprocess.run(["fusermount3", "-u", self.mountpoint], stderr=subprocess.DEVNULL).returncode != 0:
                subprocess.run(["fusermount3", "-uz", self.mountpoint], stderr=subprocess.DEVNULL)
        try:
            self.process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def phase_commands(mount, tarball):
    target = mount.mountpoint + "/small"
    return [("tar", ["tar", "-xf", tarball, "-C", target]), ("ls", ["ls", "-lR", target]),
            ("cat", ["sh", "-c", 'find "$1" -type f -exec cat {} + > /dev/null', "-", target]),
            ("mv", ["mv", target, target + ".moved"]), ("rm", ["rm", "-rf", target + ".moved"])]


def one_round(mounts, tarball, order, around=None):
    """Runs every phase on each mount; returns {mount: {phase: (wall s, daemon ticks)}}."""
    out = {}
    for mount in (mounts if order == 0 else mounts[::-1]):
        os.mkdir(mount.mountpoint + "/small")
        out[mount.name] = {}
        for phase, cmd in phase_commands(mount, tarball):
            drop_caches()
            hook = around(mount, phase) if around else None
            ticks, start = cpu_ticks(mount.process.pid), time.perf_counter()
            run(["taskset", "-c", "0"] + cmd, stdout=subprocess.DEVNULL)
            wall, ticks = time.perf_counter() - start, cpu_ticks(mount.process.pid) - ticks
            if hook:
                hook()
            out[mount.name][phase] = (wall, ticks)
    return out


def strace_around(base):
    def around(mount, phase):
        path = f"{base}/strace-{mount.name}-{phase}.txt"
        tracer = subprocess.Popen(["strace", "-c", "-f", "-p", str(mount.process.pid), "-o", path],
                                  stderr=subprocess.DEVNULL)
        time.sleep(1)

        def stop():
            time.sleep(0.5)
            tracer.send_signal(signal.SIGINT)
            tracer.wait()
        return stop
    return around


def syscall_counts(path):
    counts = {}
    for line in open(path):
        fields = line.split()
        if len(fields) >= 5 and fields[0][0].isdigit() and fields[-1] not in ("total",):
            counts[fields[-1]] = int(fields[3])
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mamfs")
    ap.add_argument("--mode", choices=["time", "syscalls", "callgrind"], default="time")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--files", type=int, default=3000)
    args = ap.parse_args()
    mamfs = os.path.abspath(args.mamfs)
    base = tempfile.mkdtemp(prefix="mamfs-enforcement-cost-", dir="/var/tmp")
    tarball = base + "/files.tar"
    make_tarball(tarball, args.files)
    wrapper = None
    if args.mode == "callgrind":
        wrapper = lambda m: ["valgrind", "--tool=callgrind", f"--callgrind-out-file={base}/callgrind-{m.name}.out"]
    mounts = []
    try:
        mounts = [Mount(mamfs, base, "enc", wrapper), Mount(mamfs, base, "apps", wrapper)]
        rounds = 1 if args.mode != "time" else args.rounds
        around = strace_around(base) if args.mode == "syscalls" else None
        results = [one_round(mounts, tarball, r % 2, around) for r in range(rounds)]
    finally:
        for mount in mounts:
            mount.stop()
    print(f"{args.files} files, {len(results)} round(s), mode {args.mode}, mamfs {mamfs}")
    if args.mode == "time":
        print("phase | enc wall median (min) | apps wall median (min) | ratio median | ratio min | "
              "enc ticks median | apps ticks median | ratio")
        for phase in PHASES:
            enc = [r["enc"][phase] for r in results]
            apps = [r["apps"][phase] for r in results]
            ew, aw = [w for w, _ in enc], [w for w, _ in apps]
            et, at = [t for _, t in enc], [t for _, t in apps]
            print(f"{phase} | {statistics.median(ew):.3f} ({min(ew):.3f}) | {statistics.median(aw):.3f} ({min(aw):.3f}) | "
                  f"{statistics.median(aw) / statistics.median(ew):.2f} | {min(aw) / min(ew):.2f} | "
                  f"{statistics.median(et)} | {statistics.median(at)} | "
                  f"{statistics.median(at) / max(1, statistics.median(et)):.2f}")
    elif args.mode == "syscalls":
        for phase in PHASES:
            enc = syscall_counts(f"{base}/strace-enc-{phase}.txt")
            apps = syscall_counts(f"{base}/strace-apps-{phase}.txt")
            diff = {k: apps.get(k, 0) - enc.get(k, 0) for k in set(enc) | set(apps)}
            shown = ", ".join(f"{k} {v:+d}" for k, v in sorted(diff.items(), key=lambda kv: -abs(kv[1])) if abs(v) >= 10)
            print(f"{phase}: enc {sum(enc.values())} calls, apps {sum(apps.values())}; apps - enc: {shown or 'none'}")
    else:
        for mount in ("enc", "apps"):
            out = subprocess.run(["callgrind_annotate", f"{base}/callgrind-{mount}.out"],
                                 capture_output=True, text=True).stdout
            total = next((line.split()[0] for line in out.splitlines() if "PROGRAM TOTALS" in line), "?")
            print(f"{mount}: {total} instructions (daemon user space, all phases)")
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
