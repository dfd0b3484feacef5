import Foundation
import Testing
import MAMTestSupport

@Suite("Tools: the demo and the conformance scripts report failures by their exit code")
struct ToolScriptTests {
    static func tool(_ relative: String) -> String { InstalledTree.repository + "/Tools/" + relative }

    @Test("the demo runs every step on a fresh directory, checks them all and exits 0", .enabled(if: InstalledTree.fuseUsable))
    func demo() throws {
        let directory = try TempDirectory(prefix: "mamfs-demo")
        let demoDirectory = directory.file("demo")
        defer {
            FuseMounts.tearDown(demoDirectory + "/mnt")
            FuseMounts.tearDown(demoDirectory + "/cloud")
        }
        let result = try runProcess(Self.tool("demo.sh"), [MamfsBinary.path],
                                    environment: testEnvironment(["MAMFS_DEMO_DIR": demoDirectory]), timeout: 180)
        #expect(result.status == 0, "\(result.out.suffix(2000))\n\(result.err)")
        #expect(!result.err.contains("FAIL"), "\(result.err)")
        let lines = result.out.split(separator: "\n").map(String.init)
        #expect(lines.contains("wipe:      work files and keys gone; personal file survived: yes"))
        #expect(lines.contains("result:    OK"))
        #expect(lines.filter { $0 == "exit code 77" }.count == 2, "a refused import and a refused decrypt after the wipe")
        // What the demo leaves: of the regular files in the backing directory, only the personal one.
        let backing = demoDirectory + "/backing"
        let left = (FileManager.default.enumerator(atPath: backing)?.allObjects as? [String] ?? []).filter { relative in
            var st = stat()
            return lstat(backing + "/" + relative, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG
        }
        #expect(left == ["personal/holiday.txt"], "regular files in the backing directory after the wipe: \(left.sorted())")
        #expect(!FuseMounts.isMounted(demoDirectory + "/mnt") && !FuseMounts.isMounted(demoDirectory + "/cloud"))
    }

    /// The shell scripts of the repository: every `*.sh` under Tools/ and the CI entry point.
    static func shellScripts() -> [String] {
        let tools = InstalledTree.repository + "/Tools"
        let found = (FileManager.default.enumerator(atPath: tools)?.allObjects as? [String] ?? [])
            .filter { $0.hasSuffix(".sh") }.map { tools + "/" + $0 }
        return (found + [InstalledTree.repository + "/.ci/run"]).sorted()
    }

    /// The commands of `text` after a pipe (`|`, not `||`) whose reader may stop before its writer
    /// is done: `head`, `grep -q/-m/-l` (and their long forms), `awk` with `exit`, `sed` with `q`.
    /// Under `set -o pipefail` the writer then dies of SIGPIPE once its output outgrows the pipe's
    /// buffer and the whole pipeline fails with 141, which depends on the output's size and timing.
    static func earlyExitingReaders(_ text: String) -> [String] {
        let joined = text.replacingOccurrences(of: "\\\n", with: " ")
        let reader = #"(?<![|])[|](?![|])\s*(head\b[^|;&]*|grep\s+(-[A-Za-z]*[qml][A-Za-z]*|--quiet|--silent|--max-count|--files-with-matches)[^|;&]*|awk\b[^'|]*'[^']*\bexit\b|sed\b[^|;&]*[0-9/$]q\b[^|;&]*)"#
        guard let expression = try? NSRegularExpression(pattern: reader) else { return ["the pattern does not compile"] }
        return joined.split(separator: "\n").map(String.init)
            .filter { !$0.trimmingCharacters(in: .whitespaces).hasPrefix("#") }
            .filter { expression.firstMatch(in: $0, range: NSRange($0.startIndex..., in: $0)) != nil }
    }

    @Test("a writer piped into `head` or `grep -q` under pipefail fails the pipeline with 141 once its output outgrows the pipe")
    func pipefailSigpipe() throws {
        let script = "set -o pipefail; seq 1 200000 | head -n 1 >/dev/null; echo head=$?; "
            + "seq 1 200000 | grep -q '^1$'; echo grep=$?; "
            + "grep -q '^1$' <<<\"$(seq 1 200000)\"; echo herestring=$?; seq 1 200000 | sed -n 1p >/dev/null; echo sed=$?"
        let result = try runProcess("/bin/bash", ["-c", script], environment: testEnvironment())
        #expect(result.status == 0, "\(result.err)")
        #expect(result.out == "head=141\ngrep=141\nherestring=0\nsed=0\n")
        #expect(Self.earlyExitingReaders("a | head -6\nb | grep -qx mount\nc | awk '{ print; exit }'\nd | sed 1q\ne | grep -E x\nf || head\n# g | head\nh | sed -n 1,6p\ni | \\\n  head -1")
                == ["a | head -6", "b | grep -qx mount", "c | awk '{ print; exit }'", "d | sed 1q", "i |    head -1"])
    }

