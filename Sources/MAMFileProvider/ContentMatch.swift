import Foundation
import MAMProtection
import MAMSystem

/// Whether a local file holds exactly the bytes of a remote item: the evidence both providers
/// need before taking a remote item for one they know, where the store's `contentVersion` alone
/// does not prove it (an entity tag made of size and mtime is shared by different files).
enum ContentMatch {
    /// Downloads `item` (into memory only, `PlainBuffer`) and compares it with the regular file
    /// `relative` below `tree`, decrypted through `context` when it is protected.
    /// - Returns: true only when the download is of `item`'s listed contentVersion and its
    ///   plaintext equals the local one byte for byte; false for any difference, a local file
    ///   that is missing or not readable, or a key that is not available.
    /// - Throws: the store's errors for the download (`RemoteError.unreachable`, `.notFound`...).
    static func remoteItem(_ item: RemoteItem, store: any RemoteStore, equalsLocal relative: String,
                           in tree: ConfinedDirectory, context: ProtectionContext) throws -> Bool {
        guard item.type == .file else { return false }
        let download = try PlainBuffer(name: "mamfs-rename-check")
        let read = try store.readContents(of: item.identifier, into: download.url)
        guard read.version.contentVersion == item.version.contentVersion else { return false }
        return localFile(relative, in: tree, context: context, equals: download)
    }

    /// True when the regular file `relative` below `tree` (plain or protected, no symlink
    /// followed) holds exactly the bytes of `plain`.
    static func localFile(_ relative: String, in tree: ConfinedDirectory, context: ProtectionContext,
                          equals plain: PlainBuffer) -> Bool {
        let fd = tree.openExisting(relative, O_RDONLY)
        guard fd >= 0 else { return false }
        let file = FileDescriptor(adopting: fd)
        guard let content = try? context.openContent(fd: file.rawValue), let size = try? content.plaintextSize() else {
            return false
        }
        return (try? plaintext(content, size: size, equals: plain)) == true
    }

    /// True when `content` holds exactly the bytes of `plain` (`size` plaintext bytes).
    /// - Throws: read errors of either side.
    static func plaintext(_ content: ProtectedFileContent, size: Int64, equals plain: PlainBuffer) throws -> Bool {
        guard plain.byteCount == size else { return false }
        let chunk = 1 << 20
        let local = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
        let remote = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
        defer {
            SecureWipe.bytes(local.baseAddress, count: chunk)
            SecureWipe.bytes(remote.baseAddress, count: chunk)
            local.deallocate()
            remote.deallocate()
        }
        guard let localBytes = local.baseAddress, let remoteBytes = remote.baseAddress else { return false }
        var offset: Int64 = 0
        while offset < size {
            let n = try content.read(into: local, at: offset)
            guard n > 0 else { return false }
            let m = try SystemCall.pread(fd: plain.fd, into: UnsafeMutableRawBufferPointer(rebasing: remote[0..<n]), at: offset)
            guard m == n, memcmp(localBytes, remoteBytes, n) == 0 else { return false }
            offset += Int64(n)
        }
        return true
    }
}
