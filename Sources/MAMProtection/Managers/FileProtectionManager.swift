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
    static let chunkSize = 1 << 20

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
    ///
    /// `path` itself is resolved as given (a symlink to a directory is followed; one naming a
    /// file is refused, as its rewrite would replace the link); below it the walk and every
    /// rewrite go by descriptors and never follow a symlink (see `protect(directory:...)`).
    /// - Parameter progress: called with the number of files done so far.
    /// - Throws: `.fileNotFound`, `.unknownAccount`, `.keyUnavailable`, `.authenticationFailed`,
    ///   `.system` (full disk; EILSEQ for a name below that is not UTF-8; EMLINK for a file
    ///   below with other hard links that would be encrypted; EACCES for one that cannot be
    ///   opened...). Those a look at the tree can tell (`preflightTree`) are found before
    ///   anything is changed; after a failure during the walk itself (a full disk, an I/O
    ///   error) the files done stay done and the failing file is unchanged.
    public func protect(path: String, accountId: String, recursive: Bool = true, progress: ((Int) -> Void)? = nil) throws {
        let owner = try context.resolveOwner(accountId)
        let st = try statPath(path)
        try requireOutsideStateDirectory(path)
        let check = recordingKnownRoot(realPath(path), owner: owner, check: nil)
        try reportingFullDiskAsOutputError(path) {
            if (st.st_mode & S_IFMT) == S_IFDIR {
                let directory = try openDirectory(path, forListing: recursive)
                try protectDirectory(directory.rawValue, path: path, owner: owner, recursive: recursive, check: check, progress: progress)
            } else {
                let parent = try openDirectory(PathName.directory(of: path), forListing: false)
                try protectFile(NameInDirectory(directory: parent.rawValue, name: PathName.lastComponent(of: path), path: path),
                                owner: owner, encrypted: false, check: check, as: .target)
                progress?(1)
            }
        }
    }

    /// `check`, and once the target passed it, `path` remembered as protected for `owner`
    /// (selective wipe walks it): after the checks (a refused change records nothing) and
    /// before anything is rewritten (a state that cannot record it, a full state disk, stops
    /// the protect with nothing changed).
    private func recordingKnownRoot(_ path: String, owner: String, check: ProtectCheck?) -> ProtectCheck {
        let state = context.state
        return { object, st in
            try check?(object, st)
            if object == .target { try state.addKnownRoot(path, kind: .protected, accountId: owner.isEmpty ? nil : owner) }
        }
    }

    /// Runs `body`, turning a full disk (ENOSPC, EDQUOT) into `.cannotCreateOutput` for
    /// `target`: the command line's exit code for an output it could not write. The
    /// descriptor-based calls the mount makes keep `.system`, so it answers ENOSPC.
    private func reportingFullDiskAsOutputError<R>(_ target: String, _ body: () throws -> R) throws -> R {
        do {
            return try body()
        } catch MAMError.system(let what, let code) where code == ENOSPC || code == EDQUOT {
            throw MAMError.cannotCreateOutput("\(target): \(what): \(String(cString: strerror(code)))")
        }
    }

    /// `protect(path:accountId:recursive:)` of the directory open as `directory` (O_RDONLY |
    /// O_DIRECTORY for a recursive protect, else O_PATH is enough; it stays the caller's): the
    /// tree below is walked by descriptors, each entry opened relative to its directory with
    /// O_NOFOLLOW, and each file rewritten in its own directory by name (a new file renamed
    /// over it). A symlink, or a directory swapped
    /// for one during the walk, is never followed. `check` sees every object before it is
    /// changed or entered, as the descriptor the rewrite uses (`ProtectCheck`). `path` (the
    /// directory's path, for messages and the known-roots record) is never opened.
    /// - Throws: as `protect(path:...)`, and what `check` throws (nothing more is changed then).
    public func protect(directory: Int32, path: String, accountId: String, recursive: Bool, check: ProtectCheck?) throws {
        let owner = try context.resolveOwner(accountId)
        try requireOutsideStateDirectory(path)
        try protectDirectory(directory, path: path, owner: owner, recursive: recursive,
                             check: recordingKnownRoot(path, owner: owner, check: check), progress: nil)
    }

    /// `protect` of the regular file `name` (one component) in the open directory `directory`
    /// (O_PATH is enough; it stays the caller's), opened with O_NOFOLLOW and replaced by name in
    /// that directory. With `encrypted`, the file ends up encrypted for `accountId` also when
    /// the owner's policy does not require it (`mamfs encrypt` after the protect).
    /// - Throws: as `protect(path:...)`; `.unmanagedIdentity` for `encrypted` with an
    ///   unmanaged owner; `.system(EMLINK)` when encrypting a file with other hard links; what
    ///   `check` throws (nothing is changed then).
    public func protect(file name: String, in directory: Int32, path: String, accountId: String, encrypted: Bool,
                        check: ProtectCheck?) throws {
        let owner = try context.resolveOwner(accountId)
        try requireOutsideStateDirectory(path)
        try NameInDirectory.requireComponent(name, path: path)
        try protectFile(NameInDirectory(directory: directory, name: name, path: path), owner: owner, encrypted: encrypted,
                        check: recordingKnownRoot(path, owner: owner, check: check), as: .target)
    }

    /// Protects only if `path` is not already owned by `accountId`. Mirrors `verifyAndProtect:`.
    public func verifyAndProtect(path: String, accountId: String) throws {
        let owner = try context.resolveOwner(accountId)
        if try protectionInfo(path: path) == owner { return }
        try protect(path: path, accountId: owner)
    }

    /// Encrypts the plain-tagged file `name` in the open directory `directory` (it stays the
    /// caller's; `path` for messages) for the owner it already names when that owner's policy
    /// requires file encryption (a policy switched to encryption after the file was written):
    /// the whole file, atomically, as `protect` rewrites it (an encrypted copy in a temp file
    /// of the same directory, renamed over it; mode, owner, times and xattrs kept). The file is
    /// opened with O_NOFOLLOW; `check` sees it first (`.target`). Nothing else changes (no
    /// known root is recorded).
    /// - Returns: true when the file was rewritten; false when nothing was due (untagged,
    ///   encrypted already, or an owner without the requirement).
    /// - Throws: `.system(errno: EMLINK)` for a file with several hard links (their names would
    ///   keep the plaintext), `.system(ENOSPC)`; otherwise as `protect`. The file is unchanged then.
    public func encryptIfRequired(file name: String, in directory: Int32, path: String, check: ProtectCheck?) throws -> Bool {
        try NameInDirectory.requireComponent(name, path: path)
        let place = NameInDirectory(directory: directory, name: name, path: path)
        return try withFileForRewrite(place, check: check, as: .target) { source, st in
            guard let header = try readHeader(source.rawValue, path: path), !header.isEncrypted, !header.owner.isEmpty,
                  context.policyEvaluator.isFileEncryptionRequired(accountId: header.owner) else { return false }
            try rewrite(source, st, place, header: header, owner: header.owner, encrypted: false)
            return true
        }
    }

    /// Tags the directory open as `directory` and, with `recursive`, protects what is below,
    /// after `preflightTree` found nothing below that the walk would refuse. The tag goes first (files made in the directory meanwhile get the new owner); when the
    /// walk fails the directory gets its old tag back (none: removed), so it does not claim an
    /// owner its files do not all have, and the same change asked again walks again.
    private func protectDirectory(_ directory: Int32, path: String, owner: String, recursive: Bool, check: ProtectCheck?,
                                  progress: ((Int) -> Void)?) throws {
        if let check { try check(.target, try SystemCall.stat(fd: directory)) }
        // What would stop the walk part way is found before anything changes.
        if recursive { try preflightTree(directory, path: path, owner: owner) }
        let previous = DirectoryOwner.read(path: ProcessDescriptorPath.path(of: directory))
        try DirectoryOwner.write(fd: directory, path: path, owner: owner)
        guard recursive else { return }
        var done = 0
        do {
            try protectTree(directory, path: path, depth: 0, owner: owner, check: check, done: &done, progress: progress)
        } catch {
            if let previous {
                try? DirectoryOwner.write(fd: directory, path: path, owner: previous)
            } else {
                try? ExtendedAttributes(descriptorPath: directory).remove(DirectoryOwner.attributeName)
            }
            throw error
        }
    }

    /// The walk below the open directory `directory`, by descriptors: each entry is looked at
    /// with fstatat(AT_SYMLINK_NOFOLLOW), a directory entered with O_NOFOLLOW, a file rewritten
    /// by name in `directory`. Symlinks and other kinds are left alone. `depth`: levels below
    /// the top (at most `TreeDepth.maximum`, which the look before it checked already).
    private func protectTree(_ directory: Int32, path: String, depth: Int, owner: String, check: ProtectCheck?,
                             done: inout Int, progress: ((Int) -> Void)?) throws {
        guard depth < TreeDepth.maximum else { throw TreeDepth.tooDeep(path) }
        for name in try sortedNames(in: directory, path: path) {
            let child = PathName.appending(name, to: path)
            guard let st = try? SystemCall.stat(in: directory, name) else { continue }
            switch st.st_mode & S_IFMT {
            case S_IFDIR:
                guard let sub = try openSubdirectory(name, in: directory, path: child, st) else { continue }
                let opened = try SystemCall.stat(fd: sub.rawValue)
                if isStateDirectory(opened) { continue }
                let tagged = DirectoryOwner.read(fd: sub.rawValue) != nil
                try check?(.directory(tagged: tagged), opened)
                if tagged { try DirectoryOwner.write(fd: sub.rawValue, path: child, owner: owner) }
                try protectTree(sub.rawValue, path: child, depth: depth + 1, owner: owner, check: check, done: &done, progress: progress)
            case S_IFREG:
                try protectFile(NameInDirectory(directory: directory, name: name, path: child), owner: owner, encrypted: false,
                                check: check, as: .file)
                done += 1
                progress?(done)
            default:
                continue
            }
        }
    }

    /// Protects the file at `place` for `owner` (encrypted also without the policy's
    /// requirement with `encrypted`); `check` sees it first as `object`.
    private func protectFile(_ place: NameInDirectory, owner: String, encrypted: Bool, check: ProtectCheck?,
                             as object: ProtectedObject) throws {
        try withFileForRewrite(place, check: check, as: object) { source, st in
            let header = try readHeader(source.rawValue, path: place.path)
            try rewrite(source, st, place, header: header, owner: owner, encrypted: encrypted)
        }
    }

    /// Runs `body` on the regular file at `place`, open for a rewrite in place, and its fstat:
    /// anything else at the name (a symlink included) is refused, the file is opened with
    /// O_NOFOLLOW and `check` sees it first.
    private func withFileForRewrite<R>(_ place: NameInDirectory, check: ProtectCheck?, as object: ProtectedObject,
                                       _ body: (borrowing FileDescriptor, stat) throws -> R) throws -> R {
        try OutputTarget.requireReplaceable(in: place.directory, name: place.name, path: place.path, inPlace: true)
        let source = try openRegularFile(place)
        let st = try SystemCall.stat(fd: source.rawValue)
        try check?(object, st)
        return try body(source, st)
    }

    /// Rewrites the file open as `source` (`st`, with `header`) at `place` for `owner`:
    /// nothing when it is already as the owner's policy (or `encrypted`) wants it, the header
    /// alone when its key is rewrapped for another managed owner, else the whole body.
    private func rewrite(_ source: borrowing FileDescriptor, _ st: stat, _ place: NameInDirectory,
                         header: ProtectedFileHeader?, owner: String, encrypted: Bool) throws {
        let required = context.policyEvaluator.isFileEncryptionRequired(accountId: owner)
        let wantEncrypted = required || encrypted
        if let header, header.owner == owner, header.isEncrypted == wantEncrypted { return }
        if let header, header.isEncrypted, wantEncrypted, let encryption = header.encryption {
            // Managed to managed: rewrap the file key, body bytes unchanged.
            let oldKey = try context.keys.key(accountId: header.owner, keyId: encryption.keyId)
            let (keyId, newKey) = try context.keys.currentKey(accountId: owner)
            let newHeader = try header.rewrapped(owner: owner, keyId: keyId, oldAccountKey: oldKey, newAccountKey: newKey)
            try rewriteHeader(source, st, place, from: header, to: newHeader)
            return
        }
        let (newHeader, newKey) = required || !encrypted ? try context.newFileHeader(owner: owner)
                                                         : try context.newEncryptedHeader(owner: owner)
        try transform(source, st, path: place.path, header: header, to: newHeader, fileKey: newKey, into: place, inPlace: true)
    }

    // MARK: Encrypt / decrypt

    /// Encrypts `path` for the managed account `forAccountId`, in place or into `output`.
    /// Mirrors `encryptFile:forAccountId:`.
    /// - Throws: `.fileNotFound`, `.operationOnDirectory`, `.unmanagedIdentity` (account not
    ///   managed), `.unknownAccount`, `.authenticationFailed` (source corrupt), `.cannotCreateOutput`.
    public func encryptFile(path: String, forAccountId accountId: String, output: String? = nil) throws {
        try requireRegularFile(path)
        let owner = try context.resolveOwner(accountId)
        let source = try openRegularFile(path)
        let header = try readHeader(source.rawValue, path: path)
        let (newHeader, fileKey) = try context.newEncryptedHeader(owner: owner)
        try reportingFullDiskAsOutputError(output ?? path) {
            try transform(source, path: path, header: header, to: newHeader, fileKey: fileKey, output: output)
        }
    }

    /// Decrypts `path` to its plain bytes (no header), in place or into `toCopyPath` leaving the
    /// original untouched. Mirrors `decryptFile:` and `decryptFile:toCopyPath:`.
    /// - Throws: `.fileNotFound`, `.operationOnDirectory`, `.failedToDecrypt` for a file that is
    ///   not protected, `.keyUnavailable`, `.authenticationFailed`, `.cannotCreateOutput`.
    ///   A plain-tagged file is decrypted (its tag stripped) whoever it names.
    public func decryptFile(path: String, toCopyPath: String? = nil) throws {
        try requireRegularFile(path)
        let source = try openRegularFile(path)
        let header = try requireDecryptable(source.rawValue, path: path)
        try reportingFullDiskAsOutputError(toCopyPath ?? path) {
            try transform(source, path: path, header: header, to: nil, fileKey: nil, output: toCopyPath)
        }
    }

    /// The header of a file `decrypt` may decrypt (open as `fd`).
    private func requireDecryptable(_ fd: Int32, path: String) throws -> ProtectedFileHeader {
        guard let header = try readHeader(fd, path: path) else {
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
        let source = try openRegularFile(path)
        let header = try requireDecryptable(source.rawValue, path: path)
        try OutputTarget.throughMemory(to: stream) { fd in
            try copyContent(source.rawValue, header: header, into: fd, header: nil, fileKey: nil)
        }
    }

    /// Copies the plaintext of `path` into the empty file `fd`, protected with `newHeader`.
    private func copyContent(_ path: String, header: ProtectedFileHeader?, into fd: Int32,
                             header newHeader: ProtectedFileHeader?, fileKey newKey: SymmetricKey?) throws {
        let sourceFile = try openRegularFile(path)
        try copyContent(sourceFile.rawValue, header: header, into: fd, header: newHeader, fileKey: newKey)
    }

    /// Copies the plaintext of the file open as `sourceFD` into the empty file `fd`.
    private func copyContent(_ sourceFD: Int32, header: ProtectedFileHeader?, into fd: Int32,
                             header newHeader: ProtectedFileHeader?, fileKey newKey: SymmetricKey?) throws {
        let source = try ProtectedFileContent(fd: sourceFD, header: header, fileKey: try header.flatMap { try context.fileKey(for: $0) })
        try copyPlaintext(from: source, to: try ProtectedFileContent(fd: fd, header: newHeader, fileKey: newKey))
    }

    /// Writes the header of `destination` (a new, empty file no one sees yet) and every
    /// plaintext byte of `source` into it, on as many threads as `PlaintextCopy` picks.
    func copyPlaintext(from source: ProtectedFileContent, to destination: ProtectedFileContent) throws {
        let size = try source.plaintextSize()
        try PlaintextCopy(source: source, destination: destination).run(size: size, workers: PlaintextCopy.workers(for: size))
    }

    // MARK: Helpers

    func isStateDirectory(_ st: stat) -> Bool {
        var state = stat()
        guard stat(context.stateDirectory.url.path, &state) == 0 else { return false }
        return state.st_dev == st.st_dev && state.st_ino == st.st_ino
    }

    /// Throws `.invalidArguments` when `path` is the state directory or lies below it.
    private func requireOutsideStateDirectory(_ path: String) throws {
        if try isInsideStateDirectory(path) {
            throw MAMError.invalidArguments("\(path) is inside the mamfs state directory \(context.stateDirectory); it cannot be protected")
        }
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
        return try readHeader(file.rawValue, path: path)
    }

    /// The header of the file open as `fd` (`path` for messages).
    func readHeader(_ fd: Int32, path: String) throws -> ProtectedFileHeader? {
        do {
            return try ProtectedFileHeader.read(fd: fd)
        } catch MAMError.authenticationFailed(let why) {
            throw MAMError.authenticationFailed("\(path): \(why)")
        }
    }

    /// Opens the directory `path` (resolved as given): for reading with `forListing` (a walk),
    /// else O_PATH (a rewrite inside it, or its tag, needs no read permission).
    /// - Throws: `.fileNotFound`; `.system`.
    private func openDirectory(_ path: String, forListing: Bool) throws -> FileDescriptor {
        do {
            return try FileDescriptor.open(path, (forListing ? O_RDONLY : SystemConstants.pathOnly) | O_DIRECTORY | O_CLOEXEC)
        } catch {
            if error == .noSuchFile { throw MAMError.fileNotFound(path) }
            throw MAMError.system(path, errno: error.rawValue)
        }
    }

    /// `openRegularFile` of the entry at `place`, never through a symlink at its name.
    func openRegularFile(_ place: NameInDirectory) throws -> FileDescriptor {
        let file: FileDescriptor
        do {
            file = try FileDescriptor.open(in: place.directory, place.name, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW | O_CLOEXEC)
        } catch {
            if error == .noSuchFile { throw MAMError.fileNotFound(place.path) }
            if error.rawValue == ELOOP { throw MAMError.invalidArguments("\(place.path) is not a regular file") }
            throw MAMError.system(place.path, errno: error.rawValue)
        }
        guard let st = try? file.stat(), (st.st_mode & S_IFMT) == S_IFREG else {
            throw MAMError.invalidArguments("\(place.path) is not a regular file")
        }
        return file
    }

    /// Opens `path` read-only without blocking (a FIFO or device put in its place never
    /// hangs the command) and checks, on the open descriptor, that it is a regular file.
    /// - Throws: `.fileNotFound`; `.invalidArguments` for anything but a regular file; `.system`.
    func openRegularFile(_ path: String) throws -> FileDescriptor {
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