    @Test("no script of the repository pipes into a reader that stops early (head, grep -q, awk exit): under pipefail that fails by output size")
    func noEarlyExitingReaders() throws {
        let scripts = Self.shellScripts()
        #expect(scripts.count >= 10, "\(scripts)")
        for script in scripts {
            let text = try String(contentsOfFile: script, encoding: .utf8)
            #expect(Self.earlyExitingReaders(text) == [], "\(script)")
        }
    }

    @Test("the WebDAV first-sync bench is executable, parses (bash -n) and says how it is run")
    func webdavBenchParses() throws {
        let script = Self.tool("bench/webdav-first-sync.sh")
        #expect(access(script, X_OK) == 0, "\(script) is not executable")
        let parsed = try runProcess("/bin/bash", ["-n", script], environment: testEnvironment())
        #expect(parsed.status == 0, "\(parsed.err)")
        #expect(parsed.stderr.isEmpty, "\(parsed.err)")
        let help = try String(contentsOfFile: script, encoding: .utf8)
        #expect(help.contains("# usage: Tools/bench/webdav-first-sync.sh PATH/TO/mamfs(release) [TREE=/usr/share/doc] [ROUNDS=3]"))
    }

    @Test("test shards: each listed test runs in exactly one shard (the last skips every other shard's filter); a failing shard fails the run, named with its exit code")
    func testShards() throws {
        let directory = try TempDirectory(prefix: "mamfs-shards")
        let calls = directory.file("calls")
        try FileManager.default.createDirectory(atPath: calls, withIntermediateDirectories: true)
        // A stand-in for the test bundle: lists test IDs of every shard and none, records the
        // arguments of each run, and fails the run whose filter names FAIL_ON.
        let tests = ["MAMFSTests.ProviderMountTests/a()", "MAMFSTests.WebDAVMountTests/b()", "MAMFSTests.BasicMountTests/c()",
                     "MAMFSTests.PageCacheTests/d()", "RobustnessTests.DifferentialTests/e()", "RobustnessTests.CrashTests/f()",
                     "CLITests.UsageTests/g()", "MAMProtectionTests.FormatHoleTests/h()"]
        let bundle = directory.file("bundle")
        try writeExecutable(bundle, """
        #!/bin/bash
        if [[ " $* " == *" --list-tests "* ]]; then printf '%s\\n' \(tests.map(shellQuote).joined(separator: " ")); exit 0; fi
        printf '%s\\n' "$@" > "\(calls)/$BASHPID"
        [[ -n ${FAIL_ON:-} && " $* " == *"$FAIL_ON"* ]] && { echo "shard failed"; exit 3; }
        exit 0
        """)
        let passed = try runProcess(Self.tool("test/run-shards.sh"), [bundle, directory.file("logs")], environment: testEnvironment())
        #expect(passed.status == 0, "\(passed.out)\n\(passed.err)")
        let runs = try FileManager.default.contentsOfDirectory(atPath: calls).map {
            try String(contentsOfFile: calls + "/" + $0, encoding: .utf8).split(separator: "\n").map(String.init)
        }
        let filters = runs.compactMap { args in args.firstIndex(of: "--filter").map { args[$0 + 1] } }
        let rest = runs.filter { !$0.contains("--filter") }
        #expect(runs.count == filters.count + 1 && rest.count == 1, "\(runs)")
        let skips = rest.first.map { args in args.indices.filter { args[$0] == "--skip" }.map { args[$0 + 1] } } ?? []
        #expect(Set(skips) == Set(filters), "the last shard skips exactly the others' filters: \(skips) vs \(filters)")
        // Every test is in exactly one shard: matched by one filter, or by none (the last).
        for test in tests {
            let matching = try filters.filter { try Regex($0).firstMatch(in: test) != nil }
            #expect(matching.count <= 1, "\(test) is in shards \(matching)")
        }
        #expect(try tests.contains { test in try filters.allSatisfy { try Regex($0).firstMatch(in: test) == nil } }, "some test is left to the last shard")
        #expect(passed.out.components(separatedBy: "exit 0, ").count - 1 == runs.count, "\(passed.out)")

        try FileManager.default.removeItem(atPath: calls)
        try FileManager.default.createDirectory(atPath: calls, withIntermediateDirectories: true)
        let failed = try runProcess(Self.tool("test/run-shards.sh"), [bundle, directory.file("logs")],
                                    environment: testEnvironment(["FAIL_ON": "--filter ^RobustnessTests"]))
        #expect(failed.status == 1, "\(failed.out)\n\(failed.err)")
        #expect(failed.out.contains("shard failed"), "the failing shard's log is printed")
        #expect(failed.out.components(separatedBy: "exit 3, ").count - 1 == 2, "both robustness shards fail by their exit code: \(failed.out)")

        let unlistable = directory.file("unlistable")
        try writeExecutable(unlistable, "#!/bin/bash\nexit 1\n")
        let refused = try runProcess(Self.tool("test/run-shards.sh"), [unlistable, directory.file("logs")], environment: testEnvironment())
        #expect(refused.status == 1 && refused.err.contains("cannot list the tests"), "\(refused.err)")
    }

