import Foundation
import Testing
import MAMTestSupport

@Suite("Security: encrypt -o and decrypt -o never replace what is not a regular file")
struct SecurityOutputTests {
    func encryptedFile(_ sandbox: Sandbox, _ relative: String, _ data: Data) throws -> String {
        let path = try sandbox.write(relative, data)
        let result = try sandbox.run(["encrypt", path, "--account", Fixtures.account])
        guard result.status == 0 else { throw SandboxError.failed("encrypt", result) }
        return path
    }

    @Test("decrypt -o and encrypt -o to a symlink: 73, the symlink and its target are untouched")
    func outputSymlinkIsRefused() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let source = try encryptedFile(sandbox, "in/secret.txt", Data("SECRET-MARKER\n".utf8))
        let target = try sandbox.write("target.txt", "keep me\n")
        let link = sandbox.path("link")
        #expect(symlink(target, link) == 0)
        for arguments in [["decrypt", source, "-o", link],
                          ["encrypt", try sandbox.write("plain.txt", "plain\n"), "--account", Fixtures.account, "-o", link]] {
            let result = try sandbox.run(arguments)
            #expect(result.status == 73, "\(arguments[0]): \(result.status) \(result.err)")
            #expect(result.err.contains("not a regular file"), "\(result.err)")
            var st = stat()
            #expect(lstat(link, &st) == 0 && (st.st_mode & S_IFMT) == S_IFLNK, "the symlink was replaced")
            #expect(try sandbox.read(target) == Data("keep me\n".utf8))
        }
    }

    @Test("encrypt, decrypt and protect in place refuse a symlink (73): the link stays, its target is untouched")
    func inPlaceSymlinkIsRefused() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let target = try sandbox.write("real.txt", "PLAINTEXT-MARKER real\n")
        let link = sandbox.path("link.txt")
        #expect(symlink(target, link) == 0)
        for arguments in [["encrypt", link, "--account", Fixtures.account], ["protect", link, "--account", Fixtures.account]] {
            let result = try sandbox.run(arguments)
            #expect(result.status == 73, "\(arguments[0]): \(result.status) \(result.err)")
            var st = stat()
            #expect(lstat(link, &st) == 0 && (st.st_mode & S_IFMT) == S_IFLNK, "\(arguments[0]) replaced the symlink")
            #expect(try sandbox.read(target) == Data("PLAINTEXT-MARKER real\n".utf8))
        }
        let encrypted = try sandbox.write("enc.txt", "secret\n")
        #expect(try sandbox.run(["encrypt", encrypted, "--account", Fixtures.account]).status == 0)
        let encryptedLink = sandbox.path("enc-link.txt")
        #expect(symlink(encrypted, encryptedLink) == 0)
        let decrypt = try sandbox.run(["decrypt", encryptedLink])
        #expect(decrypt.status == 73, "\(decrypt.status) \(decrypt.err)")
        var st = stat()
        #expect(lstat(encryptedLink, &st) == 0 && (st.st_mode & S_IFMT) == S_IFLNK, "decrypt replaced the symlink with plaintext")
    }

    @Test("decrypt -o to a FIFO: 73 without blocking, the FIFO stays")
    func outputFIFOIsRefused() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let source = try encryptedFile(sandbox, "in/secret.txt", Data("SECRET-MARKER\n".utf8))
        let fifo = sandbox.path("fifo")
        #expect(mkfifo(fifo, 0o600) == 0)
        var env = sandbox.environment
        env["MAMFS_STATE"] = sandbox.state
        let result = try runProcess("/usr/bin/timeout", ["-s", "KILL", "20", MamfsBinary.path, "decrypt", source, "-o", fifo],
                                    stdin: Data(), environment: env)
        #expect(result.status == 73, "\(result.status) \(result.err)")
        var st = stat()
        #expect(lstat(fifo, &st) == 0 && (st.st_mode & S_IFMT) == S_IFIFO, "the FIFO was replaced")
    }

    @Test("protect, info and encrypt of a FIFO fail at once instead of blocking on it")
    func inputFIFODoesNotBlock() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let fifo = sandbox.path("in-fifo")
        #expect(mkfifo(fifo, 0o600) == 0)
        var env = sandbox.environment
        env["MAMFS_STATE"] = sandbox.state
        for arguments in [["protect", fifo, "--account", Fixtures.account], ["info", fifo],
                          ["encrypt", fifo, "--account", Fixtures.account]] {
            let result = try runProcess("/usr/bin/timeout", ["-s", "KILL", "10", MamfsBinary.path] + arguments, stdin: Data(), environment: env)
            #expect(result.status != 0 && result.status != 137, "\(arguments[0]): \(result.status) \(result.err)")
            #expect(result.err.contains("not a regular file"), "\(arguments[0]): \(result.err)")
        }
    }

    @Test("decrypt -o - writes the plaintext to stdout; encrypt -o - writes the protected bytes")
    func outputDashIsStdout() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let plaintext = Fixtures.binary(20_000)
        let source = try encryptedFile(sandbox, "in/data.bin", plaintext)
        let stored = try sandbox.read(source)
        let decrypt = try sandbox.run(["decrypt", source, "-o", "-"])
        #expect(decrypt.status == 0, "\(decrypt.err)")
        #expect(decrypt.stdout == plaintext)
        #expect(try sandbox.read(source) == stored, "the source stays encrypted")
        #expect(!sandbox.exists(FileManager.default.currentDirectoryPath + "/-"))

        let plain = try sandbox.write("plain.bin", plaintext)
        let encrypt = try sandbox.run(["encrypt", plain, "--account", Fixtures.account, "-o", "-"])
        #expect(encrypt.status == 0, "\(encrypt.err)")
        #expect(encrypt.stdout.prefix(8) == Data([0x89, 0x4D, 0x41, 0x4D, 0x46, 0x53, 0x0D, 0x0A]))
        let back = try sandbox.run(["unprotect-data"], stdin: encrypt.stdout)
        #expect(back.stdout == plaintext)
    }

    /// Paths the process `pid` has open.
    func openPaths(_ pid: Int32) -> [String] {
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
        return fds.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\($0)") }
    }

    @Test("kill -9 during a large decrypt -o leaves no plaintext in the output directory")
    func killedDecryptLeavesNoPlaintext() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let marker = "PLAINTEXT-MARKER-7f3e"
        var plaintext = Data()
        let line = Data("\(marker) this line repeats to make a large file\n".utf8)
        while plaintext.count < 96 << 20 { plaintext.append(line) }
        let source = try encryptedFile(sandbox, "in/big.txt", plaintext)
        plaintext = Data()
        let outputDirectory = sandbox.path("out")
        try FileManager.default.createDirectory(atPath: outputDirectory, withIntermediateDirectories: true)

        let process = Process()
        process.executableURL = URL(fileURLWithPath: MamfsBinary.path)
        process.arguments = ["decrypt", source, "-o", outputDirectory + "/big.txt", "--state", sandbox.state]
        process.environment = sandbox.environment
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
        }
        // Kill it once it writes into the output directory, at the latest after 10 s.
        var writing = false
        for _ in 0..<2000 where process.isRunning {
            if openPaths(process.processIdentifier).contains(where: { $0.hasPrefix(outputDirectory + "/") }) {
                writing = true
                usleep(50_000)
                break
            }
            usleep(5_000)
        }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        #expect(writing, "decrypt never wrote into the output directory")
        #expect(process.terminationReason == .uncaughtSignal, "decrypt finished before it was killed")
        let names = try FileManager.default.contentsOfDirectory(atPath: outputDirectory)
        for name in names {
            let bytes = try Data(contentsOf: URL(fileURLWithPath: outputDirectory + "/" + name))
            #expect(!bytes.contains(marker), "\(name) holds plaintext after kill -9")
        }
        #expect(names.isEmpty, "left behind: \(names)")
    }
}
