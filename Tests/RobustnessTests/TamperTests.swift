import Foundation
import Glibc
import MAMProtection
import Testing
import MAMTestSupport

/// Part 4: tampered backing files through the mount and through the CLI.
@Suite("Tampered files through the mount and the CLI")
struct TamperTests {
    /// One way to damage an encrypted file. `a`/`b` are the backing bytes of two encrypted
    /// files of the same account; H is a's header length.
    struct Tamper: Sendable {
        let name: String
        /// Exit codes the CLI may give (65 = authentication failure; 77 = unknown owner).
        let cliCodes: Set<Int32>
        let apply: @Sendable (_ a: [UInt8], _ b: [UInt8], _ headerLength: Int) -> [UInt8]
    }

    static let block = 4124

    static func tampers(seed: UInt64) -> [Tamper] {
        var rng = SplitMix64(seed: seed)
        var list: [Tamper] = []
        // Bit flips: every header byte after the magic, and random body bytes.
        var offsets = Set([8, 9, 10, 11, 12, 13, 48, 49, 52, 53, 68, 69, 80, 81, 112, 113, 128])
        while offsets.count < 28 { offsets.insert(8 + Int(rng.next() % 121)) }
        for offset in offsets.sorted() {
            let bit = UInt8(1) << UInt8(rng.next() % 8)
            // Owner and key id are stored in the clear: a flip there may name an owner or key id
            // this state does not have, which is "key unavailable" (77, EACCES), not 65.
            let clearIdentity = offset >= 13 && offset < 53
            list.append(Tamper(name: "flip header byte \(offset)", cliCodes: clearIdentity ? [65, 77] : [65]) { a, _, _ in
                var d = a; d[offset] ^= bit; return d
            })
        }
        for _ in 0..<12 {
            let r = rng.next()
            list.append(Tamper(name: "flip body bit \(r % 1_000_003)", cliCodes: [65]) { a, _, h in
                var d = a; let i = h + Int(r % UInt64(a.count - h)); d[i] ^= UInt8(1) << UInt8(r % 8); return d
            })
        }
        list += [
            Tamper(name: "truncate inside the header", cliCodes: [65]) { a, _, h in Array(a.prefix(h - 5)) },
            Tamper(name: "truncate to 13 bytes", cliCodes: [65]) { a, _, _ in Array(a.prefix(13)) },
            Tamper(name: "truncate to an invalid body length", cliCodes: [65]) { a, _, h in Array(a.prefix(h + block + 10)) },
            Tamper(name: "truncate inside the last block", cliCodes: [65]) { a, _, _ in Array(a.dropLast(7)) },
            Tamper(name: "swap blocks 0 and 1", cliCodes: [65]) { a, _, h in
                Array(a[0..<h]) + Array(a[(h + block)..<(h + 2 * block)]) + Array(a[h..<(h + block)]) + Array(a[(h + 2 * block)...])
            },
            Tamper(name: "duplicate block 0 over block 1", cliCodes: [65]) { a, _, h in
                Array(a[0..<(h + block)]) + Array(a[h..<(h + block)]) + Array(a[(h + 2 * block)...])
            },
            Tamper(name: "block 1 copied from another file", cliCodes: [65]) { a, b, h in
                Array(a[0..<(h + block)]) + Array(b[(h + block)..<(h + 2 * block)]) + Array(a[(h + 2 * block)...])
            },
            Tamper(name: "header copied from another file", cliCodes: [65]) { a, b, h in Array(b[0..<h]) + Array(a[h...]) },
            Tamper(name: "append 50 garbage bytes", cliCodes: [65]) { a, _, _ in a + [UInt8](repeating: 0x5A, count: 50) },
            Tamper(name: "append a whole block of another file", cliCodes: [65]) { a, b, h in a + Array(b[(h + block)..<(h + 2 * block)]) },
            Tamper(name: "header length 0xFFFF", cliCodes: [65]) { a, _, _ in var d = a; d[10] = 0xFF; d[11] = 0xFF; return d },
            Tamper(name: "header length 0", cliCodes: [65]) { a, _, _ in var d = a; d[10] = 0; d[11] = 0; return d },
            Tamper(name: "owner length 255 with a matching header length", cliCodes: [65]) { a, _, _ in
                var d = a; d[12] = 255; d[10] = UInt8((93 + 255) & 0xFF); d[11] = UInt8((93 + 255) >> 8); return d
            },
            Tamper(name: "owner length 0 (encrypted without owner)", cliCodes: [65]) { a, _, _ in
                var d = a; d[12] = 0; d[10] = 93; d[11] = 0; return d
            },
            Tamper(name: "version 2", cliCodes: [65]) { a, _, _ in var d = a; d[8] = 2; return d },
            Tamper(name: "unknown flag bit", cliCodes: [65]) { a, _, _ in var d = a; d[9] |= 0x80; return d },
            Tamper(name: "owner in upper case (not canonical)", cliCodes: [65]) { a, _, _ in
                var d = a; for i in 13..<49 where d[i] >= 0x61 && d[i] <= 0x66 { d[i] -= 0x20 }; return d
            },
            Tamper(name: "header claiming another owner", cliCodes: [65, 77]) { a, _, _ in
                var d = a; let other = Array(RobustMount.otherAccount.utf8); for i in 0..<36 { d[13 + i] = other[i] }; return d
            },
        ]
        return list
    }