    @Test("conformance: without the third-party directory the run is skipped with a message and exit 0")
    func conformanceSkipped() throws {
        let missing = try TempDirectory(prefix: "mamfs-no-third-party")
        let result = try runProcess(Self.tool("conformance/run.sh"), [MamfsBinary.path],
                                    environment: testEnvironment(["MAMFS_THIRD_PARTY": missing.file("absent")]))
        #expect(result.status == 0, "\(result.err)")
        #expect(result.out == "conformance: skipped: no third-party suites at \(missing.file("absent")) (set MAMFS_THIRD_PARTY to the directory holding build.sh, pjdfstest/ and xfstests/)\n")
    }

    @Test("conformance check-mount: 0 for a sound mount, 1 naming the file for an EIO, 1 for a dead daemon", .enabled(if: InstalledTree.fuseUsable))
    func checkMount() throws {
        let (sandbox, backing, mountpoint) = try MountTests.mountSandbox()
        defer { FuseMounts.tearDown(mountpoint) }
        let mount = try sandbox.run(["mount", backing, mountpoint, "--account", Fixtures.upn, "-o", "attr_timeout=0,entry_timeout=0"])
        #expect(mount.status == 0, "\(mount.err)")
        guard mount.status == 0, let pid = FuseMounts.daemonPIDs(serving: mountpoint).first else { return }
        try Fixtures.binary(20_000).write(to: URL(fileURLWithPath: mountpoint + "/data"))
        try Data("ok\n".utf8).write(to: URL(fileURLWithPath: mountpoint + "/note"))
        let check = { try runProcess(Self.tool("conformance/check-mount.sh"), [mountpoint, String(pid)], environment: testEnvironment()) }

        let sound = try check()
        #expect(sound.status == 0, "\(sound.err)")
        #expect(sound.out.hasSuffix("daemon \(pid) alive, 2 files read, 0 failed\n"), "\(sound.out)")

        // One flipped bit in the first block of the encrypted backing file: reads of it fail with EIO.
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: backing + "/data"))
        try handle.seek(toOffset: 500)
        let byte = try #require(try handle.read(upToCount: 1)?.first)
        try handle.seek(toOffset: 500)
        try handle.write(contentsOf: [byte ^ 1])
        try handle.close()
        let damaged = try check()
        #expect(damaged.status == 1)
        #expect(damaged.out.hasSuffix("2 files read, 1 failed\n"), "\(damaged.out)")
        #expect(damaged.err.contains("cannot read \(mountpoint)/data: ") && damaged.err.contains("Input/output error"), "\(damaged.err)")

        kill(pid, SIGKILL)
        Patience.waitUntil(5) { kill(pid, 0) != 0 }
        let dead = try check()
        #expect(dead.status == 1)
        #expect(dead.err == "the daemon (pid \(pid)) of \(mountpoint) is gone\n")
    }

    @Test("conformance fsx: a run that fails makes the part fail, naming the seed and its exit code")
    func fsxFailure() throws {
        let directory = try TempDirectory(prefix: "mamfs-fsx")
        let tools = directory.file("tools")
        try FileManager.default.createDirectory(atPath: tools, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: directory.file("mnt"), withIntermediateDirectories: true)
        // A stand-in fsx that fails for seed 2 only.
        try writeExecutable(tools + "/fsx", "#!/bin/sh\ncase \" $* \" in *\" -S 2 \"*) echo 'op 17 failed'; exit 3 ;; esac\necho 'All 10 operations completed A-OK!'\n")
        let result = try runProcess(Self.tool("conformance/fsx.sh"), [directory.file("mnt"), tools, "2", "10", directory.file("logs")],
                                    environment: testEnvironment())
        #expect(result.status == 1)
        #expect(result.out == """
            fsx mmap seed 1: All 10 operations completed A-OK!
            fsx nommap seed 1: All 10 operations completed A-OK!

            """)
        #expect(result.err.contains("fsx mmap seed 2: FAILED (exit 3), see \(directory.file("logs"))/fsx-mmap-2.log\nop 17 failed\n"), "\(result.err)")
        #expect(result.err.contains("fsx nommap seed 2: FAILED (exit 3)"))
    }
}
