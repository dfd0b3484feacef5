import Foundation
import MAMProtection
import MAMSystem

/// The provider's temp area `ROOT/.mamfs-provider/tmp`: one session directory per process
/// (`s-PID-RANDOM`, 0700), held with an exclusive `flock` for the life of the process.
///
/// What it holds: only ciphertext, placeholders and plain-tagged copies on their way into the
/// tree (renamed in atomically). Plain bytes of managed files never go here: downloads and
/// upload copies live in memory (`PlainBuffer`).
///
/// Crash leftovers: `sweep` (run by every sync, mount and provider command when it opens the
/// root) removes every session directory whose lock it can take (its process is gone: killed,
/// crashed) and any loose file, so nothing a killed run wrote stays behind. A normal exit
/// removes its own session directory. A wipe that removes the account's local files should
/// also remove `ROOT/.mamfs-provider/tmp/` entirely (no live process then) or call `sweep`.
final class ProviderTemporaryArea: @unchecked Sendable {
    /// Absolute path of the session directory.
    let path: String
    /// Path of the session directory relative to the local root.
    let relative: String
    private let lock: Int32
    private let owner: pid_t

    private init(path: String, relative: String, lock: Int32) {
        self.path = path
        self.relative = relative
        self.lock = lock
        owner = getpid()
    }

    nonisolated(unsafe) private static var sessions: [String: ProviderTemporaryArea] = [:]
    private static let sessionsLock = NSLock()
    nonisolated(unsafe) private static var exitHookInstalled = false

    /// This process's session directory in the temp area of `layout` (made on first use).
    /// - Throws: `.cannotCreateOutput`.
    static func session(for layout: ProviderLayout) throws -> ProviderTemporaryArea {
        sessionsLock.lock()
        defer { sessionsLock.unlock() }
        if let existing = sessions[layout.root], existing.owner == getpid(), FileSystem.lstatPath(existing.path) != nil {
            return existing
        }
        let name = "s-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let directory = layout.temporaryDirectory + "/" + name
        guard mkdir(directory, 0o700) == 0 else {
            throw MAMError.cannotCreateOutput("\(directory): \(String(cString: strerror(errno)))")
        }
        let fd = open(directory, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0, flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            throw MAMError.cannotCreateOutput("\(directory): \(String(cString: strerror(errno)))")
        }
        let session = ProviderTemporaryArea(path: directory, relative: ProviderLayout.metadataDirectoryName + "/tmp/" + name, lock: fd)
        sessions[layout.root] = session
        if !exitHookInstalled {
            exitHookInstalled = true
            atexit { ProviderTemporaryArea.removeOwnSessions() }
        }
        return session
    }

    /// Removes the session directories this process made (at exit).
    private static func removeOwnSessions() {
        sessionsLock.lock()
        let own = sessions.values.filter { $0.owner == getpid() }
        sessionsLock.unlock()
        for session in own { removeTree(session.path) }
    }

    /// Removes what crashed or killed runs left in `temporaryDirectory`: every session directory
    /// whose lock is free, and every loose entry. Live sessions (another process working on the
    /// same root now) are left alone. Works on descriptors (names as the kernel's bytes, no
    /// symlink followed).
    static func sweep(_ temporaryDirectory: String) {
        guard let areaDescriptor = try? FileDescriptor.open(temporaryDirectory, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) else {
            return
        }
        let area = areaDescriptor.rawValue
        for entry in DirectoryEntries.names(of: area) {
            var st = stat()
            guard fstatat(area, entry.bytes, &st, AT_SYMLINK_NOFOLLOW) == 0 else { continue }
            guard FileSystem.isDirectory(st) else { unlinkat(area, entry.bytes, 0); continue }
            guard let session = try? FileDescriptor.open(in: area, entry.bytes, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) else {
                continue
            }
            if flock(session.rawValue, LOCK_EX | LOCK_NB) == 0 {
                DirectoryEntries.removeContents(of: session.rawValue)
                unlinkat(area, entry.bytes, AT_REMOVEDIR)
            }
        }
    }

    /// Removes the session directory at `path` and everything in it, never following a symlink.
    private static func removeTree(_ path: String) {
        do {
            let directory = try FileDescriptor.open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            DirectoryEntries.removeContents(of: directory.rawValue)
        } catch {
            return
        }
        rmdir(path)
    }
}

/// Plain bytes held in memory only (`memfd_create`, never linked into a filesystem): the
/// download of a file on its way to being encrypted, and the decrypted copy of a managed file
/// on its way to the remote. Gone with the process, killed or not.
final class PlainBuffer {
    /// The read-write descriptor.
    let fd: Int32

    /// - Throws: `.cannotCreateOutput` when memory cannot be had.
    init(name: String = "mamfs-plain") throws {
        do {
            fd = try FileDescriptor.memoryFile(name: name).take()
        } catch {
            throw MAMError.cannotCreateOutput("memfd_create: \(error)")
        }
    }

    deinit { SystemCall.close(fd) }

    /// A path that opens the buffer (`/proc/self/fd/N`), for APIs that take a path or URL.
    var path: String { ProcessDescriptorPath.path(of: fd) }
    var url: URL { URL(fileURLWithPath: path, isDirectory: false) }

    /// The bytes in the buffer (0 when it cannot be stat'ed).
    var byteCount: Int64 {
        var st = stat()
        return fstat(fd, &st) == 0 ? Int64(st.st_size) : 0
    }
}
