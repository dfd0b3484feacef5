import Foundation
import Glibc
import MAMProtection
import Testing
import MAMTestSupport

/// fallocate(2) and holes through a real mount, compared with ext4 byte for byte: the same
/// operations on a file in the mount and on ext4 give the same results, errno, sizes and
/// bytes, and st_blocks moves the same way (reservation, punching, sparse growth).
@Suite("POSIX: fallocate modes and holes, mount vs ext4")
struct FallocateMountTests {
    /// argv: a directory. Runs the steps on "f" there; prints one JSON line per step:
    /// {"step", "result" (ok or the errno name), "size", "sha" (of the whole content), "blocks"}.
    static let script = #"""
    import ctypes, errno, hashlib, json, os, random, sys
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fallocate64.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    KEEP, PUNCH, COLLAPSE, ZERO, INSERT = 0x01, 0x02, 0x08, 0x10, 0x20
    os.chdir(sys.argv[1])

    def fa(fd, mode, offset, length):
        if libc.fallocate64(fd, mode, offset, length) != 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))

    fd = os.open("f", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    data = random.Random(5).randbytes((2 << 20) + 100)

    def size():
        return os.fstat(fd).st_size

    def report(step, call):
        try:
            call()
            result = "ok"
        except OSError as e:
            result = errno.errorcode.get(e.errno, str(e.errno))
        os.fsync(fd)
        st = os.fstat(fd)
        content = os.pread(fd, st.st_size + 1, 0)
        print(json.dumps({"step": step, "result": result, "size": st.st_size,
                          "sha": hashlib.sha256(content).hexdigest(), "blocks": st.st_blocks}), flush=True)

    report("write", lambda: os.pwrite(fd, data, 0))
    report("punch-edges", lambda: fa(fd, PUNCH | KEEP, 1000, 1 << 20))
    report("punch-inside-a-block", lambda: fa(fd, PUNCH | KEEP, (1 << 20) + 5000, 50))
    report("zero-range", lambda: fa(fd, ZERO, (1 << 20) + 8192, 300000))
    report("zero-range-keep-past-end", lambda: fa(fd, ZERO | KEEP, size() - 10, 1 << 20))
    report("zero-range-grows", lambda: fa(fd, ZERO, size() + 5000, 10000))
    report("keep-size-past-end", lambda: fa(fd, KEEP, size() + (2 << 20), 1 << 20))
    report("allocate-grows", lambda: fa(fd, 0, size() + 3, 8192))
    report("punch-past-end", lambda: fa(fd, PUNCH | KEEP, size() + 100000, 4096))
    report("punch-without-keep-size", lambda: fa(fd, PUNCH, 0, 4096))
    report("punch-and-zero", lambda: fa(fd, PUNCH | ZERO | KEEP, 0, 4096))
    report("length-zero", lambda: fa(fd, 0, 0, 0))
    report("offset-negative", lambda: fa(fd, 0, -1, 10))
    report("write-into-hole", lambda: os.pwrite(fd, b"x" * 10, 12345))
    report("truncate-same-size", lambda: os.ftruncate(fd, size()))
    report("punch-everything", lambda: fa(fd, PUNCH | KEEP, 0, size()))
    reader = os.open("f", os.O_RDONLY)
    report("read-only-descriptor", lambda: fa(reader, KEEP, 0, 4096))
    os.close(reader)
    os.close(fd)
    """#

    struct Step: Decodable, Equatable {
        let step: String
        let result: String
        let size: Int
        let sha: String
        let blocks: Int
    }

    static func steps(_ out: String) -> [Step] {
        out.split(separator: "\n").compactMap { try? JSONDecoder().decode(Step.self, from: Data($0.utf8)) }
    }

    static func run(_ m: MountedFixture, in directory: String) throws -> [Step] {
        let r = try m.python(script, in: directory)
        #expect(r.status == 0, "\(directory): \(r.err)")
        return steps(r.out)
    }

    @Test("keep size, punch, zero range, allocate: results, errno, sizes and bytes equal ext4's; st_blocks moves the same way",
          arguments: MountedFixture.Kind.allCases)
    func modesMatchExt4(kind: MountedFixture.Kind) throws {
        try withMountAndExt4(kind) { m, reference in try Self.compareModes(kind, m, reference) }
    }

    static func compareModes(_ kind: MountedFixture.Kind, _ m: MountedFixture, _ reference: Ext4Reference) throws {
        let mount = try Self.run(m, in: m.mountpoint)
        let ext4 = try Self.run(m, in: reference.path)
        #expect(mount.count == 17 && ext4.count == 17, "\(mount.count) / \(ext4.count) steps")
        for (a, b) in zip(mount, ext4) {
            #expect(a.step == b.step)
            #expect(a.result == b.result, "\(a.step): mount \(a.result), ext4 \(b.result)")
            #expect(a.size == b.size, "\(a.step): size mount \(a.size), ext4 \(b.size)")
            #expect(a.sha == b.sha, "\(a.step): content differs")
        }
        let expected = ["punch-without-keep-size": "ENOTSUP", "punch-and-zero": "ENOTSUP", "length-zero": "EINVAL",
                        "offset-negative": "EINVAL", "read-only-descriptor": "EBADF"]
        for step in mount {
            #expect(step.result == (expected[step.step] ?? "ok"), "\(step.step): \(step.result)")
        }
        // st_blocks (512-byte units): the same direction and about the same amount on both.
        func change(_ steps: [Step], _ name: String) -> Int {
            guard let i = steps.firstIndex(where: { $0.step == name }), i > 0 else { return .min }
            return steps[i].blocks - steps[i - 1].blocks
        }
        for side in [("mount", mount), ("ext4", ext4)] {
            let (label, steps) = side
            #expect(change(steps, "punch-edges") <= -1900, "\(label): punching 1 MiB changed st_blocks by \(change(steps, "punch-edges"))")
            #expect(change(steps, "keep-size-past-end") >= 1900, "\(label): reserving 1 MiB changed st_blocks by \(change(steps, "keep-size-past-end"))")
            #expect(abs(change(steps, "zero-range")) <= 64, "\(label): zeroing inside the file changed st_blocks by \(change(steps, "zero-range"))")
            #expect(change(steps, "truncate-same-size") <= -1900, "\(label): the unchanged size kept its reservation: \(change(steps, "truncate-same-size"))")
            #expect((steps.last(where: { $0.step == "punch-everything" })?.blocks ?? .max) <= 64, "\(label): st_blocks after punching everything")
        }
        if kind == .managed {
            let header = try m.backingHeader("f")
            #expect(header?.isEncrypted == true && header?.isSparse == true)
        }
    }

    @Test("COLLAPSE_RANGE and INSERT_RANGE answer EOPNOTSUPP and change nothing", arguments: MountedFixture.Kind.allCases)
    func collapseAndInsertAreUnsupported(kind: MountedFixture.Kind) throws {
        try withMount(kind) { m in
            let r = try m.sh("""
            python3 - <<'EOF'
            import ctypes, errno, hashlib, os
            libc = ctypes.CDLL(None, use_errno=True)
            libc.fallocate64.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
            fd = os.open("f", os.O_RDWR | os.O_CREAT, 0o644)
            os.pwrite(fd, bytes(range(256)) * 64, 0)
            before = hashlib.sha256(os.pread(fd, 1 << 20, 0)).hexdigest()
            for mode in (0x08, 0x20):
                rc = libc.fallocate64(fd, mode, 4096, 4096)
                print(mode, rc, errno.errorcode.get(ctypes.get_errno()) if rc else "", os.fstat(fd).st_size,
                      hashlib.sha256(os.pread(fd, 1 << 20, 0)).hexdigest() == before)
            EOF
            """)
            #expect(r.out == "8 -1 ENOTSUP 16384 True\n32 -1 ENOTSUP 16384 True\n", "\(r.out) \(r.err)")
        }
    }

    @Test("truncate -s 64M and a write far past the end store holes: little backing space, zeros read, ext4's bytes",
          arguments: MountedFixture.Kind.allCases)
    func growingStoresHoles(kind: MountedFixture.Kind) throws {
        try withMountAndExt4(kind) { m, reference in try Self.compareGrowth(kind, m, reference) }
    }

    static func compareGrowth(_ kind: MountedFixture.Kind, _ m: MountedFixture, _ reference: Ext4Reference) throws {
        let script = """
        cd "$1" && truncate -s 64M big && printf end | dd of=far bs=1 seek=10485760 conv=notrunc status=none && \
        printf head > grown && truncate -s 5M grown && \
        stat -c '%n %s' big far grown && cmp -n 67108864 big /dev/zero && echo zeros && \
        sha256sum far grown | cut -c1-16
        """
        let onMount = try m.sh("bash -c \(shellQuote(script)) _ \"$M\"")
        let onExt4 = try m.sh("bash -c \(shellQuote(script)) _ \(shellQuote(reference.path))")
        #expect(onMount.status == 0, "\(onMount.err)")
        #expect(onMount.out == onExt4.out, "mount:\n\(onMount.out)\next4:\n\(onExt4.out)")
        #expect(onMount.out.contains("big 67108864\nfar 10485763\ngrown 5242880\nzeros\n"), "\(onMount.out)")
        for (name, size) in [("big", 64 << 20), ("far", 10 << 20), ("grown", 5 << 20)] {
            var backing = stat()
            #expect(lstat(m.backing + "/" + name, &backing) == 0)
            #expect(Int(backing.st_blocks) * 512 < 256 << 10, "\(name): \(Int(backing.st_blocks) * 512) bytes stored for \(size)")
            if kind == .managed {
                let header = try m.backingHeader(name)
                #expect(header?.isEncrypted == true && header?.isSparse == true, "\(name) is not sparse")
            }
            var seen = stat()
            #expect(stat(m.mountpoint + "/" + name, &seen) == 0)
            #expect(Int(seen.st_blocks) * 512 < 256 << 10, "\(name): st_blocks \(seen.st_blocks) through the mount")
        }
        if kind == .managed {
            // A file that never had a hole keeps full integrity: no flag.
            let r = try m.sh("head -c 100000 /dev/urandom > dense && truncate -s 4096 dense && truncate -s 4000 dense")
            #expect(r.status == 0, "\(r.err)")
            #expect(try m.backingHeader("dense")?.isSparse == false)
        }
    }
}
