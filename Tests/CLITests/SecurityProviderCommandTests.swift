import Foundation
import MAMProtection
import Testing
import MAMTestSupport

/// A plaintext marker that appears in no file mamfs writes by itself.
private let marker = Array("<<mamfs-plaintext-marker-7f3a91c2>>".utf8)

/// The paths of every file below `directory` (all depths, hidden ones too) that contain `needle`.
func filesContaining(_ needle: [UInt8], under directory: String) -> [String] {
    var hits: [String] = []
    guard let walker = FileManager.default.enumerator(atPath: directory) else { return hits }
    while let relative = walker.nextObject() as? String {
        let path = directory + "/" + relative
        var st = stat()
        guard lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { continue }
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK)
        guard fd >= 0 else { continue }
        defer { close(fd) }
        let chunk = 8 << 20
        var carry = Data()
        var buffer = [UInt8](repeating: 0, count: chunk)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            var window = carry
            window.append(contentsOf: buffer[0..<n])
            if window.range(of: Data(needle)) != nil {
                hits.append(relative)
                break
            }
            carry = window.suffix(needle.count - 1)
        }
    }
    return hits
}

/// Writes `megabytes` MiB of the marker repeated (with a counter) to `path`.
func writeMarkerFile(_ path: String, megabytes: Int) throws {
    var block = Data()
    var index = 0
    while block.count < 1 << 20 {
        block.append(contentsOf: marker)
        block.append(contentsOf: Array(" \(index)\n".utf8))
        index += 1
    }
    block = block.prefix(1 << 20)
    FileManager.default.createFile(atPath: path, contents: nil)
    let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
    defer { try? handle.close() }
    for _ in 0..<megabytes { try handle.write(contentsOf: block) }
}

