import COpenSSL
import Foundation
import MAMSystem

/// Where `encrypt -o` / `decrypt -o` may write: only a regular file is replaced, never a
/// symbolic link, FIFO, device, socket or directory; a stream gets the bytes through memory.
enum OutputTarget {
    /// Checks that `path` is absent or a regular file (not following a final symlink). An
    /// in-place rewrite (`inPlace`) goes through the same check: renaming the new file over a
    /// symlink would replace the link and leave the file it points to as it was.
    /// - Throws: `.cannotCreateOutput` (`ExitCode.cantCreate`) naming what is there instead.
    static func requireReplaceable(_ path: String, inPlace: Bool = false) throws {
        var st = stat()
        guard lstat(path, &st) == 0 else { return }
        try requireReplaceable(st, path: path, inPlace: inPlace)
    }

    /// `requireReplaceable` of the entry `name` in the open directory `directory`.
    static func requireReplaceable(in directory: Int32, name: String, path: String, inPlace: Bool = false) throws {
        guard let st = try? SystemCall.stat(in: directory, name) else { return }
        try requireReplaceable(st, path: path, inPlace: inPlace)
    }

    /// Refuses what `st` (an lstat) describes unless it is a regular file.
    private static func requireReplaceable(_ st: stat, path: String, inPlace: Bool) throws {
        let kind: String
        switch st.st_mode & S_IFMT {
        case S_IFREG: return
        case S_IFDIR: kind = "a directory"
        case S_IFLNK: kind = "a symbolic link"
        case S_IFIFO: kind = "a FIFO"
        case S_IFCHR, S_IFBLK: kind = "a device"
        case S_IFSOCK: kind = "a socket"
        default: kind = "a special file"
        }
        let hint = inPlace ? "give the file itself" : "use -o - for stdout"
        throw MAMError.cannotCreateOutput("\(path) is \(kind), not a regular file; refusing to replace it (\(hint))")
    }

    /// Runs `body` on an empty memory file (memfd: never on disk), then writes what it holds
    /// to `stream` in order. Used for stdout, which may be a pipe (no positional writes).
    /// - Throws: what `body` throws; `.system` when the memfd cannot be made or the stream
    ///   write fails.
    static func throughMemory(to stream: Int32, _ body: (Int32) throws -> Void) throws {
        let memory = try FileIO.memoryFile(name: "mamfs-output")
        let fd = memory.rawValue
        try body(fd)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer {
            SecureWipe.bytes(buffer.baseAddress, count: buffer.count)
            buffer.deallocate()
        }
        var offset: Int64 = 0
        while true {
            let n = try FileIO.preadFully(fd, buffer, at: offset)
            if n == 0 { return }
            var done = 0
            while done < n {
                let written = write(stream, buffer.baseAddress! + done, n - done)
                if written < 0 {
                    if errno == EINTR { continue }
                    throw MAMError.fromErrno("write to the output")
                }
                done += written
            }
            offset += Int64(n)
        }
    }
}
