import Foundation
import Glibc
import Testing
import MAMTestSupport

/// Names of the form of the providers' temp files (`.NAME.mamfs-tmp-XXXXXX`) are skipped by
/// both providers, so a provider mount refuses to make one (EPERM) rather than keep a file
/// that never syncs; mamfs' own rewrite temp names (`.NAME.mamfs-tmp-pPID-SUFFIX`) still work.
@Suite("Provider mounts: names of temp files",
       .enabled(if: ProviderMount.fuseUsable, "needs /dev/fuse"), .serialized)
struct ProviderTemporaryNameTests {
    @Test("a file, directory, rename target or link named like a provider temp file is EPERM; a rewrite's temp name is not",
          arguments: ["non-replicated", "replicated"])
    func temporaryNamesAreRefused(kind: String) throws {
        let m = try ProviderMount(kind)
        defer { m.close() }
        let r = try m.sh(#"""
        printf x > "$M/.notes.mamfs-tmp-draft"; echo "file=$?"
        mkdir "$M/.d.mamfs-tmp-x"; echo "dir=$?"
        printf y > "$M/plain.txt"; mv "$M/plain.txt" "$M/.p.mamfs-tmp-zz"; echo "rename=$?"
        ln "$M/plain.txt" "$M/.l.mamfs-tmp-ln"; echo "link=$?"
        printf z > "$M/.f.mamfs-tmp-p123-abc" && mv "$M/.f.mamfs-tmp-p123-abc" "$M/f.txt"; echo "writer=$?"
        """#)
        #expect(r.out == "file=1\ndir=1\nrename=1\nlink=1\nwriter=0\n", "\(r.out) \(r.err)")
        #expect(r.err.components(separatedBy: "Operation not permitted").count == 5, "\(r.err)")
        #expect(m.read(m.mountpoint + "/plain.txt") == Data("y".utf8))
        #expect(m.read(m.mountpoint + "/f.txt") == Data("z".utf8))
        #expect(try m.mamfs(["provider", "sync", m.backing]).status == 0)
        #expect(m.wait { m.read(m.remote + "/plain.txt") == Data("y".utf8) && m.read(m.remote + "/f.txt") == Data("z".utf8) })
    }
}
