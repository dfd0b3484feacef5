import Foundation
import MAMProtection

/// The provider's stable item identifiers (table `identities` of the provider database).
///
/// A store addresses items by its own identifier, which for a path-keyed store (the local
/// directory, WebDAV, S3) changes when the item or one of its parents is renamed. The
/// providers keep addressing the store that way (the local items' attributes and the item
/// table hold store identifiers), and give every item a second identifier that never changes
/// while the item exists: the one `provider status` and the providers' `FileProviderItem`s show.
///
/// | column    | holds                                                                         |
/// |-----------|-------------------------------------------------------------------------------|
/// | `stable`  | the provider's identifier: the store identifier the item had when the provider first saw it, made unique with `#2`, `#3`... when an earlier item had it |
/// | `store`   | the item's store identifier now (one row per store identifier)               |
/// | `file_id` | `RemoteItem.fileID` last seen, when the store has one                         |
///
/// How an item keeps its row:
/// - a move done through the provider carries the row from the old store identifier to the
///   new one (`recordIdentity(store:fileID:movedFrom:)`), children of a moved directory too;
/// - a listing of the store (`reconcileIdentities(with:)`) finds items moved on the remote by
///   their `fileID` first, then items still at their store identifier (an item rewritten by
///   replacement, whose file id changed, stays the same item);
/// - a provider that recognises a remote rename another way (same type and contentVersion,
///   for a store without file ids) carries the row like a move of its own.
/// A file id the store reuses (an inode number after a delete) is taken for the same item:
/// the local item follows it and, its contentVersion being different, is refreshed.
///
/// Errors: what `SQLiteDatabase` throws (`MAMError.internalError`, `.system`).
extension ProviderDatabase {
    /// One row of `identities`.
    struct IdentityRow: Equatable, Sendable {
        var stable: ItemIdentifier
        var store: ItemIdentifier
        var fileID: String?
    }

    /// The table, created with the database (see `ProviderDatabase.init`).
    static let identitySchema = """
        CREATE TABLE IF NOT EXISTS identities(stable TEXT PRIMARY KEY, store TEXT NOT NULL, file_id TEXT);
        CREATE INDEX IF NOT EXISTS identities_store ON identities(store);
        CREATE INDEX IF NOT EXISTS identities_file ON identities(file_id);
        """

    /// The stable identifier of the item the store calls `store`: its row's, or `store`
    /// itself for an item never recorded (a root synced before stable identifiers existed,
    /// until its next pass). The root container is itself.
    func stableIdentifier(ofStore store: ItemIdentifier) -> ItemIdentifier {
        if store == .rootContainer { return store }
        return ((try? identity(store: store)) ?? nil)?.stable ?? store
    }

    /// Every row.
    func identityRows() throws -> [IdentityRow] {
        try database.query("SELECT stable, store, file_id FROM identities").compactMap(Self.identityRow)
    }

    /// The row of the store identifier `store`, nil when none.
    func identity(store: ItemIdentifier) throws -> IdentityRow? {
        try database.queryFirst("SELECT stable, store, file_id FROM identities WHERE store = ?", [.text(store.rawValue)])
            .flatMap(Self.identityRow)
    }

    /// Records that the store calls an item `store` now (with `fileID`, when known), after a
    /// move from `movedFrom` when the caller moved or recognised it as moved.
    /// Order: the row of `movedFrom`, else the row of `store`, else the row of `fileID`, else a
    /// new row. A row another item held for `store` is dropped (that name is this item's now).
    /// - Returns: the item's stable identifier.
    @discardableResult
    func recordIdentity(store: ItemIdentifier, fileID: String?, movedFrom: ItemIdentifier? = nil) throws -> ItemIdentifier {
        if store == .rootContainer { return store }
        return try database.transaction {
            var row: IdentityRow?
            if let movedFrom, movedFrom != store { row = try identity(store: movedFrom) }
            if row == nil { row = try identity(store: store) }
            if row == nil, let fileID {
                row = try database.queryFirst("SELECT stable, store, file_id FROM identities WHERE file_id = ?", [.text(fileID)])
                    .flatMap(Self.identityRow)
            }
            var target = try row ?? IdentityRow(stable: uniqueStable(for: store), store: store, fileID: nil)
            target.store = store
            if let fileID { target.fileID = fileID }
            try write(target)
            return target.stable
        }
    }

