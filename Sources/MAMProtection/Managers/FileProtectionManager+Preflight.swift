import Foundation
import MAMSystem

/// The look at a tree before a recursive protect changes anything: what would make the walk
/// stop part way through (a name that is not UTF-8, a file that cannot be opened, a hard-linked
/// plain file that would be encrypted in place) is reported before the first file is rewritten,
/// so a refused protect leaves every file as it was instead of some re-owned and some not
/// (personal files owned by a work account would go with its selective wipe).
///
/// The walk is the one `protectTree` makes (descriptors, O_NOFOLLOW, symlinks and other kinds
/// left alone, the state directory skipped). What only the rewrite itself can meet (a full
/// disk, an I/O error, a file changed meanwhile) still stops the walk where it happens.
extension FileProtectionManager {
    /// Checks every object below the open directory `directory` (`path` for messages) as a
    /// protect for `owner` would meet it.
    /// - Throws: `.system` EILSEQ (a name that is not UTF-8), EMLINK (a plain file with other
    ///   hard links that the owner's policy would encrypt), ENAMETOOLONG (a tree deeper than
    ///   `TreeDepth.maximum`), the errno of a file or directory that cannot be opened;
    ///   `.authenticationFailed` for a malformed header.
    func preflightTree(_ directory: Int32, path: String, owner: String) throws {
        try preflight(directory, path: path, depth: 0, encrypting: context.policyEvaluator.isFileEncryptionRequired(accountId: owner))
    }

    private func preflight(_ directory: Int32, path: String, depth: Int, encrypting: Bool) throws {
        guard depth < TreeDepth.maximum else { throw TreeDepth.tooDeep(path) }
        for name in try sortedNames(in: directory, path: path) {
            let child = PathName.appending(name, to: path)
            guard let st = try? SystemCall.stat(in: directory, name) else { continue }
            switch st.st_mode & S_IFMT {
            case S_IFDIR:
                guard let sub = try openSubdirectory(name, in: directory, path: child, st) else { continue }
                try preflight(sub.rawValue, path: child, depth: depth + 1, encrypting: encrypting)
            case S_IFREG:
                let file = try openRegularFile(NameInDirectory(directory: directory, name: name, path: child))
                guard encrypting, st.st_nlink > 1 else { continue }
                if try readHeader(file.rawValue, path: child)?.isEncrypted != true {
                    throw FileProtectionManager.hardLinkRefusal(child, links: st.st_nlink)
                }
            default:
                continue
            }
        }
    }

    /// The names in the open directory `directory` (`path` for messages), sorted: both walks
    /// (this look and `protectTree`) meet them in the same order.
    /// - Throws: `.system` EILSEQ for a name that is not UTF-8; the listing's errno.
    func sortedNames(in directory: Int32, path: String) throws -> [String] {
        var names: [String] = []
        do {
            var entries = try DirectoryIterator(duplicating: directory)
            while let entry = try entries.next() {
                guard let name = String(validating: entry.name, as: UTF8.self) else {
                    let shown = PathName.appending(String(decoding: entry.name, as: UTF8.self), to: path)
                    throw MAMError.system("\(shown): the name is not valid UTF-8; it cannot be protected", errno: EILSEQ)
                }
                names.append(name)
            }
        } catch let error as Errno {
            throw MAMError.system("list \(path)", errno: error.rawValue)
        }
        return names.sorted()
    }

    /// The sub-directory `name` of `directory` (`st` from fstatat, `path` for messages) opened
    /// for a walk with O_NOFOLLOW; nil for the state directory (its keys must never be
    /// protected) and for one gone or no longer a directory (a symlink now: not followed).
    /// - Throws: `.system` with the open's errno otherwise.
    func openSubdirectory(_ name: String, in directory: Int32, path: String, _ st: stat) throws -> FileDescriptor? {
        if isStateDirectory(st) { return nil }
        do {
            return try FileDescriptor.open(in: directory, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        } catch {
            if error == .noSuchFile || error == .notDirectory || error.rawValue == ELOOP { return nil }
            throw MAMError.system(path, errno: error.rawValue)
        }
    }
}
