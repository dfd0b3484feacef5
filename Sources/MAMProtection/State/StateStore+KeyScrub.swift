import Foundation

/// Proof that deleted account keys are gone from the disk, not only from the table.
///
/// `secure_delete` zeroes the freed bytes, but in WAL mode the zeroed page first goes to the
/// WAL; the old page (with the wrapped key) stays in `state.db` until a checkpoint copies the
/// WAL back, and a checkpoint cannot finish while another connection (a mount, another
/// command) holds a read transaction on an older snapshot.
extension StateStore {
    /// Deletes every key of the account, returning how many there were and their wrapped
    /// bytes, so `requireKeyBytesGone` can check the files afterwards. The key-id counter is kept.
    func deleteAccountKeysReturningBlobs(_ accountId: String) throws -> (count: Int, wrapped: [Data]) {
        let id = AccountIdentity.canonical(accountId)
        return try database.transaction { () throws -> (count: Int, wrapped: [Data]) in
            let wrapped = try database.query("SELECT wrapped_key FROM account_keys WHERE account_id = ?", [.text(id)])
                .compactMap { $0.data(0) }
            return (count: try deleteKeysLockedForScrub(id), wrapped: wrapped)
        }
    }

    /// Checkpoints the WAL into the database and truncates it (waiting for readers through
    /// the busy timeout), then reads `state.db` and `state.db-wal` and searches them for each
    /// of `wrapped` (blobs of 16 bytes or more; real wrapped keys are 60).
    /// - Throws: `.system(errno: EBUSY)` (`ExitCode.ioErr`) when the checkpoint could not finish or a
    ///   wrapped key is still in either file: the keys are deleted from the table but their
    ///   bytes may remain on disk until the other connections close.
    public func requireKeyBytesGone(_ wrapped: [Data]) throws {
        var attempt = 0
        while true {
            let complete = (try? database.checkpointTruncate()) ?? false
            if complete && !stateFilesContain(wrapped) { return }
            attempt += 1
            if attempt == 3 { break }
            usleep(100_000)
        }
        throw MAMError.system("the account's keys are deleted, but their bytes may remain in \(database.path) while another connection holds a read transaction on it; retry the wipe when other mamfs processes (mounts, commands) are closed", errno: EBUSY)
    }

    private func stateFilesContain(_ wrapped: [Data]) -> Bool {
        // A wrapped account key is 60 bytes; a needle much shorter than that would match by
        // chance in any database file (the store also holds opaque test blobs of a few bytes).
        let needles = wrapped.filter { $0.count >= 16 }
        guard !needles.isEmpty else { return false }
        for path in [database.path, database.path + "-wal"] {
            guard let bytes = FileManager.default.contents(atPath: path) else { continue }
            if needles.contains(where: { bytes.range(of: $0) != nil }) { return true }
        }
        return false
    }
}
