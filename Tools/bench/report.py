#!/usr/bin/env python3
"""Turns bench-results/results.json (Tools/bench/run.py) into report.md and chart.png beside it.

Figures are the median over rounds with min-max; ratios compare medians of mamfs with a peer
in the same placement only (docs/PERFORMANCE.md). usage: Tools/bench/report.py results.json
"""
import collections
import json
import os
import statistics
import sys

# metric -> (label, unit, higher is better)
METRICS = {
    "seq_write_MBps": ("1 sequential write (dd bs=1M, fsync)", "MB/s", True),
    "seq_read_MBps": ("1 sequential read (cold cache)", "MB/s", True),
    "seq_read_cached_MBps": ("1 sequential read (backing files cached)", "MB/s", True),
    "small_extract_s": ("2 small files: tar x", "s", False),
    "small_ls_s": ("2 small files: ls -lR", "s", False),
    "small_cat_s": ("2 small files: cat all", "s", False),
    "small_rm_s": ("2 small files: rm -rf", "s", False),
    "fio_randread_iops": ("3 fio 4 KiB randread", "IOPS", True),
    "fio_randwrite_iops": ("3 fio 4 KiB randwrite", "IOPS", True),
    "smallw_MBps": ("4 dd bs=512 writes", "MB/s", True),
    "cpu_s": ("6 daemon CPU s (workloads 1-3)", "s", False),
    "hwm_mib": ("6 daemon peak RSS (VmHWM)", "MiB", False),
}
PEERS = ["raw", "ext4-fscrypt", "bindfs", "gocryptfs", "securefs", "cryfs", "fuse-floor", "fuse-floor-io", "fuse-floor-crypt",
         "mamfs-plain"]
SUBJECT = "mamfs-enc"


def med(values):
    return statistics.median(values) if values else None


def cell(values, digits=0):
    if not values:
        return "-"
    m = med(values)
    fmt = f"{{:.{digits}f}}"
    if len(values) == 1:
        return fmt.format(m)
    return f"{fmt.format(m)} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def digits_for(metric, values):
    if not values:
        return 0
    return 2 if max(values) < 10 else (1 if max(values) < 100 else 0)


def collect(results):
    data = collections.defaultdict(list)  # (placement, mount, metric) -> values
    for s in results["samples"]:
        for k, v in s.items():
            if k in METRICS:
                data[(s["placement"], s["mount"], k)].append(v)
    for d in results["daemon"]:
        data[(d["placement"], d["mount"], "cpu_s")].append(d["cpu_s"])
        data[(d["placement"], d["mount"], "hwm_mib")].append(d["hwm_kib"] / 1024)
    return data


def ratio(data, placement, metric, peer):
    a, b = med(data.get((placement, SUBJECT, metric), [])), med(data.get((placement, peer, metric), []))
    if a is None or b is None or b == 0:
        return None
    return a / b


# The FUSE peers that encrypt: "the best encrypted peer" of a workload is the best of these in
# the same placement (ext4-fscrypt, the in-kernel limit, is reported beside them, not a target).
ENCRYPTED_PEERS = ["gocryptfs", "securefs", "cryfs"]


def best_peer(data, placement, metric):
    """(peer, median) of the encrypted peer with the best median of `metric`, or None."""
    higher = METRICS[metric][2]
    found = [(p, med(data.get((placement, p, metric), []))) for p in ENCRYPTED_PEERS]
    found = [(p, m) for p, m in found if m]
    if not found:
        return None
    return max(found, key=lambda x: x[1]) if higher else min(found, key=lambda x: x[1])


