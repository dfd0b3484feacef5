import COpenSSL
import Foundation
import MAMSystem

/// What `mamfs info` reports about one path.
public struct FileProtectionInfo: Equatable, Sendable {
    /// The path as given.
    public let path: String
    /// Owner accountId; nil when untagged, "" when tagged with the unmanaged identity.
    public let owner: String?
    /// True when the body is encrypted.
    public let encrypted: Bool
    /// Plaintext size in bytes (0 for directories).
    public let size: Int64
    /// Bytes on disk (the backing file's size).
    public let storedSize: Int64
    /// True for a directory (its owner is the inherited tag).
    public let isDirectory: Bool

    public init(path: String, owner: String?, encrypted: Bool, size: Int64, storedSize: Int64, isDirectory: Bool) {
        self.path = path
        self.owner = owner
        self.encrypted = encrypted
        self.size = size
        self.storedSize = storedSize
        self.isDirectory = isDirectory
    }
}

/// Per-path protection: tagging with an owner, encryption and decryption, all rewrites atomic.
///
/// Mirrors `IntuneMAMFileProtectionManager` (protect:forAccountId:, verifyAndProtect:,
/// protectionInfo:, isFileEncrypted:, encryptFile:forAccountId:, decryptFile:,
/// decryptFile:toCopyPath:). Paths are plain filesystem paths (for a mount: backing paths).
public struct FileProtectionManager: Sendable {
    let context: ProtectionContext
    private static let chunkSize = 1 << 20

    // MARK: Queries

    /// Owner and encryption state of `path`.
    /// - Throws: `.fileNotFound`; `.authenticationFailed` for a malformed header.
    public func info(path: String) throws -> FileProtectionInfo {
        let st = try statPath(path)
        if (st.st_mode & S_IFMT) == S_IFDIR {
            return FileProtectionInfo(path: path, owner: DirectoryOwner.read(path: path), encrypted: false,
                                      size: 0, storedSize: Int64(st.st_size), isDirectory: true)
        }
        let header = try readHeader(path)
        let size = try ProtectedFileContent.plaintextSize(storedSize: Int64(st.st_size), header: header)
        return FileProtectionInfo(path: path, owner: header?.owner, encrypted: header?.isEncrypted ?? false,
                                  size: size, storedSize: Int64(st.st_size), isDirectory: false)
    }

    /// The owner's accountId, "" for unmanaged-tagged, nil when untagged.
    /// Mirrors `protectionInfo:`.
    public func protectionInfo(path: String) throws -> String? { try info(path: path).owner }

    /// Mirrors `isFileEncrypted:`.
    public func isFileEncrypted(path: String) throws -> Bool { try info(path: path).encrypted }

    /// Whether `receiver` may receive the file at `path` (its owner decides, with the
    /// receiver's `receiveData` policy). Mirrors `IntuneMAMPolicy canReceiveSharedFile:`.
    public func canReceiveSharedFile(path: String, receiver: String) throws -> Bool {
        let owner = try protectionInfo(path: path)
        return context.policyEvaluator.canReceiveSharedFile(fileOwner: owner, receiver: try context.resolveOwner(receiver))
    }

    // MARK: Protect

    /// Tags `path` with `accountId` ("" = unmanaged). A file is encrypted exactly when the
    /// owner's policy requires it (an encrypted file protected for an owner that does not is
    /// decrypted); a directory gets the `user.mam.owner` tag and, with `recursive`, everything
    /// below it is protected too. The path is remembered for selective wipe.
    /// Mirrors `protect:forAccountId:`.
    /// - Parameter progress: called with the number of files done so far.
    /// - Throws: `.fileNotFound`, `.unknownAccount`, `.keyUnavailable`, `.authenticationFailed`,
    ///   `.system` (full disk...). Files done before a failure stay done; the failing file is unchanged.
    public func protect(path: String, accountId: String, recursive: Bool = true, progress: ((Int) -> Void)? = nil) throws {
        let owner = try context.resolveOwner(accountId)
        let st = try statPath(path)
        if try isInsideStateDirectory(path) {
            throw MAMError.invalidArguments("\(path) is inside the mamfs state directory \(context.stateDirectory); it cannot be protected")
        }
        var done = 0
        if (st.st_mode & S_IFMT) == S_IFDIR {
            try DirectoryOwner.write(path: path, owner: owner)
            if recursive { try protectTree(path, owner: owner, done: &done, progress: progress) }
        } else {
            try protectFile(path, owner: owner)
            done += 1
            progress?(done)
        }
        try context.state.addKnownRoot(realPath(path), kind: .protected, accountId: owner.isEmpty ? nil : owner)
    }

