import Foundation
import Glibc
import MAMProtection
import MAMTestSupport
import Testing

/// Caller-aware rules through real mounts. The managed app is a copy of real programs (cp,
/// cat, touch, setfattr) in the test's own bin directory, named by the policy's `managedApps`;
/// the system's /bin/cat and the rest are unmanaged.
@Suite("Enforcement: managed apps, work files and the audit log through a mount")
struct EnforcementMountTests {
    static func realPath(_ path: String) -> String {
        guard let resolved = realpath(path, nil) else { return path }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// The managed account's policy: encrypted files, the test's bin directory as the managed
    /// apps, work data only for them, no user decrypt, at `level`; `extra` adds keys.
    static func policy(_ m: MountedFixture, level: String, extra: String = "") -> String {
        let bin = realPath(m.base) + "/bin/"
        return """
        {"fileEncryptionRequired": true, "fileProviderEncryptFiles": true,
         "managedApps": [{"path": "\(bin)"}], "sendData": "managedApps", "allowUserDecrypt": false,
         "protectionLevel": "\(level)"\(extra)}
        """
    }

    /// Copies the managed programs, makes work.txt (a work file of the mount's account), a
    /// personal directory `pers` (tagged ""), a work directory `wd` and `share`, then sets
    /// the policy (as the admin would, while the mount runs).
    static func prepare(_ m: MountedFixture, level: String, extra: String = "") throws {
        let setup = try m.sh("""
        mkdir -p "$BASE/bin" && for p in cp cat touch setfattr; do cp "$(command -v $p)" "$BASE/bin/"; done && \
        printf 'work-secret' > work.txt && mkdir pers wd share && setfattr -n user.mam.owner -v '' pers && \
        printf 'old personal' > pers/over
        """)
        guard setup.status == 0 else { throw TestSupportError("setup: \(setup.err)") }
        let file = m.base + "/enforcing.json"
        try Data(policy(m, level: level, extra: extra).utf8).write(to: URL(fileURLWithPath: file))
        try m.mamfs(["policy", "set", MountedFixture.account, file])
        // The mount notices state changes within 200 ms (opens and creates at once).
        usleep(300_000)
    }

    /// The audit records of the mount's requests in the fixture's state (read after the
    /// mount stopped: bursts flushed), without the CLI's administrative ones (enroll, policy set).
    static func records(_ m: MountedFixture) throws -> [AuditRecord] {
        try records(state: m.state)
    }

    static func records(state: String) throws -> [AuditRecord] {
        let context = try ProtectionContext.open(stateDirectory: StateDirectory(path: state), passphraseFile: nil)
        guard FileManager.default.fileExists(atPath: state + "/" + AuditLog.fileName) else { return [] }
        let mountActions: Set<String> = ["open-read", "open-write", "open-readwrite", "create", "save", "declassify", "metadata"]
        return try context.auditLog.records().filter { mountActions.contains($0.action) }
    }

    static func mountPath(_ m: MountedFixture, _ relative: String) -> String {
        realPath(m.mountpoint) + "/" + relative
    }

    @Test("block: unmanaged cat of a work file is EACCES, the managed cp's copy into a personal directory is work data, unmanaged touch in a work directory and declassify are refused; each denial is one record")
    func blockLevel() throws {
        let m = try MountedFixture(.managed)
        defer { m.close() }
        try EnforcementMountTests.prepare(m, level: "block")
        let cat = try m.sh(#"cat work.txt; echo "cat=$?""#)
        #expect(cat.out == "cat=1\n")
        #expect(cat.err.contains("work.txt: Permission denied"), "\(cat.err)")
        let copy = try m.sh(#""$BASE/bin/cp" work.txt pers/copy && "$BASE/bin/cat" pers/copy"#)
        #expect(copy.status == 0 && copy.out == "work-secret", "\(copy.out) \(copy.err)")
        let copied = try m.backingHeader("pers/copy")
        #expect(copied?.owner == MountedFixture.account && copied?.isEncrypted == true, "\(String(describing: copied?.owner))")
        let stored = FileManager.default.contents(atPath: m.backing + "/pers/copy") ?? Data()
        #expect(stored.range(of: Data("work-secret".utf8)) == nil, "plaintext of the copy on the backing disk")
        // Over an existing personal file (O_TRUNC): the new content is the managed app's.
        #expect(try m.backingHeader("pers/over")?.owner == "")
        let over = try m.sh(#""$BASE/bin/cp" work.txt pers/over && "$BASE/bin/cat" pers/over"#)
        #expect(over.out == "work-secret", "\(over.err)")
        let overwritten = try m.backingHeader("pers/over")
        #expect(overwritten?.owner == MountedFixture.account && overwritten?.isEncrypted == true)
        let touch = try m.sh(#"touch wd/new; echo "touch=$?""#)
        #expect(touch.out == "touch=1\n" && touch.err.contains("Permission denied"), "\(touch.err)")
        #expect(!FileManager.default.fileExists(atPath: m.backing + "/wd/new"))
        let declassify = try m.sh(#"setfattr -n user.mam.owner -v '' work.txt; echo "setfattr=$?""#)
        #expect(declassify.out == "setfattr=1\n" && declassify.err.contains("Operation not permitted"), "\(declassify.err)")
        let header = try m.backingHeader("work.txt")
        #expect(header?.owner == MountedFixture.account && header?.isEncrypted == true)
        // Through a directory: the recursive owner change would declassify the work file below it.
        let below = try m.sh(#""$BASE/bin/cp" work.txt wd/w2 && setfattr -n user.mam.owner -v '' wd; echo "setfattr=$?""#)
        #expect(below.out == "setfattr=1\n" && below.err.contains("Operation not permitted"), "\(below.out) \(below.err)")
        let inside = try m.backingHeader("wd/w2")
        #expect(inside?.owner == MountedFixture.account && inside?.isEncrypted == true)
        m.close()
        let records = try EnforcementMountTests.records(m)
        let denied = records.filter { $0.decision == "denied" }
        // The second declassify is counted in the first one's burst and written when the mount stops.
        #expect(denied.count == 4 && records.count == 4, "\(records.map { "\($0.action) \($0.executable) \($0.rule)" })")
        let catRecords = records.filter { $0.executable == EnforcementMountTests.realPath("/bin/cat") }
        #expect(catRecords.count == 1)
        if let record = catRecords.first {
            #expect(record.action == "open-read" && record.rule == "sendData=managedApps" && record.uid == 0)
            #expect(record.path == EnforcementMountTests.mountPath(m, "work.txt") && record.owner == MountedFixture.account)
            #expect(record.count == 1)
        }
        #expect(records.contains { $0.action == "create" && $0.rule == "workDirectory" && $0.path == EnforcementMountTests.mountPath(m, "wd/new") })
        #expect(records.contains { $0.action == "declassify" && $0.rule == "allowUserDecrypt=false" })
        #expect(try context(m).auditLog.verify().isVerified)
    }

    @Test("block: an unmanaged program's truncate(2) of a work file by name is EACCES and changes nothing")
    func truncateByNameIsAdmittedAsAWrite() throws {
        let m = try MountedFixture(.managed)
        defer { m.close() }
        try EnforcementMountTests.prepare(m, level: "block")
        let r = try m.sh(#"""
        python3 -c '
        import errno, os
        try:
            os.truncate("work.txt", 4)
            print("ok")
        except OSError as e:
            print(errno.errorcode[e.errno])
        ' && "$BASE/bin/cat" work.txt
        """#)
        #expect(r.status == 0 && r.out == "EACCES\nwork-secret", "\(r.out) \(r.err)")
    }

    @Test("a policy changed while the mount runs changes the answer for a program already decided")
    func policyChangeReachesDecidedProgram() throws {
        let m = try MountedFixture(.managed)
        defer { m.close() }
        try EnforcementMountTests.prepare(m, level: "block")
        let file = m.base + "/enforcing.json"
        for (sendData, expected) in [("managedApps", "cat=1\n"), ("allApps", "work-secretcat=0\n"), ("managedApps", "cat=1\n")] {
            let text = EnforcementMountTests.policy(m, level: "block").replacingOccurrences(
                of: #""sendData": "managedApps""#, with: #""sendData": "\#(sendData)""#)
            try Data(text.utf8).write(to: URL(fileURLWithPath: file))
            try m.mamfs(["policy", "set", MountedFixture.account, file])
            // Twice: the second open is answered from what the first decided.
            for _ in 0..<2 {
                let cat = try m.sh(#"cat work.txt; echo "cat=$?""#)
                #expect(cat.out == expected, "sendData \(sendData): \(cat.out) \(cat.err)")
            }
        }
    }

    static func context(_ m: MountedFixture) throws -> ProtectionContext {
        try ProtectionContext.open(stateDirectory: StateDirectory(path: m.state), passphraseFile: nil)
    }

    func context(_ m: MountedFixture) throws -> ProtectionContext { try EnforcementMountTests.context(m) }

    @Test("audit: the same requests are allowed and each is recorded as audited")
    func auditLevel() throws {
        let m = try MountedFixture(.managed)
        defer { m.close() }
        try EnforcementMountTests.prepare(m, level: "audit")
        let r = try m.sh(#"cat work.txt && echo && touch wd/new && setfattr -n user.mam.owner -v '' work.txt && echo done"#)
        #expect(r.status == 0 && r.out == "work-secret\ndone\n", "\(r.out) \(r.err)")
        #expect(try m.backingHeader("wd/new")?.owner == MountedFixture.account)
        #expect(try m.backingHeader("work.txt")?.owner == "")
        m.close()
        let records = try EnforcementMountTests.records(m)
        #expect(records.allSatisfy { $0.decision == "audited" }, "\(records.map(\.decision))")
        #expect(Set(records.map(\.rule)) == ["sendData=managedApps", "workDirectory", "allowUserDecrypt=false"],
                "\(records.map { "\($0.action) \($0.rule)" })")
    }

    @Test("off: the same requests are allowed and nothing is recorded")
    func offLevel() throws {
        let m = try MountedFixture(.managed)
        defer { m.close() }
        try EnforcementMountTests.prepare(m, level: "off")
        let r = try m.sh(#"cat work.txt && echo && touch wd/new && echo done"#)
        #expect(r.status == 0 && r.out == "work-secret\ndone\n", "\(r.out) \(r.err)")
        m.close()
        #expect(try EnforcementMountTests.records(m).isEmpty)
    }

    @Test("a work file may not be saved into a location missing from saveToLocations: managed cp into it and a rename into it are EACCES")
    func saveToLocations() throws {
        let m = try MountedFixture(.managed)
        defer { m.close() }
        let share = EnforcementMountTests.mountPath(m, "share")
        try EnforcementMountTests.prepare(m, level: "block", extra: """
        , "locations": {"SharePoint": ["\(share)"]}, "saveToLocations": ["LocalDrive", "OneDriveForBusiness"]
        """)
        let r = try m.sh(#""$BASE/bin/cp" work.txt share/x; echo "cp=$?"; mv work.txt share/; echo "mv=$?"; "$BASE/bin/cp" work.txt pers/ok && echo saved"#)
        #expect(r.out == "cp=1\nmv=1\nsaved\n", "\(r.out) \(r.err)")
        #expect(r.err.contains("Permission denied"), "\(r.err)")
        #expect(!FileManager.default.fileExists(atPath: m.backing + "/share/x"))
        #expect(!FileManager.default.fileExists(atPath: m.backing + "/share/work.txt"))
        #expect(FileManager.default.fileExists(atPath: m.backing + "/work.txt"))
        m.close()
        let saves = try EnforcementMountTests.records(m).filter { $0.rule == "saveToLocations" }
        #expect(saves.count == 2, "\(saves.map { "\($0.action) \($0.path)" })")
        #expect(saves.allSatisfy { $0.action == "save" && $0.decision == "denied" })
    }

    @Test("an allow_other mount used by user nobody is decided the same way")
    func otherUser() throws {
        let m = try MountedFixture(.managed, options: ["allow_other"])
        defer { m.close() }
        try EnforcementMountTests.prepare(m, level: "block")
        let r = try m.sh("""
        chmod 755 "$BASE" "$BASE/bin" && chmod 644 work.txt && \
        setpriv --reuid=65534 --regid=65534 --clear-groups /bin/cat work.txt; echo "system=$?"; \
        setpriv --reuid=65534 --regid=65534 --clear-groups "$BASE/bin/cat" work.txt; echo " managed=$?"
        """)
        #expect(r.out == "system=1\nwork-secret managed=0\n", "\(r.out) \(r.err)")
        #expect(r.err.contains("Permission denied"), "\(r.err)")
        m.close()
        let records = try EnforcementMountTests.records(m)
        #expect(records.count == 1 && records.first?.uid == 65534 && records.first?.rule == "sendData=managedApps",
                "\(records.map { "\($0.uid) \($0.executable) \($0.rule)" })")
    }
}

/// What a managed app may read, and where a provider mount is.
@Suite("Enforcement: receiving personal data and provider mount locations")
struct EnforcementLocationTests {
    @Test("a managed app reading a personal file: refused from a location missing from openFromLocations, and with receiveData none")
    func managedAppReceivesPersonalFiles() throws {
        let m = try MountedFixture(.managed)
        defer { m.close() }
        let box = EnforcementMountTests.mountPath(m, "box")
        // A personal directory in the work mount is made before the policy (at block, tagging
        // a directory that inherits work personal is a declassification).
        let made = try m.sh("mkdir box && setfattr -n user.mam.owner -v '' box && printf personal > box/p.txt && echo made")
        #expect(made.out == "made\n", "\(made.err)")
        try EnforcementMountTests.prepare(m, level: "block", extra: """
        , "receiveData": "all", "locations": {"Box": ["\(box)"]}, "openFromLocations": ["LocalStorage"]
        """)
        #expect(try m.sh("printf mine > pers/p.txt").status == 0)
        let r = try m.sh(#""$BASE/bin/cat" box/p.txt; echo "box=$?"; "$BASE/bin/cat" pers/p.txt; echo " pers=$?"; cat box/p.txt; echo " system=$?""#)
        #expect(r.out == "box=1\nmine pers=0\npersonal system=0\n", "\(r.out) \(r.err)")
        // Opened read-write (a managed bash's `<>`), the file is read all the same: refused too.
        let rw = try m.sh(#"cp /bin/bash "$BASE/bin/bash" && "$BASE/bin/bash" -c 'exec 3<>box/p.txt'; echo "rw=$?""#)
        #expect(rw.out == "rw=1\n" && rw.err.contains("Permission denied"), "\(rw.out) \(rw.err)")
        let file = m.base + "/receive-none.json"
        try Data(EnforcementMountTests.policy(m, level: "block", extra: #", "receiveData": "none""#).utf8)
            .write(to: URL(fileURLWithPath: file))
        try m.mamfs(["policy", "set", MountedFixture.account, file])
        usleep(300_000)
        let none = try m.sh(#""$BASE/bin/cat" pers/p.txt; echo "pers=$?""#)
        #expect(none.out == "pers=1\n" && none.err.contains("Permission denied"), "\(none.out) \(none.err)")
        m.close()
        let rules = try EnforcementMountTests.records(m).map(\.rule)
        #expect(rules == ["openFromLocations", "openFromLocations", "receiveData"], "\(rules)")
        #expect(try EnforcementMountTests.records(m).map(\.action) == ["open-read", "open-readwrite", "open-read"])
    }

    @Test("block on a non-replicated mount: a placeholder of a work file is decided by the file it becomes; unmanaged cat and truncate are EACCES, the managed cat reads it")
    func placeholderDecidedByItsContent() throws {
        let p = try ProviderMount("non-replicated")
        defer { p.close() }
        let bin = EnforcementMountTests.realPath(p.base) + "/bin/"
        let policy = p.base + "/enforcing.json"
        try Data("""
        {"fileEncryptionRequired": true, "fileProviderEncryptFiles": true, "managedApps": [{"path": "\(bin)"}],
         "sendData": "managedApps", "protectionLevel": "block"}
        """.utf8).write(to: URL(fileURLWithPath: policy))
        let setup = try p.sh(#"mkdir -p "$BASE/bin" && cp "$(command -v cat)" "$BASE/bin/""#)
        #expect(setup.status == 0, "\(setup.err)")
        try p.mamfs(["policy", "set", ProviderMount.account, policy])
        usleep(300_000)
        let names = p.someRemoteFiles(3)
        try #require(names.count == 3)
        // Both are placeholders: nothing of them is stored yet.
        #expect(names.allSatisfy { p.files(under: p.backing)[$0] == 0 })
        let denied = try p.sh("cat \(shellQuote(p.mountpoint + "/" + names[0])) > /dev/null; echo \"cat=$?\"")
        #expect(denied.out == "cat=1\n" && denied.err.contains("Permission denied"), "\(denied.out) \(denied.err)")
        // What was downloaded for the decision is stored as work data, never plaintext.
        #expect(try p.backingHeader(names[0])?.owner == ProviderMount.account)
        let allowed = try p.sh("\"$BASE/bin/cat\" \(shellQuote(p.mountpoint + "/" + names[1])) | cmp - \(shellQuote(p.remote + "/" + names[1]))")
        #expect(allowed.status == 0, "\(allowed.out) \(allowed.err)")
        // truncate(2) by name is an open for writing, decided on the file the placeholder becomes.
        let truncated = try p.sh("truncate -s 0 \(shellQuote(p.mountpoint + "/" + names[2])); echo \"truncate=$?\"")
        #expect(truncated.out == "truncate=1\n" && truncated.err.contains("Permission denied"), "\(truncated.out) \(truncated.err)")
        let kept = try p.sh("\"$BASE/bin/cat\" \(shellQuote(p.mountpoint + "/" + names[2])) | cmp - \(shellQuote(p.remote + "/" + names[2]))")
        #expect(kept.status == 0, "\(kept.out) \(kept.err)")
        p.close()
        let records = try EnforcementMountTests.records(state: p.state)
        #expect(records.map(\.action) == ["open-read", "open-write"] && records.allSatisfy { $0.rule == "sendData=managedApps" }
                && records.allSatisfy { $0.owner == ProviderMount.account && $0.decision == "denied" },
                "\(records.map { "\($0.action) \($0.rule) \($0.owner) \($0.path)" })")
    }

    @Test("a provider mount is its --location: a work file saved into a SharePoint mount missing from saveToLocations is refused")
    func providerMountLocation() throws {
        let p = try ProviderMount("non-replicated", location: "SharePoint")
        defer { p.close() }
        let bin = EnforcementMountTests.realPath(p.base) + "/bin/"
        let policy = p.base + "/enforcing.json"
        try Data("""
        {"fileEncryptionRequired": true, "fileProviderEncryptFiles": true, "managedApps": [{"path": "\(bin)"}],
         "saveToLocations": ["LocalDrive", "Other"], "protectionLevel": "block"}
        """.utf8).write(to: URL(fileURLWithPath: policy))
        let setup = try p.sh(#"mkdir -p "$BASE/bin" && cp "$(command -v cp)" "$BASE/bin/" && printf 'work' > "$BASE/work.txt""#)
        #expect(setup.status == 0, "\(setup.err)")
        try p.mamfs(["policy", "set", ProviderMount.account, policy])
        usleep(300_000)
        let r = try p.sh(#""$BASE/bin/cp" "$BASE/work.txt" "$M/new.txt"; echo "cp=$?""#)
        #expect(r.out == "cp=1\n" && r.err.contains("Permission denied"), "\(r.out) \(r.err)")
        #expect(!FileManager.default.fileExists(atPath: p.backing + "/new.txt"))
        p.close()
        let records = try EnforcementMountTests.records(state: p.state)
        #expect(records.count == 1 && records.first?.rule == "saveToLocations" && records.first?.action == "save",
                "\(records.map { "\($0.action) \($0.rule) \($0.path)" })")
    }
}
