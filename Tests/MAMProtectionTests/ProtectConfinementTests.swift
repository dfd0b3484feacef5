import Foundation
import Glibc
import Testing
@testable import MAMProtection
import MAMTestSupport

/// A protect walks and rewrites by descriptors: a name swapped for a symlink while it works
/// is never followed, a file replaced under its name is never overwritten, and the check it is
/// given (the mount's: the caller's credentials) sees each object on the descriptor the
/// protect then uses.
@Suite("Protect by descriptors: no symlink followed, every object checked")
struct ProtectConfinementTests {
    private func openDirectory(_ path: String) throws -> Int32 {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        try #require(fd >= 0, "open \(path): errno \(errno)")
        return fd
    }

    /// A fixture with `victim/secret` and `tree/sub/work.txt`, both encrypted for the managed account.
    private func fixture() throws -> (StateFixture, victim: String, inner: String) {
        let f = try StateFixture()
        let victim = try f.write("victim/secret", Array("victim bytes".utf8))
        let inner = try f.write("tree/sub/work.txt", Array("inner bytes".utf8))
        for path in [victim, inner] { try f.context.files.protect(path: path, accountId: StateFixture.managedId) }
        return (f, victim, inner)
    }

    @Test("a directory swapped for a symlink as the walk enters it is walked as opened; the link's target is untouched")
    func swappedDirectoryIsNotFollowed() throws {
        let (f, victim, _) = try fixture()
        let fd = try openDirectory(f.path("tree"))
        defer { close(fd) }
        var swapped = false
        try f.context.files.protect(directory: fd, path: f.path("tree"), accountId: "", recursive: true) { object, _ in
            guard case .directory = object, !swapped else { return }
            swapped = true
            #expect(rename(f.path("tree/sub"), f.path("tree/sub.old")) == 0)
            #expect(symlink(f.path("victim"), f.path("tree/sub")) == 0)
        }
        #expect(swapped)
        let victimInfo = try f.context.files.info(path: victim)
        #expect(victimInfo.owner == StateFixture.managedId && victimInfo.encrypted, "the symlink's target was rewritten")
        let moved = try f.context.files.info(path: f.path("tree/sub.old/work.txt"))
        #expect(moved.owner == "" && !moved.encrypted, "the directory the walk entered was not protected")
        #expect(try f.plaintext(f.path("tree/sub.old/work.txt")) == Array("inner bytes".utf8))
    }

    @Test("a symlink below the target is left alone, not followed", arguments: [false, true])
    func symlinkBelowIsLeftAlone(toDirectory: Bool) throws {
        let (f, victim, _) = try fixture()
        let target = toDirectory ? f.path("victim") : victim
        #expect(symlink(target, f.path("tree/link")) == 0)
        let fd = try openDirectory(f.path("tree"))
        defer { close(fd) }
        try f.context.files.protect(directory: fd, path: f.path("tree"), accountId: "", recursive: true, check: nil)
        let info = try f.context.files.info(path: victim)
        #expect(info.owner == StateFixture.managedId && info.encrypted)
        var st = stat()
        #expect(lstat(f.path("tree/link"), &st) == 0 && (st.st_mode & S_IFMT) == S_IFLNK, "the link was replaced")
    }

    @Test("a file named by a symlink is refused; the link's target is untouched")
    func symlinkedFileIsRefused() throws {
        let (f, victim, _) = try fixture()
        #expect(symlink(victim, f.path("tree/alias")) == 0)
        let fd = try openDirectory(f.path("tree"))
        defer { close(fd) }
        #expect(throws: MAMError.self) {
            try f.context.files.protect(file: "alias", in: fd, path: f.path("tree/alias"), accountId: "", encrypted: false, check: nil)
        }
        let info = try f.context.files.info(path: victim)
        #expect(info.owner == StateFixture.managedId && info.encrypted)
    }

    @Test("a file replaced under its name while it is rewritten is not overwritten: EAGAIN, both files as they were")
    func fileReplacedDuringTheRewrite() throws {
        let (f, _, inner) = try fixture()
        let other = try f.write("tree/sub/other.txt", Array("someone else's".utf8))
        let fd = try openDirectory(f.path("tree/sub"))
        defer { close(fd) }
        do {
            try f.context.files.protect(file: "work.txt", in: fd, path: inner, accountId: "", encrypted: false) { _, _ in
                #expect(rename(f.path("tree/sub/work.txt"), f.path("tree/sub/moved.txt")) == 0)
                #expect(rename(other, f.path("tree/sub/work.txt")) == 0)
            }
            Issue.record("the rewrite replaced a file that was put under its name meanwhile")
        } catch MAMError.system(_, let code) {
            #expect(code == EAGAIN)
        }
        #expect(try f.read(inner) == Array("someone else's".utf8))
        let moved = try f.context.files.info(path: f.path("tree/sub/moved.txt"))
        #expect(moved.owner == StateFixture.managedId && moved.encrypted)
        #expect(try f.plaintext(f.path("tree/sub/moved.txt")) == Array("inner bytes".utf8))
    }

    @Test("the check sees the target, each directory and each file; a refusal stops the protect there")
    func checkSeesEveryObjectAndCanStop() throws {
        let f = try StateFixture()
        for name in ["a.txt", "b.txt", "c/d.txt"] {
            let path = try f.write("tree/" + name, Array(name.utf8))
            try f.context.files.protect(path: path, accountId: StateFixture.managedId)
        }
        let fd = try openDirectory(f.path("tree"))
        defer { close(fd) }
        struct Refused: Error {}
        var seen: [ProtectedObject] = []
        #expect(throws: Refused.self) {
            try f.context.files.protect(directory: fd, path: f.path("tree"), accountId: "", recursive: true) { object, st in
                seen.append(object)
                if object == .file, seen.filter({ $0 == .file }).count == 2 { throw Refused() }
            }
        }
        #expect(seen == [.target, .file, .file])
        // Sorted walk: a.txt was done, b.txt refused before it changed, c/ never entered.
        #expect(try f.context.files.info(path: f.path("tree/a.txt")).owner == "")
        for name in ["b.txt", "c/d.txt"] {
            let info = try f.context.files.info(path: f.path("tree/" + name))
            #expect(info.owner == StateFixture.managedId && info.encrypted, "\(name) changed after the refusal")
        }
    }
}