def targets(data, results):
    """(placement, description, value, met) for every performance target."""
    rows = []
    for placement in results["placements"]:
        def against_best(desc, metric, limit):
            label, _, higher = METRICS[metric]
            mine, best = med(data.get((placement, SUBJECT, metric), [])), best_peer(data, placement, metric)
            if mine is None or best is None:
                return
            r = mine / best[1]
            rows.append((placement, f"{desc} the best encrypted peer ({best[0]})", f"{r:.2f}x",
                         r >= limit if higher else r <= limit))
        for metric in ("small_extract_s", "small_ls_s", "small_cat_s", "small_rm_s"):
            against_best(f"{METRICS[metric][0][len('2 small files: '):]} time <= 0.9x", metric, 0.9)
        against_best("randread IOPS >= 1.1x", "fio_randread_iops", 1.1)
        against_best("randwrite IOPS >= 1.1x", "fio_randwrite_iops", 1.1)
        against_best("dd bs=512 MB/s >= 1.0x", "smallw_MBps", 1.0)
        against_best("seq write >= 1.25x", "seq_write_MBps", 1.25)
        against_best("seq read >= 1.25x", "seq_read_MBps", 1.25)
        if placement == "same":
            r = ratio(data, placement, "seq_read_MBps", "raw")
            if r is not None:
                rows.append((placement, f"seq read >= {RAW_READ_TARGET}x raw", f"{r:.2f}x", r >= RAW_READ_TARGET))
        for mount in (SUBJECT, "mamfs-plain"):
            hwm = [d["hwm_kib"] / 1024 for d in results["daemon"] if d["placement"] == placement and d["mount"] == mount]
            rss = [d["rss_kib"] / 1024 for d in results["daemon"] if d["placement"] == placement and d["mount"] == mount]
            if hwm:
                rows.append((placement, f"{mount} peak RSS <= 64 MiB", f"{max(hwm):.1f} MiB", max(hwm) <= 64))
            if len(rss) >= 2:
                growth = rss[-1] - rss[0]
                rows.append((placement, f"{mount} no RSS growth across rounds (round 1 -> {len(rss)}, VmRSS)",
                             f"{rss[0]:.1f} -> {rss[-1]:.1f} MiB", growth <= max(2.0, 0.1 * rss[0])))
    cli = [c for c in results.get("cli", []) if "copy_MBps" in c]
    if cli:
        copy = med([c["copy_MBps"] for c in cli])
        for op in ("encrypt", "decrypt"):
            r = med([c[f"cli_{op}_MBps"] for c in cli]) / copy
            rows.append(("cli", f"CLI {op} wall clock >= 0.8x cp of the same file", f"{r:.2f}x", r >= 0.8))
            for block in ("16k", "4k", "4k_aead"):
                # User CPU seconds of mamfs / of openssl speed for the same bytes: within 1.25x.
                speeds = [c[f"openssl_gcm{block}_MBps"] for c in cli if f"openssl_gcm{block}_MBps" in c]
                if not speeds:
                    continue
                users = [c[f"cli_{op}_user_MBps"] for c in cli if f"cli_{op}_user_MBps" in c]
                if not users:
                    continue
                r = med(speeds) / med(users)
                size = {"16k": "GCM 16 KiB", "4k": "GCM 4 KiB (the format's block)",
                        "4k_aead": "-aead GCM 4 KiB (a whole message per block, as the format)"}[block]
                rows.append(("cli", f"CLI {op} user CPU <= 1.25x openssl speed {size}", f"{r:.2f}x", r <= 1.25))
    return rows


def baseline_section(results, data):
    """With --baseline: each mamfs mount against the same mount of the baseline binary."""
    pairs = [(new, old) for new, old in (("mamfs-enc", "base-enc"), ("mamfs-plain", "base-plain"))
             if new in results["mounts"] and old in results["mounts"]]
    if not pairs:
        return []
    out = [f"## Against the baseline binary ({results.get('baseline')})\n",
           "Median of this binary / median of the baseline, same run and placement (> 1 is better for rates, "
           "< 1 is better for times, CPU and RSS):\n"]
    columns = [(placement, new, old) for placement in results["placements"] for new, old in pairs]
    out.append("| workload | " + " | ".join(f"{new} / {old} ({placement})" for placement, new, old in columns) + " |")
    out.append("|---|" + "---|" * len(columns))
    for metric, (label, _, _) in METRICS.items():
        rs = []
        for placement, new, old in columns:
            a, b = med(data.get((placement, new, metric), [])), med(data.get((placement, old, metric), []))
            rs.append(None if a is None or not b else a / b)
        if any(r is not None for r in rs):
            out.append(f"| {label} | " + " | ".join("-" if r is None else f"{r:.2f}" for r in rs) + " |")
    cli, base = results.get("cli", []), results.get("cli_base", [])
    if cli and base:
        for label, key in (("CLI encrypt, wall MB/s", "cli_encrypt_MBps"), ("CLI decrypt, wall MB/s", "cli_decrypt_MBps")):
            a, b = med([c[key] for c in cli]), med([c[key] for c in base])
            out.append(f"| {label} | {a / b:.2f} (cli) |" + " |" * (len(columns) - 1))
    out.append("")
    return out