    /// Protects only if `path` is not already owned by `accountId`. Mirrors `verifyAndProtect:`.
    public func verifyAndProtect(path: String, accountId: String) throws {
        let owner = try context.resolveOwner(accountId)
        if try protectionInfo(path: path) == owner { return }
        try protect(path: path, accountId: owner)
    }

    /// Encrypts the plain-tagged file at `path` for the owner it already names when that
    /// owner's policy requires file encryption (a policy switched to encryption after the file
    /// was written): the whole file, atomically, as `protect` rewrites it (an encrypted copy in
    /// a temp file of the same directory, renamed over it; mode, owner, times and xattrs kept).
    /// Nothing else changes (no known root is recorded).
    /// - Returns: true when the file was rewritten; false when nothing was due (untagged,
    ///   encrypted already, or an owner without the requirement).
    /// - Throws: `.system(errno: EMLINK)` for a file with several hard links (their names would
    ///   keep the plaintext); otherwise as `protect`. The file is unchanged then.
    public func encryptIfRequired(path: String) throws -> Bool {
        guard let header = try readHeader(path), !header.isEncrypted, !header.owner.isEmpty,
              context.policyEvaluator.isFileEncryptionRequired(accountId: header.owner) else { return false }
        try protectFile(path, owner: header.owner)
        return true
    }

    private func protectTree(_ directory: String, owner: String, done: inout Int, progress: ((Int) -> Void)?) throws {
        let entries: [String]
        do { entries = try FileManager.default.contentsOfDirectory(atPath: directory) } catch {
            throw MAMError.system("list \(directory)", errno: EACCES)
        }
        for name in entries.sorted() {
            let child = directory + "/" + name
            var st = stat()
            guard lstat(child, &st) == 0 else { continue }
            switch st.st_mode & S_IFMT {
            case S_IFDIR:
                // The state directory holds the keys: protecting it would lock the state out.
                if isStateDirectory(st) { continue }
                if DirectoryOwner.read(path: child) != nil { try DirectoryOwner.write(path: child, owner: owner) }
                try protectTree(child, owner: owner, done: &done, progress: progress)
            case S_IFREG:
                try protectFile(child, owner: owner)
                done += 1
                progress?(done)
            default:
                continue
            }
        }
    }

    private func protectFile(_ path: String, owner: String) throws {
        let header = try readHeader(path)
        let wantEncrypted = context.policyEvaluator.isFileEncryptionRequired(accountId: owner)
        if let header, header.owner == owner, header.isEncrypted == wantEncrypted { return }
        if let header, header.isEncrypted, wantEncrypted, let encryption = header.encryption {
            // Managed to managed: rewrap the file key, body bytes unchanged.
            let oldKey = try context.keys.key(accountId: header.owner, keyId: encryption.keyId)
            let (keyId, newKey) = try context.keys.currentKey(accountId: owner)
            let newHeader = try header.rewrapped(owner: owner, keyId: keyId, oldAccountKey: oldKey, newAccountKey: newKey)
            try rewriteHeader(path, from: header, to: newHeader)
            return
        }
        let (newHeader, newKey) = try context.newFileHeader(owner: owner)
        try transform(path, header: header, to: newHeader, fileKey: newKey, output: nil)
    }

    // MARK: Encrypt / decrypt

    /// Encrypts `path` for the managed account `forAccountId`, in place or into `output`.
    /// Mirrors `encryptFile:forAccountId:`.
    /// - Throws: `.fileNotFound`, `.operationOnDirectory`, `.unmanagedIdentity` (account not
    ///   managed), `.unknownAccount`, `.authenticationFailed` (source corrupt), `.cannotCreateOutput`.
    public func encryptFile(path: String, forAccountId accountId: String, output: String? = nil) throws {
        try requireRegularFile(path)
        let owner = try context.resolveOwner(accountId)
        let header = try readHeader(path)
        let (newHeader, fileKey) = try context.newEncryptedHeader(owner: owner)
        try transform(path, header: header, to: newHeader, fileKey: fileKey, output: output)
    }

