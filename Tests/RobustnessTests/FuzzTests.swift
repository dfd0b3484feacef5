import Foundation
import MAMProtection
import Testing
import MAMTestSupport

/// Part 5: libFuzzer over ProtectedFileHeader.decode and DataProtectionManager.unprotect
/// (Tools/fuzz: swiftc -sanitize=fuzzer,address), bounded in CI; saved crash inputs replay here.
@Suite("Format fuzzing")
struct FuzzTests {
    @Test("libFuzzer runs the header parser and unprotect-data for a bounded time without a crash")
    func libFuzzer() throws {
        let start = Date()
        let seconds = Robust.soak ? Robust.knob("FUZZ_SECONDS", 1800) : Robust.knob("FUZZ_SECONDS", 30)
        let work = "/tmp/mamfs-fuzz-\(UUID().uuidString.prefix(8).lowercased())"
        defer { try? FileManager.default.removeItem(atPath: work) }
        // `make test` builds the fuzzer without optimization: 48 CPU-seconds instead of 118 (the
        // CPUs are the whole test run's limit), assert() checks on, about a fifth of -O's
        // executions per second; `make soak` builds it with -O. FUZZ_OPTIMIZE overrides both.
        let optimize = ProcessInfo.processInfo.environment["FUZZ_OPTIMIZE"] ?? (Robust.soak ? "-O" : "-Onone")
        // The timeout catches a hang, not slowness: the -O sanitizer build alone takes 2 min on
        // an idle two-CPU machine and over 7 beside the other test shards of `make test`.
        let result = try shell("\(shellQuote(Robust.root + "/Tools/fuzz/run.sh")) \(shellQuote(Robust.mamfs)) \(seconds) \(shellQuote(work))",
                               environment: ["FUZZ_OPTIMIZE": optimize], timeout: TimeInterval(seconds + 1200))
        print(result.out.trimmingCharacters(in: .whitespacesAndNewlines) + ", \(elapsed(start)) including the build")
        let crashes = (try? FileManager.default.contentsOfDirectory(atPath: work + "/crashes")) ?? []
        let saved = crashes.map { name -> String in
            let bytes = FileManager.default.contents(atPath: work + "/crashes/" + name) ?? Data()
            return "\(name): \(bytes.base64EncodedString())"
        }
        #expect(result.status == 0, "fuzzing failed (\(result.status)); save each input below as Tests/RobustnessTests/Regressions/fuzz/<name>.bin:\n\(saved.joined(separator: "\n"))\n\(result.err.suffix(4000))")
    }

    @Test("Saved fuzz inputs (Regressions/fuzz/*) decode or fail cleanly")
    func savedFuzzInputs() throws {
        let dir = Robust.regressions + "/fuzz"
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).sorted()
        let root = "/tmp/mamfs-fuzzreplay-\(UUID().uuidString.prefix(8).lowercased())"
        defer { try? FileManager.default.removeItem(atPath: root) }
        let context = try ProtectionContext.initialize(stateDirectory: StateDirectory(path: root), passphraseFile: nil)
        _ = try context.enrollment.enroll(accountId: "8c7f3e1a-0000-4000-8000-000000000001", upn: nil, policy: .demoEncrypting)
        for name in names {
            let data = FileManager.default.contents(atPath: dir + "/" + name) ?? Data()
            let header = try? data.withUnsafeBytes { try ProtectedFileHeader.decode($0) }
            if let header {
                let encoded = header.encoded()
                #expect(encoded.count <= data.count && Array(data.prefix(encoded.count)) == encoded, "\(name): round trip")
            }
            if let plain = try? context.data.unprotect(data), header == nil {
                #expect(plain == data, "\(name): untagged input changed")
            }
        }
    }

    /// A seeded mutator in the test process (no sanitizer): 20,000 mutations of valid
    /// encrypted and plain buffers; any that unprotects must be byte-identical to the original
    /// plaintext (a mutation that leaves the file valid can only be a whole-block truncation).
    @Test("Seeded mutations of protected buffers never unprotect to wrong plaintext")
    func seededMutations() throws {
        let start = Date()
        let root = "/tmp/mamfs-mutate-\(UUID().uuidString.prefix(8).lowercased())"
        defer { try? FileManager.default.removeItem(atPath: root) }
        let context = try ProtectionContext.initialize(stateDirectory: StateDirectory(path: root), passphraseFile: nil)
        let account = "8c7f3e1a-0000-4000-8000-000000000001"
        _ = try context.enrollment.enroll(accountId: account, upn: nil, policy: .demoEncrypting)
        var rng = SplitMix64(seed: 2026)
        let iterations = Robust.soak ? 1_000_000 : 20_000
        var accepted = 0
        for i in 0..<iterations {
            let size = [0, 1, 100, 4095, 4096, 4097, 9000][Int(rng.next() % 7)]
            let plain = Data((0..<size).map { _ in UInt8(truncatingIfNeeded: rng.next()) })
            let protected = try context.data.protect(plain, accountId: i % 5 == 0 ? "" : account)
            var bytes = [UInt8](protected)
            let mutations = 1 + Int(rng.next() % 3)
            for _ in 0..<mutations {
                switch rng.next() % 5 {
                case 0 where !bytes.isEmpty: bytes[Int(rng.next() % UInt64(bytes.count))] ^= UInt8(1 << (rng.next() % 8))
                case 1 where !bytes.isEmpty: bytes.removeLast(Int(rng.next() % UInt64(min(bytes.count, 64))) + 1)
                case 2: bytes.append(contentsOf: (0..<Int(rng.next() % 40)).map { _ in UInt8(truncatingIfNeeded: rng.next()) })
                case 3 where bytes.count > 12: bytes[10 + Int(rng.next() % 3)] = UInt8(truncatingIfNeeded: rng.next())
                default: if !bytes.isEmpty { bytes[Int(rng.next() % UInt64(min(bytes.count, 140)))] = UInt8(truncatingIfNeeded: rng.next()) }
                }
            }
            guard let out = try? context.data.unprotect(Data(bytes)) else { continue }
            accepted += 1
            let header = try? bytes.withUnsafeBytes { try ProtectedFileHeader.decode($0) }
            if header == nil {
                #expect(out == Data(bytes), "iteration \(i): untagged input changed")
            } else if header?.isEncrypted == true {
                // Undetected by design: truncation at a block boundary (a prefix of the plaintext).
                #expect(plain.starts(with: out) && out.count % 4096 == 0 || out == plain,
                        "iteration \(i): mutated encrypted buffer unprotected to \(out.count) bytes that are not the plaintext")
            }
        }
        print("mutator: \(iterations) mutated buffers, \(accepted) accepted, \(elapsed(start))")
    }
}