# Variants of mamfs-enc in the same run: (mount, title, what the rows say, limit for times or None).
VARIANTS = [
    ("mamfs-apps", "Caller-aware enforcement cost (mamfs-apps / mamfs-enc)",
     "the cost of deciding every request by the caller's executable. Small-file rows should stay "
     "within 10% (decided on the median of the rounds' ratios)", 0.1),
    ("mamfs-poll", "Busy polling (mamfs-poll / mamfs-enc)",
     "what -o busy_poll buys: the wakeup of the daemon's CPU saved in `split`, and what polling "
     "costs in daemon CPU time and, in `same`, in the client's time", None),
]


def variant_section(results, data, variant, title, what, limit):
    """`variant` against mamfs-enc, same run: medians' ratio and the median of the rounds' own ratios."""
    if variant not in results["mounts"] or SUBJECT not in results["mounts"]:
        return []
    placements = results["placements"]
    out = [f"## {title}\n",
           f"Per placement: median of {variant} / median of {SUBJECT}, then the median of the rounds' own "
           "ratios (each round runs the mounts one after the other, in alternating order, so a round's "
           "ratio is free of the host's drift between rounds); > 1 is better for rates, < 1 for times: "
           f"{what}:\n"]
    limit_column = f" within {limit:.0%} |" if limit is not None else ""
    out.append("| workload | " + " | ".join(f"{p} (of medians) | {p} (of rounds)" for p in placements) + " |" + limit_column)
    out.append("|---|" + "---|" * (2 * len(placements) + (1 if limit is not None else 0)))
    rounds = round_ratios(results, variant)
    for metric, (label, _, higher_better) in METRICS.items():
        cells, decided = [], []
        for placement in placements:
            a, b = med(data.get((placement, variant, metric), [])), med(data.get((placement, SUBJECT, metric), []))
            per_round = med(rounds.get((placement, metric), []))
            cells += [None if a is None or not b else a / b, per_round]
            decided.append(per_round)
        if all(r is None for r in cells):
            continue
        row = f"| {label} | " + " | ".join("-" if r is None else f"{r:.2f}" for r in cells) + " |"
        if limit is not None:
            ok = all(r is None or (r >= 1 - limit if higher_better else r <= 1 + limit) for r in decided)
            row += f" {'yes' if ok else 'NO'} |"
        out.append(row)
    out.append("")
    return out


def against_best_peer_section(results, data, mount):
    """`mount` against each workload's best encrypted peer, as the targets compare mamfs-enc."""
    if mount not in results["mounts"]:
        return []
    placements = results["placements"]
    out = [f"{mount} against the best encrypted peer (median / median, the peer in brackets):\n",
           "| workload | " + " | ".join(placements) + " |", "|---|" + "---|" * len(placements)]
    for metric, (label, _, _) in METRICS.items():
        if metric in ("cpu_s", "hwm_mib"):
            continue
        cells = []
        for placement in placements:
            mine, best = med(data.get((placement, mount, metric), [])), best_peer(data, placement, metric)
            cells.append("-" if mine is None or best is None else f"{mine / best[1]:.2f} ({best[0]})")
        if any(c != "-" for c in cells):
            out.append(f"| {label} | " + " | ".join(cells) + " |")
    out.append("")
    return out


# The targets against the best encrypted peer: metric -> (target, higher is better).
PEER_TARGETS = {"small_extract_s": 0.9, "small_ls_s": 0.9, "small_cat_s": 0.9, "small_rm_s": 0.9,
                "fio_randread_iops": 1.1, "fio_randwrite_iops": 1.1, "smallw_MBps": 1.0,
                "seq_write_MBps": 1.25, "seq_read_MBps": 1.25}
# `same` sequential read against raw's.
RAW_READ_TARGET = 0.85
FLOOR = "fuse-floor"
FLOOR_IO = "fuse-floor-io"
FLOOR_CRYPT = "fuse-floor-crypt"


