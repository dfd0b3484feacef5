import Foundation

/// Who may use a state directory: it holds the wrapped keys and (usually) the master key, so
/// it must belong to the user running mamfs and nobody else may write to it or to the key
/// file (another user could swap the database or the key and read what is then protected).
extension StateDirectory {
    /// Checks an existing state directory before its database is opened.
    /// - Throws: `.system(errno: EACCES)` ("permission denied", exit 77) when this user cannot
    ///   read the directory or its database; `.system(errno: EPERM)` (exit 77) when the directory
    ///   or `master.key` is owned by another user or writable by group or others. A missing
    ///   directory is not an error here (opening then reports that there is no state).
    public func requireSafeToOpen() throws {
        let path = url.path
        var st = stat()
        if stat(path, &st) != 0 {
            if errno == ENOENT || errno == ENOTDIR { return }
            throw MAMError.system("cannot read the mamfs state in \(path)", errno: errno)
        }
        guard access(path, R_OK | W_OK | X_OK) == 0 else {
            throw MAMError.system("cannot use the mamfs state in \(path)", errno: errno)
        }
        var database = stat()
        if stat(databaseURL.path, &database) != 0, errno != ENOENT {
            throw MAMError.system("cannot read the mamfs state database \(databaseURL.path)", errno: errno)
        }
        try Self.requireOwnedAndPrivate(st, what: "state directory", path: path, fix: "chmod 700")
        var key = stat()
        if lstat(masterKeyURL.path, &key) == 0 {
            guard (key.st_mode & S_IFMT) == S_IFREG else {
                throw MAMError.system("the master key \(masterKeyURL.path) is not a regular file; refusing to use it", errno: EPERM)
            }
            try Self.requireOwnedAndPrivate(key, what: "master key", path: masterKeyURL.path, fix: "chmod 600")
        }
    }

    /// Prepares an existing directory for `mamfs init`: it must be owned by this user; a mode
    /// that lets group or others in is set to 0700.
    /// - Returns: the previous mode when it was changed, nil otherwise (also for a missing
    ///   directory, which `create()` makes with 0700).
    /// - Throws: `.system(errno: EPERM)` for a directory owned by another user, `.system` when
    ///   the mode cannot be changed.
    @discardableResult
    public func makePrivateForInit() throws -> mode_t? {
        let path = url.path
        var st = stat()
        guard stat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else { return nil }
        guard st.st_uid == geteuid() else {
            throw MAMError.system("the state directory \(path) is owned by another user (uid \(st.st_uid)); refusing to put keys in it", errno: EPERM)
        }
        let mode = st.st_mode & 0o7777
        guard mode & 0o077 != 0 else { return nil }
        guard chmod(path, 0o700) == 0 else {
            throw MAMError.system("cannot set mode 0700 on the state directory \(path)", errno: errno)
        }
        return mode
    }

    private static func requireOwnedAndPrivate(_ st: stat, what: String, path: String, fix: String) throws {
        guard st.st_uid == geteuid() else {
            throw MAMError.system("the \(what) \(path) is owned by another user (uid \(st.st_uid)); refusing to use it", errno: EPERM)
        }
        let mode = st.st_mode & 0o7777
        guard mode & 0o022 == 0 else {
            throw MAMError.system("the \(what) \(path) can be written by other users (mode \(String(mode, radix: 8))); refusing to use it (\(fix) \(path))", errno: EPERM)
        }
    }
}