    /// Matches a listing of the whole store with the rows: by `fileID` first (an item moved or
    /// renamed on the remote), then by store identifier; the other listed items get new rows.
    /// Rows of items neither listed nor in the item table are dropped.
    /// - Returns: old store identifier -> new one, for every row whose item moved.
    @discardableResult
    func reconcileIdentities(with listing: [RemoteItem]) throws -> [ItemIdentifier: ItemIdentifier] {
        try database.transaction {
            let rows = try identityRows()
            var byFile: [String: Int] = [:]
            var byStore: [ItemIdentifier: Int] = [:]
            for (index, row) in rows.enumerated() {
                if let fileID = row.fileID { byFile[fileID] = index }
                byStore[row.store] = index
            }
            var claimed = Set<Int>()
            var assigned: [ItemIdentifier: Int] = [:]
            for item in listing {
                guard let fileID = item.fileID, let index = byFile[fileID], !claimed.contains(index) else { continue }
                claimed.insert(index)
                assigned[item.identifier] = index
            }
            for item in listing where assigned[item.identifier] == nil {
                guard let index = byStore[item.identifier], !claimed.contains(index) else { continue }
                claimed.insert(index)
                assigned[item.identifier] = index
            }
            var moves: [ItemIdentifier: ItemIdentifier] = [:]
            let listed = Set(listing.map(\.identifier))
            let known = Set(try database.query("SELECT identifier FROM items").compactMap { $0.string(0) }.map { ItemIdentifier(rawValue: $0) })
            // Rows that lose their store identifier to another item, or whose item is gone
            // everywhere, go first, so every store identifier keeps one row.
            for (index, row) in rows.enumerated() where !claimed.contains(index) {
                if listed.contains(row.store) || !known.contains(row.store) {
                    try database.run("DELETE FROM identities WHERE stable = ?", [.text(row.stable.rawValue)])
                }
            }
            for item in listing {
                if let index = assigned[item.identifier] {
                    var row = rows[index]
                    if row.store != item.identifier { moves[row.store] = item.identifier }
                    row.store = item.identifier
                    if let fileID = item.fileID { row.fileID = fileID }
                    try write(row)
                } else {
                    try write(IdentityRow(stable: try uniqueStable(for: item.identifier), store: item.identifier,
                                          fileID: item.fileID))
                }
            }
            return moves
        }
    }

    /// Forgets every recorded file id (the store was replaced: its file ids are new).
    func clearFileIDs() throws {
        try database.run("UPDATE identities SET file_id = NULL")
    }

    /// `store` itself when no row has it as its stable identifier, else `store#N` for the
    /// smallest free N from 2.
    private func uniqueStable(for store: ItemIdentifier) throws -> ItemIdentifier {
        func taken(_ candidate: String) throws -> Bool {
            try database.queryFirst("SELECT 1 FROM identities WHERE stable = ?", [.text(candidate)]) != nil
        }
        if try !taken(store.rawValue) { return store }
        var n = 2
        while try taken("\(store.rawValue)#\(n)") { n += 1 }
        return ItemIdentifier("\(store.rawValue)#\(n)")
    }

    /// Writes `row` (by its stable identifier), first dropping any other row with its store
    /// identifier and clearing its file id from any other row.
    private func write(_ row: IdentityRow) throws {
        try database.run("DELETE FROM identities WHERE store = ? AND stable <> ?", [.text(row.store.rawValue), .text(row.stable.rawValue)])
        if let fileID = row.fileID {
            try database.run("UPDATE identities SET file_id = NULL WHERE file_id = ? AND stable <> ?", [.text(fileID), .text(row.stable.rawValue)])
        }
        try database.run("""
            INSERT INTO identities(stable, store, file_id) VALUES(?, ?, ?)
            ON CONFLICT(stable) DO UPDATE SET store = excluded.store, file_id = excluded.file_id
            """, [.text(row.stable.rawValue), .text(row.store.rawValue), row.fileID.map { .text($0) } ?? .null])
    }

    private static func identityRow(_ row: SQLiteRow) -> IdentityRow? {
        guard let stable = row.string(0), let store = row.string(1) else { return nil }
        return IdentityRow(stable: ItemIdentifier(stable), store: ItemIdentifier(store), fileID: row.string(2))
    }
}