def floor_cells(value, best, mine, meets, beyond):
    """A floor's two cells of a row: the floor against the best peer's `best` (marked `beyond`
    where it misses the target) and mine against the floor; `- | -` without the floor's figure."""
    if not value:
        return " - | - |"
    r = value / best
    return f" {r:.2f}{'' if meets(r) else f' **{beyond}**'} | {'-' if mine is None else f'{mine / value:.2f}'} |"


def floor_section(results, data):
    """The best a filesystem answering mamfs's requests could do (fuse-floor: no work behind
    them), against each target's best encrypted peer: where fuse-floor / best peer misses a
    target, no FUSE filesystem sending those requests can meet it. With fuse-floor-io in the run
    (the same requests plus the backing disk's reads and writes of an encrypting overlay, no
    cipher, no check), its columns too: where it misses a target, no encrypting overlay sending
    those requests meets it. In `same`, the raw read target (>= 0.85x raw) gets a row of its
    own, raw in the place of the best peer. Either mount alone gives its own columns. With
    fuse-floor-crypt (fuse-floor-io sealing and opening each block with AES-256-GCM), its columns
    as well: where it misses, no encrypting overlay that seals 4 KiB blocks with OpenSSL meets it."""
    with_floor, with_io = FLOOR in results["mounts"], FLOOR_IO in results["mounts"]
    with_crypt = FLOOR_CRYPT in results["mounts"]
    if not with_floor and not with_io and not with_crypt:
        return []
    rows = []
    intro = []
    if with_floor:
        intro.append("fuse-floor answers the requests mamfs is sent with no work behind them (no disk, no cipher, "
                     "no policy): its figure is the kernel's, libfuse's and the wakeups' share of a workload. "
                     "`floor / best` is the most a filesystem sending these requests could be ahead of the best "
                     "encrypted peer; where it misses the target (**beyond the floor**), no such filesystem meets "
                     f"it. `{SUBJECT} / floor` sets {SUBJECT} against the round trips alone (1.00: nothing but the round "
                     f"trips; the further from 1, the more of the time is {SUBJECT}'s own work)")
    if with_io:
        intro.append("fuse-floor-io sends mamfs's requests (as fuse-floor does) and also keeps each file in a backing file laid out as an "
                     "encrypting overlay lays it out (a header, then 4 KiB blocks with a 16-byte tag each), reading and "
                     "writing those bytes with no cipher and no check, in a backing tree that mirrors the mount's (a "
                     "directory per directory, each file made, renamed and removed in its own): the disk's part of the "
                     "work, which no encrypting overlay avoids. Where `floor-io / best` misses the target (**beyond the floor with its disk**), no "
                     f"encrypting overlay sending these requests meets it; `{SUBJECT} / floor-io` is what the cipher, the "
                     "checks and everything else add")
    if with_crypt:
        intro.append("fuse-floor-crypt is fuse-floor-io that also seals each block with AES-256-GCM (OpenSSL) when it writes "
                     "it and opens it when it reads it: where `floor-crypt / best` misses the target (**beyond the floor "
                     "with its disk and cipher**), no encrypting overlay sending these requests and sealing 4 KiB blocks "
                     f"with OpenSSL meets it; `{SUBJECT} / floor-crypt` is what the checks and everything else add")
    if "same" in results["placements"] and data.get(("same", "raw", "seq_read_MBps")):
        intro.append(f"The `same` sequential read's target against raw (>= {RAW_READ_TARGET}x raw) has a row of its own, "
                     "with raw in the best peer's column")
    header = "| placement | workload | target | best encrypted peer |"
    header += f" floor / best | {SUBJECT} / best | {SUBJECT} / floor |" if with_floor else f" {SUBJECT} / best |"
    header += f" floor-io / best | {SUBJECT} / floor-io |" if with_io else ""
    header += f" floor-crypt / best | {SUBJECT} / floor-crypt |" if with_crypt else ""
    named = FLOOR if with_floor else FLOOR_IO if with_io else FLOOR_CRYPT
    out = [f"## The round trips alone ({named})\n", ". ".join(intro) + ":\n",
           header, "|" + "---|" * (header.count("|") - 1)]
    for placement in results["placements"]:
        targets = [(metric, limit, best_peer(data, placement, metric)) for metric, limit in PEER_TARGETS.items()]
        raw = med(data.get((placement, "raw", "seq_read_MBps"), []))
        if placement == "same" and raw:
            targets.append(("seq_read_MBps", RAW_READ_TARGET, ("raw", raw)))
        for metric, limit, best in targets:
            label, _, higher = METRICS[metric]
            floor, disk, crypt, mine = (med(data.get((placement, mount, metric), []))
                                        for mount in (FLOOR, FLOOR_IO, FLOOR_CRYPT, SUBJECT))
            if best is None or not any(value for value, shown in ((floor, with_floor), (disk, with_io), (crypt, with_crypt))
                                       if shown):
                continue
            meets = (lambda r: r >= limit) if higher else (lambda r: r <= limit)
            against_best = "-" if mine is None else f"{mine / best[1]:.2f}"
            row = f"| {placement} | {label} | {'>=' if higher else '<='} {limit}x | {best[0]} |"
            if with_floor:
                if floor:
                    r = floor / best[1]
                    row += (f" {r:.2f}{'' if meets(r) else ' **beyond the floor**'} | {against_best} "
                            f"| {'-' if mine is None else f'{mine / floor:.2f}'} |")
                else:
                    row += f" - | {against_best} | - |"
            else:
                row += f" {against_best} |"
            if with_io:
                row += floor_cells(disk, best[1], mine, meets, "beyond the floor with its disk")
            if with_crypt:
                row += floor_cells(crypt, best[1], mine, meets, "beyond the floor with its disk and cipher")
            rows.append(row)
    # Without an encrypted peer in the run there is nothing to set against the floor.
    return out + rows + [""] if rows else []


