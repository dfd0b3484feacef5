import Foundation
import Testing

@Suite("CLI: a real tree (a copy of /usr/share/doc)")
struct DocTreeTests {
    /// Copies regular files of /usr/share/doc (symlinks skipped) into `destination` until
    /// `limit` files; returns their paths relative to `destination`.
    static func copyDocs(to destination: String, limit: Int) throws -> [String] {
        let source = "/usr/share/doc"
        guard let enumerator = FileManager.default.enumerator(atPath: source) else { return [] }
        var copied: [String] = []
        let manager = FileManager.default
        while let relative = enumerator.nextObject() as? String, copied.count < limit {
            let from = source + "/" + relative
            var st = stat()
            guard lstat(from, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, manager.isReadableFile(atPath: from) else { continue }
            let to = destination + "/" + relative
            try manager.createDirectory(atPath: (to as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try manager.copyItem(atPath: from, toPath: to)
            copied.append(relative)
        }
        return copied.sorted()
    }

    @Test("protect -R, info, decrypt -o every file, then protect -R '' restores every byte")
    func docTree() throws {
        let sandbox = try Sandbox()
        try sandbox.initAndEnroll()
        let tree = sandbox.path("doc")
        let files = try Self.copyDocs(to: tree, limit: 300)
        #expect(files.count >= 100, "enough real files (\(files.count))")
        var originals: [String: Data] = [:]
        for file in files { originals[file] = try sandbox.read(tree + "/" + file) }

        let protect = try sandbox.run(["protect", tree, "-R", "--account", Fixtures.upn])
        #expect(protect.status == 0, "\(protect.err)")
        #expect(protect.stderr.isEmpty, "no progress output when stderr is not a terminal")

        let info = try sandbox.run(["info", "--json"] + files.map { tree + "/" + $0 })
        #expect(info.status == 0, "\(info.err)")
        let objects = try jsonArray(info)
        #expect(objects.count == files.count)
        for (file, object) in zip(files, objects) {
            #expect(object["path"] as? String == tree + "/" + file)
            #expect(object["owner"] as? String == Fixtures.account)
            #expect(object["encrypted"] as? Bool == true)
            #expect((object["size"] as? NSNumber)?.intValue == originals[file]?.count, "\(file)")
        }
        for file in files where (originals[file]?.count ?? 0) >= 64 {
            let stored = try sandbox.read(tree + "/" + file)
            #expect(stored.range(of: originals[file]!.prefix(64)) == nil, "\(file) is not plaintext at rest")
        }

        let copies = sandbox.path("copies")
        for file in files {
            let copy = copies + "/" + file.replacingOccurrences(of: "/", with: "__")
            try FileManager.default.createDirectory(atPath: copies, withIntermediateDirectories: true)
            let decrypt = try sandbox.run(["decrypt", tree + "/" + file, "-o", copy])
            #expect(decrypt.status == 0, "\(file): \(decrypt.err)")
            #expect(try sandbox.read(copy) == originals[file], "\(file) round trip")
        }

        let unprotect = try sandbox.run(["protect", tree, "-R", "--account", ""])
        #expect(unprotect.status == 0, "\(unprotect.err)")
        let after = try jsonArray(try sandbox.run(["info", "--json"] + files.map { tree + "/" + $0 }))
        for (file, object) in zip(files, after) {
            #expect(object["owner"] as? String == "", "\(file) unmanaged")
            #expect(object["encrypted"] as? Bool == false)
            let stored = try sandbox.read(tree + "/" + file)
            #expect(stored.suffix(originals[file]!.count) == originals[file], "\(file) plain again")
        }
    }
}
