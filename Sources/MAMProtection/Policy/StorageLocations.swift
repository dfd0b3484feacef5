import Foundation

/// A place a file is stored, as both sides of the reference SDK name it: the `SaveLocation`
/// data is saved to and the `OpenLocation` data is opened from.
///
/// Named by a save or open location name; a name both enumerations know maps to both
/// (`OneDriveForBusiness`), `LocalDrive` and `LocalStorage` are the same place, as are
/// `CameraRoll` and `Photos`, `Camera` saves as `CameraRoll`; a name only one side knows is
/// `Other` on the other side (`Dropbox` opens as `Other`).
public struct StorageLocation: Equatable, Hashable, Sendable {
    public let save: SaveLocation
    public let open: OpenLocation

    public init(save: SaveLocation, open: OpenLocation) {
        self.save = save
        self.open = open
    }

    /// The local drive: every path no `locations` entry lists.
    public static let localDrive = StorageLocation(save: .localDrive, open: .localStorage)
    /// `Other`: the default of a provider mount's `--location`.
    public static let other = StorageLocation(save: .other, open: .other)

    /// The location named `name` (case-insensitive), or nil for a name neither side knows.
    public init?(named name: String) {
        let save = SaveLocation(parsing: name)
        let open = OpenLocation(parsing: name)
        switch (save, open) {
        case (.localDrive?, _), (_, .localStorage?): self = .localDrive
        case (.cameraRoll?, _), (_, .photos?), (_, .camera?): self.init(save: .cameraRoll, open: open ?? .photos)
        case let (save?, open?): self.init(save: save, open: open)
        case let (save?, nil): self.init(save: save, open: .other)
        case let (nil, open?): self.init(save: .other, open: open)
        case (nil, nil): return nil
        }
    }

    /// The name used in policy JSON and the audit log (the save side's name).
    public var name: String { save.rawValue }
}

/// The policy key `locations`: location name -> path prefixes. A path below a listed prefix is
/// in that location (the longest matching prefix wins); every other path is `LocalDrive`.
/// A file-provider mount is as a whole the location its `--location` names.
public struct StorageLocations: Equatable, Sendable {
    /// (prefix, location), longest prefix first.
    public private(set) var entries: [(prefix: String, location: StorageLocation)]

    public init() { entries = [] }

    /// - Parameter table: location name -> absolute path prefixes.
    /// - Throws: `MAMError.invalidArguments` for an unknown location name, a prefix that is not
    ///   absolute, or one prefix listed under two locations.
    public init(_ table: [String: [String]]) throws {
        var seen: [String: String] = [:]
        var entries: [(prefix: String, location: StorageLocation)] = []
        for (name, prefixes) in table.sorted(by: { $0.key < $1.key }) {
            guard let location = StorageLocation(named: name) else {
                throw MAMError.invalidArguments("locations: '\(InputQuote.short(name))' is not a location name")
            }
            for prefix in prefixes {
                guard prefix.hasPrefix("/"), !prefix.contains("\0") else {
                    throw MAMError.invalidArguments("locations: prefix '\(InputQuote.short(prefix))' of \(name) must be absolute")
                }
                let normalised = prefix.hasSuffix("/") ? prefix : prefix + "/"
                if let other = seen[normalised] {
                    throw MAMError.invalidArguments("locations: prefix '\(InputQuote.short(prefix))' is listed under \(other) and \(name)")
                }
                seen[normalised] = name
                entries.append((normalised, location))
            }
        }
        self.entries = entries.sorted { $0.prefix.count != $1.prefix.count ? $0.prefix.count > $1.prefix.count : $0.prefix < $1.prefix }
    }

    public var isEmpty: Bool { entries.isEmpty }

    /// The location of the absolute path `path`: the entry with the longest prefix that is
    /// `path` itself (as a directory) or an ancestor of it; `.localDrive` when none is.
    public func location(ofPath path: String) -> StorageLocation {
        let directory = path.hasSuffix("/") ? path : path + "/"
        return entries.first { directory.hasPrefix($0.prefix) }?.location ?? .localDrive
    }

    /// The location every path at or below the directory `directory` is in, when it is the same
    /// for all of them (no listed prefix lies strictly inside `directory`); nil otherwise. Lets a
    /// caller that knows a path is below `directory` skip working the path out.
    public func uniformLocation(below directory: String) -> StorageLocation? {
        let prefix = directory.hasSuffix("/") ? directory : directory + "/"
        if entries.contains(where: { $0.prefix.utf8.count > prefix.utf8.count && $0.prefix.hasPrefix(prefix) }) { return nil }
        return location(ofPath: prefix)
    }

    /// name -> prefixes (with their trailing "/"), as written back to JSON.
    public var table: [String: [String]] {
        var result: [String: [String]] = [:]
        for entry in entries { result[entry.location.name, default: []].append(entry.prefix) }
        return result.mapValues { $0.sorted() }
    }

    public static func == (a: StorageLocations, b: StorageLocations) -> Bool { a.table == b.table }
}