def round_ratios(results, variant):
    """(placement, metric) -> [variant / mamfs-enc of each round in which both have the metric]."""
    by_round = {}
    for s in results["samples"]:
        by_round[(s.get("round"), s["placement"], s["mount"])] = dict(s)
    for d in results["daemon"]:
        by_round.setdefault((d.get("round"), d["placement"], d["mount"]), {}).update(
            cpu_s=d["cpu_s"], hwm_mib=d["hwm_kib"] / 1024)
    out = collections.defaultdict(list)
    for (rnd, placement, mount), s in by_round.items():
        if mount != variant:
            continue
        base = by_round.get((rnd, placement, SUBJECT))
        if not base:
            continue
        for metric in METRICS:
            if metric in s and base.get(metric):
                out[(placement, metric)].append(s[metric] / base[metric])
    return out


def steal_per_round(results):
    """'r1: 0.4%, r2: 5.1%, ...' from the /proc/stat counters run.py keeps per round ('?' for a
    round without them: results of an older run.py, or a round that did not finish)."""
    parts = []
    for l in results["loadavg"]:
        start, end = l.get("cpu_start"), l.get("cpu_end")
        total = end[0] - start[0] if start and end else 0
        parts.append(f"r{l['round']}: " + (f"{100 * (end[1] - start[1]) / total:.1f}%" if total > 0 else "?"))
    return ", ".join(parts)


