import Foundation
import Glibc
import MAMProtection
import MAMTestSupport
import Testing

/// A plain-tagged file of a managed account whose policy (now) requires file encryption is
/// encrypted on its next write through the mount, whole and atomically.
@Suite("Encryption required: the next write of a plain-tagged work file encrypts it")
struct EncryptionRequiredMountTests {
    static let plainPolicy = #"{"fileEncryptionRequired": false, "fileProviderEncryptFiles": true}"#

    /// Sets the fixture account's policy to `json`.
    static func setPolicy(_ m: MountedFixture, _ json: String) throws {
        let file = m.base + "/policy-\(UUID().uuidString.prefix(8)).json"
        try Data(json.utf8).write(to: URL(fileURLWithPath: file))
        try m.mamfs(["policy", "set", MountedFixture.account, file])
    }

    /// A python3 program: opens `held.txt` read-write and `held.txt` read-only before the
    /// policy switch, waits for $BASE/go, appends through the writer and prints what both
    /// handles read back.
    static let holder = #"""
    import os, time
    base = os.environ["BASE"]
    writer = os.open("held.txt", os.O_RDWR)
    reader = os.open("held.txt", os.O_RDONLY)
    open(base + "/ready", "w").close()
    while not os.path.exists(base + "/go"):
        time.sleep(0.02)
    os.pwrite(writer, b"+tail", 9)
    print(os.pread(writer, 64, 0).decode())
    print(os.pread(reader, 64, 0).decode())
    """#

    @Test("a write, an O_TRUNC open and handles opened before the policy switch: the backing files become encrypted, the bytes read back exactly")
    func policySwitchEncryptsOnNextWrite() throws {
        try withMount(.managed) { m in
            try EncryptionRequiredMountTests.setPolicy(m, EncryptionRequiredMountTests.plainPolicy)
            try Data(EncryptionRequiredMountTests.holder.utf8).write(to: URL(fileURLWithPath: m.base + "/holder.py"))
            let setup = try m.sh("""
            sleep 0.3 && printf 'plain-work-data' > a.txt && printf 'truncate-me' > b.txt && \
            printf 'held-data' > held.txt && printf 'linked' > c.txt && ln c.txt c-link.txt
            """)
            #expect(setup.status == 0, "\(setup.err)")
            for name in ["a.txt", "b.txt", "held.txt", "c.txt"] {
                let header = try m.backingHeader(name)
                #expect(header?.owner == MountedFixture.account && header?.isEncrypted == false, "\(name) before")
            }
            let r = try m.sh("""
            { python3 "$BASE/holder.py" > "$BASE/holder.out" 2>&1 & } && holder=$! && \
            for i in $(seq 100); do [ -e "$BASE/ready" ] && break; sleep 0.05; done && \
            "$MAMFS" policy set "$ACCT" "$BASE/policy.json" --state "$S" > /dev/null && sleep 0.3 && \
            printf 'MORE' >> a.txt && printf 'new' > b.txt && touch "$BASE/go" && wait $holder; \
            cat "$BASE/holder.out"; { printf 'x' >> c.txt; } 2>&1; echo "link=$?"; \
            cat a.txt; echo; cat b.txt; echo; cat c.txt
            """)
            #expect(r.status == 0, "\(r.out) \(r.err)")
            #expect(r.out.hasPrefix("held-data+tail\nheld-data+tail\n"), "handles opened before: \(r.out) \(r.err)")
            #expect(r.out.contains("Permission denied"), "\(r.out)")
            #expect(r.out.hasSuffix("link=1\nplain-work-dataMORE\nnew\nlinked"), "\(r.out)")
            for (name, plaintext) in [("a.txt", "plain-work-dataMORE"), ("b.txt", "new"), ("held.txt", "held-data+tail")] {
                let header = try m.backingHeader(name)
                #expect(header?.owner == MountedFixture.account && header?.isEncrypted == true, "\(name) after")
                let stored = FileManager.default.contents(atPath: m.backing + "/" + name) ?? Data()
                #expect(stored.range(of: Data(plaintext.prefix(8).utf8)) == nil, "plaintext of \(name) on the backing disk")
            }
            // The hard-linked file was refused, not rewritten: still plain, unchanged.
            let linked = try m.backingHeader("c.txt")
            #expect(linked?.isEncrypted == false)
            // No temp file left next to them.
            let names = try FileManager.default.contentsOfDirectory(atPath: m.backing)
            #expect(!names.contains { $0.contains("mamfs-tmp") }, "\(names)")
        }
    }
}
