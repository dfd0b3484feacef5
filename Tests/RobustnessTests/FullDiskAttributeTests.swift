import Foundation
import Glibc
import MAMProtection
import MAMSystem
import Testing
import MAMTestSupport

/// A rewrite (encrypt, decrypt, protect: a new file renamed over the old one) copies the old
/// file's extended attributes. One it cannot store fails the rewrite, with the file left as
/// it was, rather than a success that lost the attribute.
@Suite("Full disk: extended attributes of a rewritten file")
struct FullDiskAttributeTests {
    @Test("encrypting a file whose attribute no longer fits fails and keeps file and attribute; with room it keeps both")
    func attributeThatDoesNotFitFailsTheRewrite() throws {
        let f = try StateFixture()
        // tmpfs charges user xattrs against nr_inodes (1 KiB per inode): a small count makes
        // the attribute space run out while blocks are left.
        let disk = try SmallTmpfs(size: "2m,nr_inodes=32")
        defer { disk.close() }
        let path = disk.path + "/p"
        let body = (0..<30000).map { UInt8(truncatingIfNeeded: $0 &* 11) }
        try Data(body).write(to: URL(fileURLWithPath: path))
        let kept = [UInt8](repeating: 0x4b, count: 2000)
        try ExtendedAttributes(path: path).set("user.keep", kept)
        // Use up the attribute space, then give back enough for the rewrite's temp file but
        // not for its copy of user.keep.
        let filler = disk.path + "/xfill"
        try Data().write(to: URL(fileURLWithPath: filler))
        var count = 0
        for size in [900, 100, 10, 1] {
            while (try? ExtendedAttributes(path: filler).set("user.x\(count)", [UInt8](repeating: 0x76, count: size))) != nil { count += 1 }
        }
        try #require(count > 2)
        try ExtendedAttributes(path: filler).remove("user.x0")
        try ExtendedAttributes(path: filler).remove("user.x1")

        do {
            try f.context.files.encryptFile(path: path, forAccountId: StateFixture.managedId)
            Issue.record("encrypt succeeded without room for the file's attribute")
        } catch MAMError.cannotCreateOutput(let message) {
            #expect(message.contains("user.keep"), "\(message)")
        }
        #expect(try f.context.files.info(path: path).encrypted == false)
        #expect(try f.read(path) == body)
        #expect(try ExtendedAttributes(path: path).get("user.keep") == kept)

        unlink(filler)
        try f.context.files.encryptFile(path: path, forAccountId: StateFixture.managedId)
        #expect(try f.context.files.info(path: path).encrypted)
        #expect(try f.plaintext(path) == body)
        #expect(try ExtendedAttributes(path: path).get("user.keep") == kept)
    }
}