def write_report(results, data, path):
    m = results["machine"]
    cfg = results["config"]
    out = []
    out.append(f"# mamfs benchmark, {results['started']}{' (quick mode)' if results['quick'] else ''}\n")
    out.append(f"- Machine: {m['cpu']}, {m['vcpus']} vCPUs, {m['mem_mib']} MiB RAM, Linux {m['kernel']}; "
               f"backing directories on {m['disk']}")
    out.append("- Peers: " + "; ".join(f"{k} {v}" for k, v in m["versions"].items()))
    out.append(f"- mamfs: {results['mamfs']}")
    out.append(f"- {cfg['rounds']} rounds, interleaved; seq {cfg['seq_mib']} MiB; {cfg['files']} files in {cfg['dirs']} "
               f"directories; fio {cfg['fio_mib']} MiB, {cfg['fio_seconds']} s per pattern; "
               f"{cfg['smallw_count']} x 512 B writes; CLI file {cfg['cli_mib']} MiB on /dev/shm"
               + (f"; mamfs-poll: -o busy_poll={cfg['busy_poll_us']}" if "busy_poll_us" in cfg else ""))
    loads = ", ".join(f"r{l['round']}: {l['start']} -> {l.get('end', '?')}" for l in results["loadavg"])
    out.append(f"- Load average (1/5/15 min) per round: {loads}. It counts the bench's own threads waiting in "
               "the kernel, so it does not say whether the machine was otherwise idle; steal time does")
    out.append(f"- Steal time per round (the share of the VM's CPU time the host gave to others): {steal_per_round(results)}")
    for s in results.get("setup", []):
        out.append(f"- {s['mount']} ({s['placement']}): {s['setup']}")
    skipped = {(s["placement"], s["mount"]): s["reason"] for s in results.get("skipped", [])}
    for (placement, mount), reason in skipped.items():
        out.append(f"- **Skipped** {mount} ({placement}): {reason}")
    out.append("- Cells: median (min-max). Client pinned to CPU 0; daemon on CPU 0 (same) or CPU 1 (split).\n")
    for placement in results["placements"]:
        mounts = [x for x in results["mounts"]]
        out.append(f"## Placement: {placement}\n")
        out.append("| workload | unit | " + " | ".join(mounts) + " |")
        out.append("|---|---|" + "---|" * len(mounts))
        for metric, (label, unit, _) in METRICS.items():
            vals = [data.get((placement, mnt, metric), []) for mnt in mounts]
            if not any(vals):
                continue
            d = digits_for(metric, [v for vs in vals for v in vs])
            out.append(f"| {label} | {unit} | " + " | ".join(
                "skipped" if (placement, mnt) in skipped else cell(v, d) for mnt, v in zip(mounts, vals)) + " |")
        if SUBJECT in mounts:
            peers = [p for p in PEERS if p in mounts]
            out.append(f"\nRatio of {SUBJECT} to each peer (median / median; > 1 is better for rates, "
                       "< 1 is better for times, CPU and RSS):\n")
            out.append("| workload | " + " | ".join(f"vs {p}" for p in peers) + " |")
            out.append("|---|" + "---|" * len(peers))
            for metric, (label, _, _) in METRICS.items():
                rs = [ratio(data, placement, metric, p) for p in peers]
                if all(r is None for r in rs) and not any((placement, p) in skipped for p in peers):
                    continue
                out.append(f"| {label} | " + " | ".join(
                    "skipped" if (placement, p) in skipped else "-" if r is None else f"{r:.2f}"
                    for p, r in zip(peers, rs)) + " |")
        out.append("")
    cli = results.get("cli", [])
    if cli:
        out.append("## CLI and crypto limit (file on /dev/shm; openssl speed on CPU 0)\n")
        out.append("| measure | MB/s wall | MB/s of CPU time (user+sys) | MB/s of user time |")
        out.append("|---|---|---|---|")
        for label, key in (("mamfs encrypt", "cli_encrypt"), ("mamfs decrypt", "cli_decrypt"),
                           ("openssl enc -aes-256-ctr", "openssl_ctr")):
            out.append(f"| {label} | {cell([c[key + '_MBps'] for c in cli])} | {cell([c[key + '_cpu_MBps'] for c in cli])} "
                       f"| {cell([c[key + '_user_MBps'] for c in cli if key + '_user_MBps' in c])} |")
        copies = [c for c in cli if "copy_MBps" in c]
        if copies:
            out.append(f"| cp of the same file (no cipher: the file-to-file limit) | {cell([c['copy_MBps'] for c in copies])} "
                       f"| {cell([c['copy_cpu_MBps'] for c in copies])} | - |")
        out.append(f"| openssl speed -evp aes-256-gcm, 16 KiB | - | - | {cell([c['openssl_gcm16k_MBps'] for c in cli])} |")
        out.append(f"| openssl speed -evp aes-256-gcm, 4 KiB | - | - | {cell([c['openssl_gcm4k_MBps'] for c in cli])} |")
        aead = [c["openssl_gcm4k_aead_MBps"] for c in cli if "openssl_gcm4k_aead_MBps" in c]
        if aead:
            out.append(f"| openssl speed -aead -evp aes-256-gcm, 4 KiB (a whole message per block) | - | - | {cell(aead)} |")
        out.append("")
    out.extend(baseline_section(results, data))
    for variant in VARIANTS:
        out.extend(variant_section(results, data, *variant))
    out.extend(against_best_peer_section(results, data, "mamfs-poll"))
    out.extend(floor_section(results, data))
    out.append("## Targets\n")
    out.append("| placement | target | value | met |")
    out.append("|---|---|---|---|")
    for placement, desc, value, met in targets(data, results):
        out.append(f"| {placement} | {desc} | {value} | {'yes' if met else '**no**'} |")
    out.append("")
    with open(path, "w") as f:
        f.write("\n".join(out))


