import Foundation
import Glibc
import Testing
@testable import MAMFileProvider
import MAMTestSupport

/// A `LocalDirectoryRemote` upload that ends before its rename (killed, power lost) leaves
/// `.NAME.mamfs-tmp-XXXXXX` in the remote directory; the next listing removes it once it is
/// abandoned, and nothing else.
@Suite("LocalDirectoryRemote: temp files of ended uploads")
struct AbandonedUploadTests {
    /// Sets the mtime (and atime) of `path`, without following a symlink, to `seconds` ago.
    static func age(_ path: String, by seconds: Int) {
        let then = timespec(tv_sec: time(nil) - seconds, tv_nsec: 0)
        let times = [then, then]
        #expect(utimensat(AT_FDCWD, path, times, AT_SYMLINK_NOFOLLOW) == 0, "\(path)")
    }

    @Test("a listing removes an abandoned upload temp (unwritten a day, no writer), and says so; one held, recent, of another form, a symlink, a FIFO, or on a read-only store stays")
    func abandonedTemporariesAreRemoved() throws {
        let f = try ProviderFixture(policy: nil)
        let root = f.remoteRoot
        #expect(mkdir(root + "/d", 0o755) == 0)
        let abandoned = root + "/d/.a.txt.mamfs-tmp-Ab12Cd"
        let held = root + "/.b.txt.mamfs-tmp-Zz99Yy"
        let recent = root + "/.c.txt.mamfs-tmp-Qw34Er"
        let otherForm = root + "/.e.txt.mamfs-tmp-abc"
        let link = root + "/.f.txt.mamfs-tmp-Sy11mL"
        let fifo = root + "/.g.txt.mamfs-tmp-Fi33fO"
        let hourOld = root + "/.h.txt.mamfs-tmp-Ho44uR"
        let outside = try f.write(f.outside + "/target", Array("keep".utf8))
        for path in [abandoned, held, recent, otherForm, hourOld] { try f.write(path, Array("partial".utf8)) }
        #expect(symlink(outside, link) == 0)
        #expect(mkfifo(fifo, 0o600) == 0)
        try f.write(root + "/x.txt", Array("x".utf8))
        for path in [abandoned, held, otherForm, link, outside, fifo] { Self.age(path, by: 2 * 86_400) }
        Self.age(hourOld, by: 3600)
        // A writer that stalls holds its temp with flock (another open file description).
        var writer = open(held, O_RDWR | O_CLOEXEC)
        #expect(writer >= 0 && flock(writer, LOCK_EX | LOCK_NB) == 0)
        defer { if writer >= 0 { close(writer) } }

        let readOnlyLines = LogLines()
        let readOnly = LocalDirectoryRemote(root: root, readOnly: true, log: { readOnlyLines.append($0) })
        _ = try readOnly.enumerate(container: .rootContainer)
        _ = try readOnly.enumerate(container: ItemIdentifier("d"))
        #expect(FileManager.default.fileExists(atPath: abandoned), "a read-only store removes nothing")
        #expect(readOnlyLines.all.isEmpty)

        let lines = LogLines()
        let remote = LocalDirectoryRemote(root: root, log: { lines.append($0) })
        let top = try remote.enumerate(container: .rootContainer).map(\.filename).sorted()
        let inside = try remote.enumerate(container: ItemIdentifier("d")).map(\.filename)
        var st = stat()
        #expect(top == ["d", "x.txt"])
        #expect(inside.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: abandoned))
        for path in [held, recent, otherForm, hourOld] { #expect(FileManager.default.fileExists(atPath: path), "\(path)") }
        #expect(lstat(fifo, &st) == 0 && (st.st_mode & S_IFMT) == S_IFIFO, "a FIFO stays, and is not opened")
        #expect(lstat(link, &st) == 0 && (st.st_mode & S_IFMT) == S_IFLNK, "the symlink stays")
        #expect(try String(contentsOfFile: outside, encoding: .utf8) == "keep", "nothing is followed")
        #expect(lines.all == ["remote \(root): removed 'd/.a.txt.mamfs-tmp-Ab12Cd', the temp file of an upload that ended "
                              + "before it was renamed into place (not written for 24 hours, no writer holds it)"])

        // Once its writer is gone (the lock goes with the process), the held one goes too.
        close(writer)
        writer = -1
        _ = try remote.enumerate(container: .rootContainer)
        #expect(!FileManager.default.fileExists(atPath: held))
        #expect(FileManager.default.fileExists(atPath: recent))
    }

    @Test("the form of the store's temp names: a base, then .mamfs-tmp- and six ASCII letters or digits")
    func uploadForm() {
        #expect(AbandonedUploadTemporary.hasUploadForm(".a.mamfs-tmp-Ab12Cd"))
        #expect(AbandonedUploadTemporary.hasUploadForm(".report final.pdf.mamfs-tmp-000000"))
        for name in [".mamfs-tmp-Ab12Cd", "..mamfs-tmp-Ab12Cd", "a.mamfs-tmp-Ab12Cd", ".a.mamfs-tmp-Ab12C",
                     ".a.mamfs-tmp-Ab12Cd7", ".a.mamfs-tmp-Ab-2Cd", ".a.mamfs-tmp-Ab12Cé", ".a.mamfs-tmpAb12Cd"] {
            #expect(!AbandonedUploadTemporary.hasUploadForm(name), "\(name)")
        }
    }
}
