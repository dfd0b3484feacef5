import Foundation
import Glibc
import MAMProtection
import Testing
import MAMTestSupport

private let fuseAvailable: Bool = {
    let fd = open("/dev/fuse", O_RDWR)
    if fd >= 0 { close(fd) }
    return fd >= 0
}()

private let downloadMarker = Array("<<mamfs-download-marker-51c0e8aa>>".utf8)

/// Relative paths of the regular files below `directory` that contain `needle` (hidden ones too).
private func scan(_ directory: String, for needle: [UInt8]) -> [String] {
    var hits: [String] = []
    guard let walker = FileManager.default.enumerator(atPath: directory) else { return hits }
    while let relative = walker.nextObject() as? String {
        var st = stat()
        guard lstat(directory + "/" + relative, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG,
              let handle = FileHandle(forReadingAtPath: directory + "/" + relative) else { continue }
        defer { try? handle.close() }
        var carry = Data()
        while let chunk = try? handle.read(upToCount: 8 << 20), !chunk.isEmpty {
            let window = carry + chunk
            if window.range(of: Data(needle)) != nil { hits.append(relative); break }
            carry = window.suffix(needle.count - 1)
        }
    }
    return hits
}

/// The sizes of the regular files below `directory` (all depths).
private func fileSizes(in directory: String) -> [Int] {
    guard let walker = FileManager.default.enumerator(atPath: directory) else { return [] }
    var sizes: [Int] = []
    while let relative = walker.nextObject() as? String {
        var st = stat()
        if lstat(directory + "/" + relative, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG { sizes.append(Int(st.st_size)) }
    }
    return sizes
}

/// Bytes in the daemon's in-memory download buffer (`memfd:mamfs-download`), 0 when it has none.
private func downloadBufferSize(pid: pid_t) -> Int {
    let directory = "/proc/\(pid)/fd"
    guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return 0 }
    for name in names {
        guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: directory + "/" + name),
              target.hasPrefix("/memfd:mamfs-download") else { continue }
        var st = stat()
        if stat(directory + "/" + name, &st) == 0 { return Int(st.st_size) }
    }
    return 0
}