def bar_series(series):
    """(names, medians, lower errors, upper errors) of the non-empty (name, values) pairs."""
    series = [(name, values) for name, values in series if values]
    return ([name for name, _ in series], [med(v) for _, v in series],
            [med(v) - min(v) for _, v in series], [max(v) - med(v) for _, v in series])


def write_chart(results, data, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is missing (python3 -m pip install matplotlib): no chart", file=sys.stderr)
        return
    metrics = [k for k in METRICS if any(data.get((p, x, k)) for p in results["placements"] for x in results["mounts"])]
    placements = results["placements"]
    cli = results.get("cli", [])
    rows = len(metrics) + (1 if cli else 0)
    if rows == 0:
        print("no figures to chart", file=sys.stderr)
        return
    fig, axes = plt.subplots(rows, len(placements), figsize=(6 * len(placements), 2.2 * rows), squeeze=False)
    colors = {"raw": "#888888", "ext4-fscrypt": "#2f2f2f", "bindfs": "#4c72b0", "gocryptfs": "#dd8452",
              "securefs": "#55a868", "cryfs": "#64b5cd", "fuse-floor": "#bbbbbb", "fuse-floor-io": "#999999", "fuse-floor-crypt": "#777777",
              "mamfs-enc": "#c44e52", "mamfs-plain": "#8172b2", "mamfs-apps": "#937860", "mamfs-poll": "#da8bc3",
              "base-enc": "#e8a0a2", "base-plain": "#c0b8d8"}
    for row, metric in enumerate(metrics):
        label, unit, higher = METRICS[metric]
        for col, placement in enumerate(placements):
            ax = axes[row][col]
            names, meds, lo, hi = bar_series([(mnt, data.get((placement, mnt, metric), [])) for mnt in results["mounts"]])
            ax.barh(names, meds, xerr=[lo, hi], color=[colors.get(n, "#333333") for n in names])
            ax.invert_yaxis()
            ax.set_title(f"{label} [{unit}, {'higher' if higher else 'lower'} is better] - {placement}", fontsize=8)
            ax.tick_params(labelsize=7)
    if cli:
        # Workload 5 on its own row: MB/s of the CLI, the plain copy and openssl (one core).
        bars = [("mamfs encrypt (wall)", "cli_encrypt_MBps"), ("mamfs decrypt (wall)", "cli_decrypt_MBps"),
                ("mamfs encrypt (user CPU)", "cli_encrypt_user_MBps"), ("mamfs decrypt (user CPU)", "cli_decrypt_user_MBps"),
                ("cp, no cipher (wall)", "copy_MBps"), ("openssl enc ctr (wall)", "openssl_ctr_MBps"),
                ("openssl speed gcm 4 KiB", "openssl_gcm4k_MBps"), ("openssl speed gcm 16 KiB", "openssl_gcm16k_MBps"),
                ("openssl speed -aead gcm 4 KiB", "openssl_gcm4k_aead_MBps")]
        names, meds, lo, hi = bar_series([(name, [c[key] for c in cli if key in c]) for name, key in bars])
        for col in range(len(placements)):
            ax = axes[rows - 1][col]
            if col > 0:
                ax.axis("off")
                continue
            ax.barh(names, meds, xerr=[lo, hi], color="#c44e52")
            ax.invert_yaxis()
            ax.set_title("5 CLI, 256 MiB on /dev/shm; openssl speed on CPU 0 [MB/s, higher is better]", fontsize=8)
            ax.tick_params(labelsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main():
    path = sys.argv[1]
    with open(path) as f:
        results = json.load(f)
    data = collect(results)
    directory = os.path.dirname(os.path.abspath(path))
    write_report(results, data, os.path.join(directory, "report.md"))
    write_chart(results, data, os.path.join(directory, "chart.png"))


if __name__ == "__main__":
    main()
