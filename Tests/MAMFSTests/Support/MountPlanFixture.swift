import Foundation
import MAMProtection
@testable import MAMFS

/// An initialized state with an empty backing directory and mountpoint, for tests of
/// `MountDaemon.prepare` (how `-o` options are parsed) that mount nothing.
struct MountPlanFixture {
    let base: String
    let context: ProtectionContext

    /// Runs `body` with the fixture and removes its directory afterwards.
    static func with(_ body: (MountPlanFixture) throws -> Void) throws {
        let base = NSTemporaryDirectory() + "mamfs-opt-\(UUID().uuidString.prefix(8))"
        for dir in ["b", "m", "s"] { try FileManager.default.createDirectory(atPath: base + "/" + dir, withIntermediateDirectories: true) }
        defer { try? FileManager.default.removeItem(atPath: base) }
        let context = try ProtectionContext.initialize(stateDirectory: StateDirectory(path: base + "/s/state"), passphraseFile: nil)
        try body(MountPlanFixture(base: base, context: context))
    }

    /// Mount options for the fixture's backing directory and mountpoint with these `-o` words.
    func options(_ fuseOptions: [String] = []) -> MountOptions {
        MountOptions(backingDirectory: base + "/b", mountpoint: base + "/m", fuseOptions: fuseOptions)
    }
}