    /// Decrypts `path` to its plain bytes (no header), in place or into `toCopyPath` leaving the
    /// original untouched. Mirrors `decryptFile:` and `decryptFile:toCopyPath:`.
    /// - Throws: `.fileNotFound`, `.operationOnDirectory`, `.failedToDecrypt` for a file that is
    ///   not protected, `.keyUnavailable`, `.authenticationFailed`, `.cannotCreateOutput`.
    ///   A plain-tagged file is decrypted (its tag stripped) whoever it names.
    public func decryptFile(path: String, toCopyPath: String? = nil) throws {
        try requireRegularFile(path)
        let header = try requireDecryptable(path)
        try transform(path, header: header, to: nil, fileKey: nil, output: toCopyPath)
    }

    /// The header of a file `decrypt` may decrypt.
    private func requireDecryptable(_ path: String) throws -> ProtectedFileHeader {
        guard let header = try readHeader(path) else {
            throw MAMError.failedToDecrypt("\(path) is not a protected file")
        }
        // A plain-tagged file naming a managed account is accepted: plain headers are not
        // authenticated, but such files are legitimate (a policy without file encryption, a
        // file written before the policy changed), and decrypting one only strips the tag from
        // bytes that are already plain on disk; the result is untagged, so no managed status
        // is handed on. Buffers differ (DataProtectionManager.unprotect).
        return header
    }

    /// `encryptFile` with the encrypted bytes written to the open descriptor `stream` (stdout
    /// for `-o -`) instead of a file; `path` is left as it is.
    /// - Throws: as `encryptFile`; `.system` when writing to `stream` fails.
    public func encryptFile(path: String, forAccountId accountId: String, toStream stream: Int32) throws {
        try requireRegularFile(path)
        let owner = try context.resolveOwner(accountId)
        let header = try readHeader(path)
        let (newHeader, fileKey) = try context.newEncryptedHeader(owner: owner)
        try OutputTarget.throughMemory(to: stream) { fd in
            try copyContent(path, header: header, into: fd, header: newHeader, fileKey: fileKey)
        }
    }

    /// `decryptFile(path:toCopyPath:)` with the plaintext written to the open descriptor
    /// `stream` (stdout for `-o -`); `path` is left as it is.
    /// - Throws: as `decryptFile`; `.system` when writing to `stream` fails.
    public func decryptFile(path: String, toStream stream: Int32) throws {
        try requireRegularFile(path)
        let header = try requireDecryptable(path)
        try OutputTarget.throughMemory(to: stream) { fd in
            try copyContent(path, header: header, into: fd, header: nil, fileKey: nil)
        }
    }

    /// Copies the plaintext of `path` into the empty file `fd`, protected with `newHeader`.
    private func copyContent(_ path: String, header: ProtectedFileHeader?, into fd: Int32,
                             header newHeader: ProtectedFileHeader?, fileKey newKey: SymmetricKey?) throws {
        let sourceFile = try openRegularFile(path)
        let sourceFD = sourceFile.rawValue
        let source = try ProtectedFileContent(fd: sourceFD, header: header, fileKey: try header.flatMap { try context.fileKey(for: $0) })
        try copyPlaintext(from: source, to: try ProtectedFileContent(fd: fd, header: newHeader, fileKey: newKey))
    }

    /// Writes the header of `destination` (a new, empty file no one sees yet) and every
    /// plaintext byte of `source` into it, on as many threads as `PlaintextCopy` picks.
    private func copyPlaintext(from source: ProtectedFileContent, to destination: ProtectedFileContent) throws {
        let size = try source.plaintextSize()
        try PlaintextCopy(source: source, destination: destination).run(size: size, workers: PlaintextCopy.workers(for: size))
    }

    // MARK: Rewriting

    /// Copies the plaintext of `path` into a new file with `newHeader`, atomically replacing
    /// `output ?? path`. Mode, owner and times are kept.
    private func transform(_ path: String, header: ProtectedFileHeader?, to newHeader: ProtectedFileHeader?,
                           fileKey newKey: SymmetricKey?, output: String?) throws {
        let sourceFile = try openRegularFile(path)
        let sourceFD = sourceFile.rawValue
        var st = stat()
        fstat(sourceFD, &st)
        if output == nil, newHeader?.isEncrypted == true, st.st_nlink > 1 {
            // The rewrite makes a new inode: the other names would keep the plaintext.
            throw MAMError.system("\(path) has \(st.st_nlink) hard links: encrypting it in place would leave its plaintext under the other names (remove them, or encrypt a copy with -o)", errno: EMLINK)
        }
        let source = try ProtectedFileContent(fd: sourceFD, header: header, fileKey: try header.flatMap { try context.fileKey(for: $0) })
        let target = output ?? path
        try OutputTarget.requireReplaceable(target, inPlace: output == nil)
        let writer = try AtomicFileWriter(targetPath: target)
        let destination = try ProtectedFileContent(fd: writer.fd, header: newHeader, fileKey: newKey)
        do {
            try copyPlaintext(from: source, to: destination)
            if output == nil { copyExtendedAttributes(from: sourceFD, to: writer.fd) }
            writer.copyAttributes(from: st, keepTimes: output == nil)
            try writer.commit()
        } catch let error as MAMError {
            writer.abort()
            if case .system(let what, let code) = error, code == ENOSPC || code == EDQUOT {
                throw MAMError.cannotCreateOutput("\(target): \(what): \(String(cString: strerror(code)))")
            }
            throw error
        }
    }

