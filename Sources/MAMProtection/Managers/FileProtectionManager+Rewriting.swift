import Foundation
import MAMSystem

/// The rewrites behind protect, encrypt and decrypt: a new file with the new header, filled
/// from the old one and put in its place atomically (`AtomicFileWriter`), relative to the
/// directory's descriptor.
extension FileProtectionManager {
    /// `transform` for the command line's encrypt and decrypt: replaces `output ?? path`,
    /// resolved by path (the caller's own), refusing anything there but a regular file.
    func transform(_ source: borrowing FileDescriptor, path: String, header: ProtectedFileHeader?,
                   to newHeader: ProtectedFileHeader?, fileKey newKey: SymmetricKey?, output: String?) throws {
        let target = output ?? path
        let directory: FileDescriptor
        do { directory = try FileDescriptor.open(PathName.directory(of: target), SystemConstants.pathOnly | O_DIRECTORY | O_CLOEXEC) } catch {
            throw MAMError.cannotCreateOutput("\(target): \(error)")
        }
        let place = NameInDirectory(directory: directory.rawValue, name: PathName.lastComponent(of: target), path: target)
        let st = try SystemCall.stat(fd: source.rawValue)
        // An output that names the source itself (`-o FILE`, `-o ./FILE`, another hard link of
        // it) is an in-place rewrite, with its checks: the other names would keep the old bytes.
        let inPlace = output == nil || (try? SystemCall.stat(in: place.directory, place.name))
            .map { $0.st_dev == st.st_dev && $0.st_ino == st.st_ino } == true
        try OutputTarget.requireReplaceable(in: place.directory, name: place.name, path: target, inPlace: inPlace)
        try transform(source, st, path: path, header: header, to: newHeader, fileKey: newKey, into: place, inPlace: inPlace)
    }

    /// Copies the plaintext of the file open as `source` (`st`; `path` for messages) into a
    /// new file with `newHeader`, atomically replacing the entry at `place`. Mode, owner and
    /// times are kept; in place also the extended attributes, and the entry must still be the
    /// source when the new file goes in (else EAGAIN, nothing replaced).
    func transform(_ source: borrowing FileDescriptor, _ st: stat, path: String, header: ProtectedFileHeader?,
                   to newHeader: ProtectedFileHeader?, fileKey newKey: SymmetricKey?,
                   into place: NameInDirectory, inPlace: Bool) throws {
        if inPlace, newHeader?.isEncrypted == true, st.st_nlink > 1 {
            // The rewrite makes a new inode: the other names would keep the plaintext.
            throw FileProtectionManager.hardLinkRefusal(path, links: st.st_nlink)
        }
        let content = try ProtectedFileContent(fd: source.rawValue, header: header, fileKey: try header.flatMap { try context.fileKey(for: $0) })
        let writer = try AtomicFileWriter(in: place.directory, name: place.name, path: place.path)
        let destination = try ProtectedFileContent(fd: writer.fd, header: newHeader, fileKey: newKey)
        do {
            try copyPlaintext(from: content, to: destination)
            if inPlace { try copyExtendedAttributes(from: source.rawValue, to: writer.fd, path: path) }
            writer.copyAttributes(from: st, keepTimes: inPlace)
            if inPlace { try requireUnchanged(place, st) }
            // Again after the new file's fsync (which takes a while for a large file): a write
            // to the old file until just before the rename is not lost.
            try writer.commit { if inPlace { try self.requireUnchanged(place, st) } }
        } catch {
            writer.abort()
            throw error
        }
    }

    /// Replaces the header of the encrypted file open as `source` (at `place`) whose body
    /// stays byte-for-byte the same.
    func rewriteHeader(_ source: borrowing FileDescriptor, _ st: stat, _ place: NameInDirectory,
                       from old: ProtectedFileHeader, to new: ProtectedFileHeader) throws {
        let sourceFD = source.rawValue
        let writer = try AtomicFileWriter(in: place.directory, name: place.name, path: place.path)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: FileProtectionManager.chunkSize, alignment: 16)
        defer { buffer.deallocate() }
        do {
            try new.encoded().withUnsafeBytes { try FileIO.pwriteFully(writer.fd, $0, at: 0) }
            var offset = Int64(old.length)
            var outOffset = Int64(new.length)
            while true {
                let n = try FileIO.preadFully(sourceFD, buffer, at: offset)
                if n == 0 { break }
                try FileIO.pwriteFully(writer.fd, UnsafeRawBufferPointer(rebasing: buffer[0..<n]), at: outOffset)
                offset += Int64(n); outOffset += Int64(n)
            }
            try copyExtendedAttributes(from: sourceFD, to: writer.fd, path: place.path)
            HeaderHint.store(new, fd: writer.fd)
            writer.copyAttributes(from: st, keepTimes: true)
            try requireUnchanged(place, st)
            try writer.commit { try self.requireUnchanged(place, st) }
        } catch {
            writer.abort()
            throw error
        }
    }

    /// The refusal of an in-place encryption of a file with `links` hard links (EMLINK).
    static func hardLinkRefusal(_ path: String, links: nlink_t) -> MAMError {
        .system("\(path) has \(links) hard links: encrypting it in place would leave its plaintext under the other names (remove them, or encrypt a copy with -o)", errno: EMLINK)
    }

    /// Throws EAGAIN unless the entry at `place` is still the file `st` describes, unchanged:
    /// another process may have put something else under the name while the copy was made,
    /// or written to the file (an append, a rewrite, a new mode), which the copy would lose.
    /// The size, the modification time and the change time tell; a write after this check
    /// and before the rename is the window that stays.
    func requireUnchanged(_ place: NameInDirectory, _ st: stat) throws {
        guard let now = try? SystemCall.stat(in: place.directory, place.name), now.st_dev == st.st_dev, now.st_ino == st.st_ino else {
            throw MAMError.system("\(place.path) was replaced while it was rewritten; nothing changed", errno: EAGAIN)
        }
        guard now.st_size == st.st_size, now.st_mtim.tv_sec == st.st_mtim.tv_sec, now.st_mtim.tv_nsec == st.st_mtim.tv_nsec,
              now.st_ctim.tv_sec == st.st_ctim.tv_sec, now.st_ctim.tv_nsec == st.st_ctim.tv_nsec else {
            throw MAMError.system("\(place.path) was written to while it was rewritten; nothing changed (try again when nothing writes it)",
                                  errno: EAGAIN)
        }
    }

    /// Copies the extended attributes of `source` to `destination`, except the header hint,
    /// which belongs to the destination's own header (written with it, or absent when untagged).
    /// - Throws: `.system` when a `user.` attribute cannot be set, or any attribute fails for
    ///   want of space (ENOSPC, EDQUOT) or with EIO: the rewrite then fails and the file stays
    ///   as it was, rather than losing the attribute. Others the process may not set
    ///   (`security.`, `trusted.` ...) are left behind.
    func copyExtendedAttributes(from source: Int32, to destination: Int32, path: String) throws {
        let from = ExtendedAttributes(descriptor: source)
        let to = ExtendedAttributes(descriptor: destination)
        guard let names = try? from.names() else { return }
        for name in names where name != HeaderHint.attributeName {
            guard let value = try? from.get(name) else { continue }
            do {
                try to.set(name, value)
            } catch {
                let code = error.rawValue
                if name.hasPrefix("user.") || code == ENOSPC || code == EDQUOT || code == EIO {
                    throw MAMError.system("copy extended attribute \(name) of \(path)", errno: code)
                }
            }
        }
    }
}