@Suite("Security: provider mounts", .enabled(if: fuseAvailable), .serialized)
struct SecurityProviderMountTests {
    @Test("non-replicated mount killed with SIGKILL in the middle of materializing a file for an encrypting policy leaves no plaintext in the backing directory or the state; the next mount removes the leftovers")
    func killedDownloadLeavesNoPlaintext() throws {
        let first = try ProviderMount("non-replicated", encrypt: true)
        defer { first.close() }
        let megabytes = 96
        var block = Data()
        var index = 0
        while block.count < 1 << 20 {
            block.append(contentsOf: downloadMarker)
            block.append(contentsOf: Array(" \(index)\n".utf8))
            index += 1
        }
        #expect(FileManager.default.createFile(atPath: first.remote + "/big.bin", contents: nil))
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: first.remote + "/big.bin"))
        for _ in 0..<megabytes { try handle.write(contentsOf: block.prefix(1 << 20)) }
        try handle.close()
        first.close()
        let m = try ProviderMount(reopening: first)
        defer { m.close() }
        var st = stat()
        #expect(lstat(m.backing + "/big.bin", &st) == 0 && st.st_size == 0, "big.bin is not a placeholder")

        let reader = Process()
        reader.executableURL = URL(fileURLWithPath: "/bin/cat")
        reader.arguments = [m.mountpoint + "/big.bin"]
        reader.standardOutput = FileHandle.nullDevice
        reader.standardError = FileHandle.nullDevice
        try reader.run()
        let temporary = m.backing + "/.mamfs-provider/tmp"
        let daemons = FuseMounts.daemonPIDs(serving: m.mountpoint)
        #expect(!daemons.isEmpty)
        var killedMidTransfer = false
        let deadline = Date().addingTimeInterval(Patience.bound(120))
        while Date() < deadline {
            // The download is in flight while the daemon holds its in-memory buffer with bytes in
            // it (the provided copy is linked into the temp area only once it is complete).
            if daemons.contains(where: { downloadBufferSize(pid: $0) > 0 }) || fileSizes(in: temporary).contains(where: { $0 > 0 }) {
                for pid in daemons { kill(pid, SIGKILL) }
                killedMidTransfer = lstat(m.backing + "/big.bin", &st) == 0 && st.st_size == 0
                break
            }
            usleep(1000)
        }
        for pid in daemons where kill(pid, 0) == 0 { kill(pid, SIGKILL) }
        if reader.isRunning { kill(reader.processIdentifier, SIGKILL) }
        reader.waitUntilExit()
        m.close()
        #expect(killedMidTransfer, "the kill did not land while big.bin was being materialized")
        #expect(scan(m.backing, for: downloadMarker) == [], "plaintext of the download in the backing directory")
        #expect(scan(m.state, for: downloadMarker) == [], "plaintext of the download in the state")

        let again = try ProviderMount(reopening: m)
        defer { again.close() }
        let leftovers = fileSizes(in: temporary)
        #expect(leftovers == [], "temp files of the killed mount are still there: \(leftovers)")
        let remote = FileManager.default.contents(atPath: again.remote + "/big.bin")
        #expect(remote != nil && FileManager.default.contents(atPath: again.mountpoint + "/big.bin") == remote)
        #expect(try again.backingHeader("big.bin")?.isEncrypted == true)
        #expect(scan(again.backing, for: downloadMarker) == [])
    }

    @Test("non-replicated mount: reading 300 placeholders one after another leaves the daemon no descriptor of a replaced placeholder (no descriptor leak per download)")
    func materializeKeepsNoReplacedDescriptors() throws {
        let first = try ProviderMount("non-replicated", encrypt: true)
        defer { first.close() }
        try FileManager.default.createDirectory(atPath: first.remote + "/d", withIntermediateDirectories: true)
        for index in 0..<300 {
            #expect(FileManager.default.createFile(atPath: first.remote + "/d/f\(index)", contents: Data("remote \(index)\n".utf8)))
        }
        first.close()
        let m = try ProviderMount(reopening: first)
        defer { m.close() }
        let read = try m.sh(#"cd "$M/d" && for i in $(seq 0 299); do cat "f$i"; done | wc -l"#)
        #expect(read.status == 0 && read.out.trimmingCharacters(in: .whitespacesAndNewlines) == "300", "\(read.out) \(read.err)")
        let pid = try #require(FuseMounts.daemonPIDs(serving: m.mountpoint).first)
        let directory = "/proc/\(pid)/fd"
        let targets = (try FileManager.default.contentsOfDirectory(atPath: directory)).compactMap {
            try? FileManager.default.destinationOfSymbolicLink(atPath: directory + "/" + $0)
        }
        let replaced = targets.filter { $0.hasSuffix(" (deleted)") && $0.contains("/d/f") }
        #expect(replaced.count < 16, "the daemon still holds \(replaced.count) descriptors of replaced placeholders")
        #expect(FileManager.default.contents(atPath: m.mountpoint + "/d/f7") == Data("remote 7\n".utf8))
    }

    @Test("non-replicated mount: a remote symlink cafe+U+0301 to outside and a directory caf+U+00E9 stay two items; listing and reading write nothing outside the backing directory")
    func normalizationTwinsThroughMount() throws {
        let first = try ProviderMount("non-replicated", encrypt: true)
        defer { first.close() }
        let outside = first.base + "/outside"
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        try Data("outside, untouched\n".utf8).write(to: URL(fileURLWithPath: outside + "/keep.txt"))
        #expect(symlink(outside, first.remote + "/cafe\u{0301}") == 0)
        #expect(mkdir(first.remote + "/caf\u{00E9}", 0o755) == 0)
        let inner = Data("the real directory's file\n".utf8)
        try inner.write(to: URL(fileURLWithPath: first.remote + "/caf\u{00E9}/inner.txt"))
        first.close()
        let m = try ProviderMount(reopening: first)
        defer { m.close() }
        let listing = try m.sh("ls -laR \"$M\" >/dev/null && echo listed")
        #expect(listing.out == "listed\n", "\(listing.err)")
        #expect(FileManager.default.contents(atPath: m.mountpoint + "/caf\u{00E9}/inner.txt") == inner)
        let outsideNames = (try? FileManager.default.contentsOfDirectory(atPath: outside)) ?? []
        #expect(outsideNames == ["keep.txt"], "the mount wrote outside the backing directory: \(outsideNames)")
        #expect(FileManager.default.contents(atPath: outside + "/keep.txt") == Data("outside, untouched\n".utf8))
        var st = stat()
        #expect(lstat(m.backing + "/cafe\u{0301}", &st) == 0 && (st.st_mode & S_IFMT) == S_IFLNK)
        #expect(lstat(m.backing + "/caf\u{00E9}", &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR)
        #expect(try m.backingHeader("caf\u{00E9}/inner.txt")?.isEncrypted == true)
    }

    @Test("non-replicated mount: a remote .mamfs-provider is skipped with a line in the mount's log; BACKING/.mamfs-provider holds only the provider's files")
    func remoteMetadataDirectoryThroughMount() throws {
        let first = try ProviderMount("non-replicated", encrypt: true)
        defer { first.close() }
        try FileManager.default.createDirectory(atPath: first.remote + "/.mamfs-provider/tmp", withIntermediateDirectories: true)
        try Data("evil\n".utf8).write(to: URL(fileURLWithPath: first.remote + "/.mamfs-provider/evil3"))
        try Data("x\n".utf8).write(to: URL(fileURLWithPath: first.remote + "/.mamfs-provider/tmp/x"))
        first.close()
        let m = try ProviderMount(reopening: first)
        defer { m.close() }
        let listing = try m.sh("ls -la \"$M\" >/dev/null && echo listed")
        #expect(listing.out == "listed\n", "\(listing.err)")
        let own: Set<String> = ["provider.db", "provider.db-wal", "provider.db-shm", "sync.lock", "queue.lock", "tmp"]
        let names = try FileManager.default.contentsOfDirectory(atPath: m.backing + "/.mamfs-provider")
        #expect(names.allSatisfy(own.contains), "foreign entries in BACKING/.mamfs-provider: \(names)")
        let tmp = try FileManager.default.contentsOfDirectory(atPath: m.backing + "/.mamfs-provider/tmp")
        #expect(tmp.allSatisfy { $0.hasPrefix("s-") }, "foreign entries in BACKING/.mamfs-provider/tmp: \(tmp)")
        #expect(m.read(m.backing + "/.mamfs-provider/provider.db")?.prefix(16) == Data("SQLite format 3\0".utf8))
        let log = (try? String(contentsOfFile: m.log, encoding: .utf8)) ?? ""
        #expect(log.contains("skipped '.mamfs-provider'"), "the mount's log does not name the skipped item")
        #expect(try FileManager.default.contentsOfDirectory(atPath: m.remote + "/.mamfs-provider").sorted() == ["evil3", "tmp"])
    }

    @Test("non-replicated mount: a remote file that became a FIFO does not block the mount; other files open and the FIFO never appears")
    func remoteFIFODoesNotBlock() throws {
        let first = try ProviderMount("non-replicated", encrypt: true)
        defer { first.close() }
        #expect(mkfifo(first.remote + "/pipe", 0o644) == 0)
        first.close()
        let m = try ProviderMount(reopening: first)
        var victimPath = ""
        defer {
            // Releases a worker that may wait in open(2) on the FIFO, so the unmount can finish.
            let fd = open(victimPath, O_WRONLY | O_NONBLOCK)
            if fd >= 0 { close(fd) }
            m.close()
        }
        #expect(!FileManager.default.fileExists(atPath: m.backing + "/pipe"))
        let name = m.someRemoteFiles(2)
        try #require(name.count == 2)
        // The listing made a placeholder for the first file; the remote then turns it into a FIFO.
        let victim = name[0]
        victimPath = m.remote + "/" + victim
        unlink(m.remote + "/" + victim)
        #expect(mkfifo(m.remote + "/" + victim, 0o644) == 0)
        // The O_RDWR open of the FIFO never blocks and releases a worker stuck opening it.
        let result = try m.sh("""
            start=$(date +%s); timeout -k 2 15 cat "$M/\(victim)" >/dev/null 2>&1; code=$?; end=$(date +%s)
            exec 3<>"$R/\(victim)"; exec 3>&-
            echo "$code $((end - start))"
            timeout -k 2 20 cat "$M/\(name[1])" | cmp - "$R/\(name[1])" && echo same
            timeout -k 2 20 ls "$M" >/dev/null && echo listed
            """)
        let lines = result.out.split(separator: "\n").map(String.init)
        let fifoRead = lines.first?.split(separator: " ").map(String.init) ?? []
        // Exit 1 within the 15 s of `timeout` (124/137: it blocked); how long it took is not the
        // point, a loaded machine may take seconds.
        #expect(fifoRead.count == 2 && fifoRead[0] == "1", "cat of the FIFO's placeholder: exit and seconds \(fifoRead) (124/137: it blocked)")
        #expect(lines.contains("same"), "another file could not be read: \(result.out) \(result.err)")
        #expect(lines.contains("listed"))
    }
}