    /// Replaces the header of an encrypted file whose body stays byte-for-byte the same.
    private func rewriteHeader(_ path: String, from old: ProtectedFileHeader, to new: ProtectedFileHeader) throws {
        let sourceFile = try openRegularFile(path)
        let sourceFD = sourceFile.rawValue
        var st = stat()
        fstat(sourceFD, &st)
        try OutputTarget.requireReplaceable(path, inPlace: true)
        let writer = try AtomicFileWriter(targetPath: path)
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
            copyExtendedAttributes(from: sourceFD, to: writer.fd)
            HeaderHint.store(new, fd: writer.fd)
            writer.copyAttributes(from: st, keepTimes: true)
            try writer.commit()
        } catch {
            writer.abort()
            throw error
        }
    }

    /// Copies the extended attributes of `source` to `destination`, except the header hint,
    /// which belongs to the destination's own header (written with it, or absent when untagged).
    private func copyExtendedAttributes(from source: Int32, to destination: Int32) {
        let from = ExtendedAttributes(descriptor: source)
        let to = ExtendedAttributes(descriptor: destination)
        guard let names = try? from.names() else { return }
        for name in names where name != HeaderHint.attributeName {
            if let value = try? from.get(name) { try? to.set(name, value) }
        }
    }

    // MARK: Helpers

    private func isStateDirectory(_ st: stat) -> Bool {
        var state = stat()
        guard stat(context.stateDirectory.url.path, &state) == 0 else { return false }
        return state.st_dev == st.st_dev && state.st_ino == st.st_ino
    }

    /// True when `path` is the state directory or lies below it.
    private func isInsideStateDirectory(_ path: String) throws -> Bool {
        var current = realPath(path)
        while true {
            var st = stat()
            if stat(current, &st) == 0, isStateDirectory(st) { return true }
            if current == "/" || current.isEmpty { return false }
            current = PathName.directory(of: current)
        }
    }

    private func statPath(_ path: String) throws -> stat {
        var st = stat()
        guard stat(path, &st) == 0 else {
            if errno == ENOENT || errno == ENOTDIR { throw MAMError.fileNotFound(path) }
            throw MAMError.fromErrno(path)
        }
        return st
    }

    private func requireRegularFile(_ path: String) throws {
        let st = try statPath(path)
        switch st.st_mode & S_IFMT {
        case S_IFREG: return
        case S_IFDIR: throw MAMError.operationOnDirectory(path)
        default: throw MAMError.invalidArguments("\(path) is not a regular file")
        }
    }

    private func readHeader(_ path: String) throws -> ProtectedFileHeader? {
        let file = try openRegularFile(path)
        do {
            return try ProtectedFileHeader.read(fd: file.rawValue)
        } catch MAMError.authenticationFailed(let why) {
            throw MAMError.authenticationFailed("\(path): \(why)")
        }
    }

    /// Opens `path` read-only without blocking (a FIFO or device put in its place never
    /// hangs the command) and checks, on the open descriptor, that it is a regular file.
    /// - Throws: `.fileNotFound`; `.invalidArguments` for anything but a regular file; `.system`.
    private func openRegularFile(_ path: String) throws -> FileDescriptor {
        let file: FileDescriptor
        do {
            file = try FileDescriptor.open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
        } catch {
            if error == .noSuchFile { throw MAMError.fileNotFound(path) }
            throw MAMError.system(path, errno: error.rawValue)
        }
        guard let st = try? file.stat(), (st.st_mode & S_IFMT) == S_IFREG else {
            throw MAMError.invalidArguments("\(path) is not a regular file")
        }
        return file
    }

    private func realPath(_ path: String) -> String {
        guard let resolved = realpath(path, nil) else { return path }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}