/// Regular files below `directory` whose size is above zero, relative path -> size.
func nonEmptyFiles(under directory: String) -> [String: Int] {
    var result: [String: Int] = [:]
    guard let walker = FileManager.default.enumerator(atPath: directory) else { return result }
    while let relative = walker.nextObject() as? String {
        var st = stat()
        if lstat(directory + "/" + relative, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, st.st_size > 0 {
            result[relative] = Int(st.st_size)
        }
    }
    return result
}

@Suite("Security: provider commands")
struct SecurityProviderCommandTests {
    @Test("provider sync killed with SIGKILL in the middle of a managed upload leaves no plaintext in the replica or the state; the next sync removes the leftovers")
    func killedUploadLeavesNoPlaintext() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let remote = sandbox.path("remote")
        let local = sandbox.path("local")
        for directory in [remote, local, sandbox.path("src")] {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        }
        let sync = ["provider", "sync", local, "--remote", remote, "--account", Fixtures.upn]
        #expect(try sandbox.run(sync).status == 0)
        let plain = sandbox.path("src/big.bin")
        let size = 96
        try writeMarkerFile(plain, megabytes: size)
        let encrypt = try sandbox.run(["encrypt", plain, "--account", Fixtures.upn, "-o", local + "/big.bin"])
        #expect(encrypt.status == 0, "\(encrypt.err)")
        #expect(filesContaining(marker, under: local).isEmpty, "the managed file is not encrypted")

        let process = Process()
        process.executableURL = URL(fileURLWithPath: MamfsBinary.path)
        process.arguments = sync + ["--state", sandbox.state]
        process.environment = sandbox.environment
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Kill as soon as a partial copy of the file is being written anywhere: a plain copy in
        // the replica's temp area, or the upload's temp file on the remote.
        let temporary = local + "/.mamfs-provider/tmp"
        var killedMidTransfer = false
        let deadline = Date().addingTimeInterval(Patience.bound(120))
        while Date() < deadline && process.isRunning {
            let partial = nonEmptyFiles(under: temporary).merging(nonEmptyFiles(under: remote)) { a, _ in a }
            if partial.contains(where: { $0.value < size << 20 }) && !sandbox.exists(remote + "/big.bin") {
                kill(process.processIdentifier, SIGKILL)
                killedMidTransfer = true
                break
            }
            usleep(1000)
        }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        #expect(killedMidTransfer, "the kill did not land in the middle of the upload")
        #expect(!sandbox.exists(remote + "/big.bin"), "the upload finished before the kill")
        #expect(filesContaining(marker, under: local) == [], "plaintext of the managed file in the replica")
        #expect(filesContaining(marker, under: sandbox.state) == [], "plaintext of the managed file in the state")

        let again = try sandbox.run(sync)
        #expect(again.status == 0, "\(again.err)")
        #expect(try sandbox.read(remote + "/big.bin") == sandbox.read(plain), "the next sync uploads the plain file")
        var leftovers: [String] = []
        if let walker = FileManager.default.enumerator(atPath: temporary) {
            while let relative = walker.nextObject() as? String {
                var st = stat()
                if lstat(temporary + "/" + relative, &st) == 0, (st.st_mode & S_IFMT) != S_IFDIR { leftovers.append(relative) }
            }
        }
        #expect(leftovers == [], "temp files of the killed sync are still there: \(leftovers)")
        #expect(filesContaining(marker, under: local) == [])
    }

    @Test("provider sync: a remote symlink cafe+U+0301 to outside and a directory caf+U+00E9 stay two items; nothing is written outside the replica")
    func normalizationTwins() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let remote = sandbox.path("remote")
        let local = sandbox.path("local")
        let outside = sandbox.path("outside")
        try sandbox.write("outside/keep.txt", "outside, untouched\n")
        try FileManager.default.createDirectory(atPath: remote, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: local, withIntermediateDirectories: true)
        #expect(symlink(outside, remote + "/cafe\u{0301}") == 0)
        #expect(mkdir(remote + "/caf\u{00E9}", 0o755) == 0)
        try sandbox.write("remote/caf\u{00E9}/inner.txt", "the real directory's file\n")
        let sync = try sandbox.run(["provider", "sync", local, "--remote", remote, "--account", Fixtures.upn])
        #expect(sync.status == 0, "\(sync.err)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside) == ["keep.txt"], "the sync wrote outside the replica")
        #expect(try sandbox.read(outside + "/keep.txt") == Data("outside, untouched\n".utf8))
        let decrypted = sandbox.path("inner.plain")
        let decrypt = try sandbox.run(["decrypt", local + "/caf\u{00E9}/inner.txt", "-o", decrypted])
        #expect(decrypt.status == 0, "\(decrypt.err)")
        #expect(try sandbox.read(decrypted) == Data("the real directory's file\n".utf8))
        var st = stat()
        #expect(lstat(local + "/cafe\u{0301}", &st) == 0 && (st.st_mode & S_IFMT) == S_IFLNK)
    }

    @Test("provider sync skips a remote name that is not valid UTF-8 with an error on stderr, never a lossy name")
    func invalidUTF8RemoteName() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let remote = sandbox.path("remote")
        let local = sandbox.path("local")
        try FileManager.default.createDirectory(atPath: local, withIntermediateDirectories: true)
        try sandbox.write("remote/good.txt", "good\n")
        let bad: [UInt8] = Array(remote.utf8) + [0x2F, 0x62, 0x61, 0x64, 0xFF, 0xFE, 0x2E, 0x74, 0x78, 0x74, 0]
        let fd = bad.withUnsafeBufferPointer { buffer in
            buffer.baseAddress!.withMemoryRebound(to: CChar.self, capacity: buffer.count) { open($0, O_CREAT | O_WRONLY, 0o644) }
        }
        #expect(fd >= 0)
        if fd >= 0 { _ = write(fd, "bad\n", 4); close(fd) }
        let result = try sandbox.run(["provider", "sync", local, "--remote", remote, "--account", Fixtures.upn])
        #expect(result.err.contains("not valid UTF-8"), "no error logged for the name: \(result.err)")
        let names = try FileManager.default.contentsOfDirectory(atPath: local).filter { $0 != ".mamfs-provider" }
        #expect(names == ["good.txt"], "local names: \(names)")
        #expect(!names.contains { $0.unicodeScalars.contains("\u{FFFD}") }, "a lossy name was created")
    }

    @Test("provider sync: a remote .mamfs-provider is skipped (named on stderr, exit 0); the replica's .mamfs-provider holds only the provider's files and is not uploaded")
    func remoteMetadataDirectory() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let remote = sandbox.path("remote")
        let local = sandbox.path("local")
        try FileManager.default.createDirectory(atPath: local, withIntermediateDirectories: true)
        try sandbox.write("remote/.mamfs-provider/evil", "evil\n")
        try sandbox.write("remote/.mamfs-provider/tmp/x", "x\n")
        try sandbox.write("remote/real.txt", "real\n")
        let sync = ["provider", "sync", local, "--remote", remote, "--account", Fixtures.upn]
        for pass in 1...2 {
            let result = try sandbox.run(sync)
            #expect(result.status == 0, "pass \(pass): \(result.err)")
            #expect(result.err.contains("skipped '.mamfs-provider'"), "pass \(pass): the skip is not reported: \(result.err)")
            let own: Set<String> = ["provider.db", "provider.db-wal", "provider.db-shm", "sync.lock", "tmp"]
            let names = try FileManager.default.contentsOfDirectory(atPath: local + "/.mamfs-provider")
            #expect(names.allSatisfy(own.contains), "pass \(pass): foreign entries: \(names)")
            let tmp = try FileManager.default.contentsOfDirectory(atPath: local + "/.mamfs-provider/tmp")
            #expect(tmp.allSatisfy { $0.hasPrefix("s-") }, "pass \(pass): foreign entries in tmp: \(tmp)")
        }
        #expect(try sandbox.read(local + "/.mamfs-provider/provider.db").prefix(16) == Data("SQLite format 3\0".utf8))
        #expect(try FileManager.default.contentsOfDirectory(atPath: remote + "/.mamfs-provider").sorted() == ["evil", "tmp"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: remote + "/.mamfs-provider/tmp") == ["x"])
        #expect(try sandbox.read(remote + "/.mamfs-provider/evil") == Data("evil\n".utf8))
        let status = try sandbox.run(["provider", "status", local + "/real.txt"])
        #expect(status.status == 0, "\(status.err)")
    }
}