    @Test("Every tamper: EIO or EACCES through the mount with a log line, CLI 65, never plaintext, no hang")
    func tamperedFiles() throws {
        let start = Date()
        let mount = try RobustMount(.managed)
        defer { mount.close() }
        // Three blocks and a short fourth one.
        var rng = SplitMix64(seed: 42)
        let plaintext = (0..<(3 * 4096 + 1000)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
        try Data(plaintext).write(to: URL(fileURLWithPath: mount.mountpoint + "/a"))
        try Data(plaintext.reversed()).write(to: URL(fileURLWithPath: mount.mountpoint + "/b"))
        mount.close()
        let a = [UInt8](try Data(contentsOf: URL(fileURLWithPath: mount.backing + "/a")))
        let b = [UInt8](try Data(contentsOf: URL(fileURLWithPath: mount.backing + "/b")))
        let header = try a.withUnsafeBytes { try ProtectedFileHeader.decode($0) }
        #expect(header?.isEncrypted == true && header?.length == 129)
        let h = header?.length ?? 129
        let tampers = TamperTests.tampers(seed: 7)
        try FileManager.default.createDirectory(atPath: mount.backing + "/t", withIntermediateDirectories: true)
        for (index, tamper) in tampers.enumerated() {
            let bytes = tamper.apply(a, b, h)
            try Data(bytes).write(to: URL(fileURLWithPath: mount.backing + "/t/\(index)"))
        }
        try mount.mount()
        var failures: [String] = []
        var unlogged: [String] = []
        for (index, tamper) in tampers.enumerated() {
            let rel = "t/\(index)"
            let logBefore = mount.logText.count
            // Read the whole file (dd reports the errno) and a block-sized read at each block.
            let read = try mount.sh("dd if=\(rel) bs=64k status=none | sha256sum; echo \"${PIPESTATUS[0]}\"", timeout: 20)
            let readBack = try mount.sh("cat \(rel) > /dev/null", timeout: 20)
            let errText = read.err + readBack.err
            if read.status == 124 || readBack.status == 124 { failures.append("\(tamper.name): read hung") }
            if readBack.status == 0 { failures.append("\(tamper.name): the mount read it without an error") }
            if !(errText.contains("Input/output error") || errText.contains("Permission denied")) {
                failures.append("\(tamper.name): read error is not EIO/EACCES: \(errText)")
            }
            // Block by block: whatever a read returns must be the true plaintext at that offset.
            let partial = try mount.sh("python3 -c \"import os\nfd=os.open('\(rel)',os.O_RDONLY)\nfor off in range(0,20480,4096):\n  try: print(off, os.pread(fd,4096,off).hex())\n  except OSError as e: print(off, 'E')\"", timeout: 20)
            for line in partial.out.split(separator: "\n") {
                let f = line.split(separator: " ", omittingEmptySubsequences: false)
                guard f.count == 2, let off = Int(f[0]), f[1] != "E" else { continue }
                let expected = plaintext.count > off ? plaintext[off..<min(plaintext.count, off + 4096)].map { String(format: "%02x", $0) }.joined() : ""
                if String(f[1]) != expected { failures.append("\(tamper.name): pread at \(off) returned \(f[1].count / 2) bytes that are not the plaintext") }
            }
            usleep(20_000)
            // A line is written; that it names the file is checked by malformedHeaderIsListedAndLogged.
            if !mount.logText.dropFirst(logBefore).contains("authentication failed") { unlogged.append("\(tamper.name) (\(errText.contains("Permission") ? "EACCES" : "EIO"))") }
            // The CLI on the backing file.
            let decrypt = try mount.mamfs(["decrypt", mount.backing + "/" + rel, "-o", mount.base + "/out-\(index)"], check: false, timeout: 20)
            if !tamper.cliCodes.contains(decrypt.status) { failures.append("\(tamper.name): mamfs decrypt exited \(decrypt.status): \(decrypt.err)") }
            if FileManager.default.fileExists(atPath: mount.base + "/out-\(index)"),
               let out = FileManager.default.contents(atPath: mount.base + "/out-\(index)"), !out.isEmpty {
                failures.append("\(tamper.name): mamfs decrypt wrote \(out.count) bytes of output")
            }
            let unprotect = try shell("\(shellQuote(Robust.mamfs)) unprotect-data --state \(shellQuote(mount.state)) < \(shellQuote(mount.backing + "/" + rel)) | wc -c; exit ${PIPESTATUS[0]}", timeout: 20)
            if !tamper.cliCodes.contains(unprotect.status) { failures.append("\(tamper.name): mamfs unprotect-data exited \(unprotect.status): \(unprotect.err)") }
            if unprotect.out.trimmingCharacters(in: .whitespacesAndNewlines) != "0" { failures.append("\(tamper.name): unprotect-data printed \(unprotect.out) bytes") }
        }
        // The daemon survived all of it and still serves the intact file.
        let intact = try mount.sh("cmp <(cat a) <(cat a) && stat -c %s a")
        #expect(intact.out.trimmingCharacters(in: .whitespacesAndNewlines) == "\(plaintext.count)", "\(intact.err)")
        #expect(mount.daemonPIDs.count == 1, "the daemon died")
        print("tamper: \(tampers.count) tampered files, \(elapsed(start)); without a log line: \(unlogged.count)")
        let report = failures.prefix(40).joined(separator: "\n")
        #expect(failures.isEmpty, "\(failures.count) faults:\n\(report)")
        // EACCES for a foreign owner has its own test (foreignOwnerIsLogged).
        let unloggedEIO = unlogged.filter { $0.hasSuffix("(EIO)") }
        #expect(unloggedEIO.isEmpty, "EIO without an authentication log line: \(unloggedEIO)")
    }

    @Test("Regression: a file whose header names an account this state does not know gives EACCES with a log line")
    func foreignOwnerIsLogged() throws {
        let mount = try RobustMount(.managed)
        defer { mount.close() }
        try Data("secret".utf8).write(to: URL(fileURLWithPath: mount.mountpoint + "/a"))
        mount.close()
        var d = [UInt8](try Data(contentsOf: URL(fileURLWithPath: mount.backing + "/a")))
        let other = Array(RobustMount.otherAccount.utf8)
        for i in 0..<36 { d[13 + i] = other[i] }
        try Data(d).write(to: URL(fileURLWithPath: mount.backing + "/foreign"))
        try mount.mount()
        let read = try mount.sh("cat foreign", timeout: 20)
        #expect(read.status != 0 && read.err.contains("Permission denied"), "\(read.out) \(read.err)")
        usleep(50_000)
        #expect(mount.logText.contains("foreign"), "no log line: \(mount.logText)")
    }

    @Test("Regression: a file with a malformed header stays listed, stat gives EIO, the log line names it")
    func malformedHeaderIsListedAndLogged() throws {
        let mount = try RobustMount(.managed)
        defer { mount.close() }
        try Data("secret".utf8).write(to: URL(fileURLWithPath: mount.mountpoint + "/a"))
        mount.close()
        var d = [UInt8](try Data(contentsOf: URL(fileURLWithPath: mount.backing + "/a")))
        d[9] ^= 0x04  // unknown flag bit
        try Data(d).write(to: URL(fileURLWithPath: mount.backing + "/badflags"))
        try Data(d.prefix(100)).write(to: URL(fileURLWithPath: mount.backing + "/cutheader"))
        try mount.mount()
        let listing = try mount.sh("ls")
        #expect(listing.out.split(separator: "\n").sorted() == ["a", "badflags", "cutheader"], "ls shows \(listing.out)")
        let stat = try mount.sh("stat badflags")
        #expect(stat.status != 0 && stat.err.contains("Input/output error"), "\(stat.err)")
        usleep(50_000)
        #expect(mount.logText.contains("badflags") && mount.logText.contains("cutheader"), "log: \(mount.logText)")
    }
}
