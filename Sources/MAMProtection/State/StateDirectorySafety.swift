import Foundation

/// Who may use a state directory: it holds the wrapped keys and (usually) the master key, so
/// it must belong to the user running mamfs and nobody else may write to it or to the key
/// file (another user could swap the database or the key and read what is then protected).
extension StateDirectory {
    /// Checks an existing state directory before its database is opened.
    /// - Throws: `.system(errno: EACCES)` ("permission denied", `ExitCode.noPerm`) when this user cannot
    ///   read the directory or its database; `.system(errno: EPERM)` (`ExitCode.noPerm`) when the directory,
    ///   `state.db`, `state.db-wal` or `state.db-shm` is owned by another user or writable by
    ///   group or others, or `master.key` is owned by another user or readable or writable by
    ///   group or others. A missing directory is not an error here (opening then reports that
    ///   there is no state); missing `-wal`/`-shm` files are normal (SQLite makes them with the
    ///   database's mode). A `-wal` or `-shm` file whose permission bits are not the database's
    ///   (made while the database was read-only for a moment: SQLite leaves them 0400, and every
    ///   later write fails) is given the database's bits.
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
        try Self.requireOwned(st, what: "state directory", path: path)
        try Self.requireMode(st, without: 0o022, what: "state directory", path: path, harm: "written", fix: "chmod 700")
        for file in [databaseURL.path, databaseURL.path + "-wal", databaseURL.path + "-shm"] {
            var entry = stat()
            guard stat(file, &entry) == 0 else { continue }
            try Self.requireOwned(entry, what: "state database file", path: file)
            try Self.requireMode(entry, without: 0o022, what: "state database file", path: file, harm: "written", fix: "chmod 600")
            let databaseBits = database.st_mode & 0o777
            if file != databaseURL.path, database.st_nlink > 0, entry.st_mode & 0o777 != databaseBits,
               chmod(file, databaseBits) != 0 {
                throw MAMError.system("cannot give \(file) the mode of the state database (chmod \(String(databaseBits, radix: 8)))", errno: errno)
            }
        }
        var key = stat()
        if lstat(masterKeyURL.path, &key) == 0 {
            guard (key.st_mode & S_IFMT) == S_IFREG else {
                throw MAMError.system("the master key \(masterKeyURL.path) is not a regular file; refusing to use it", errno: EPERM)
            }
            try Self.requireOwned(key, what: "master key", path: masterKeyURL.path)
            try Self.requireMode(key, without: 0o077, what: "master key", path: masterKeyURL.path, harm: "read or written", fix: "chmod 600")
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

    private static func requireOwned(_ st: stat, what: String, path: String) throws {
        guard st.st_uid == geteuid() else {
            throw MAMError.system("the \(what) \(path) is owned by another user (uid \(st.st_uid)); refusing to use it", errno: EPERM)
        }
    }

    /// Refuses `st` when its mode has any bit of `forbidden` (group/others bits).
    private static func requireMode(_ st: stat, without forbidden: mode_t, what: String, path: String,
                                    harm: String, fix: String) throws {
        let mode = st.st_mode & 0o7777
        guard mode & forbidden == 0 else {
            let octal = String(mode, radix: 8)
            let shown = String(repeating: "0", count: max(0, 4 - octal.count)) + octal
            throw MAMError.system("the \(what) \(path) can be \(harm) by other users (mode \(shown)); refusing to use it (\(fix) \(path))", errno: EPERM)
        }
    }
}
