import Foundation
import MAMFS
import MAMProtection

/// `lock` and `unlock`: the session lock of a running mount (policy key `fileProtectionLevel`),
/// for scripts, a lock screen without logind, and a passphrase-protected state, whose keys only
/// come back with the passphrase.
enum SessionLockCommands {
    static let lock = Verb(
        "lock",
        usage: ["mamfs lock MOUNTPOINT"],
        summary: "Lock the mount at MOUNTPOINT now, as a session lock does: the keys of every account whose policy's fileProtectionLevel is complete or completeUnlessOpen leave the daemon's memory, and their files answer EACCES (completeUnlessOpen: files opened before keep working through their handles) until 'mamfs unlock' or the session's next unlock. Only the mount's user or root may lock it. Exit \(ExitCode.noInput) when nothing mamfs is mounted there, \(ExitCode.unavailable) when its daemon does not answer or cannot be found (another user's mount, a dead mount).",
        options: [],
        spec: ArgumentSpec(positionals: 1...1),
        run: { arguments, invocation in try run(.lock, arguments, invocation) })

    static let unlock = Verb(
        "unlock",
        usage: ["mamfs unlock MOUNTPOINT"],
        summary: "Unlock the mount at MOUNTPOINT: the daemon loads the master key again and the withheld accounts' files open again. A state protected by a passphrase needs it (MAMFS_PASSPHRASE_FILE names the file; it is handed to the daemon over its control channel and never written anywhere); a wrong one, or none, is refused with \(ExitCode.noPerm) and the keys stay withheld (a passphrase file that cannot be read: \(ExitCode.noInput)). A key-file state also unlocks by itself at the session's unlock. Exit \(ExitCode.noInput) when nothing mamfs is mounted there, \(ExitCode.unavailable) when its daemon does not answer or cannot be found (another user's mount, a dead mount).",
        options: [],
        spec: ArgumentSpec(positionals: 1...1),
        run: { arguments, invocation in try run(.unlock, arguments, invocation) })

    private static func run(_ request: DaemonControlRequest, _ arguments: ParsedArguments, _ invocation: Invocation) throws -> ExitCode {
        let mountpoint = arguments.positionals[0]
        let message: String
        do {
            if request == .unlock, let file = invocation.passphraseFile {
                message = try Passphrase.withBytes(ofFile: file) { try MountDaemon.sessionLock(request, mountpoint: mountpoint, passphrase: $0) }
            } else {
                message = try MountDaemon.sessionLock(request, mountpoint: mountpoint)
            }
        } catch let failure as MountFailure {
            throw CommandFailure(subject: mountpoint, message: failure.description, exitCode: failure.exitCode)
        }
        if invocation.verbose || !message.isEmpty { Output.line("\(mountpoint): \(message)") }
        return .ok
    }
}
