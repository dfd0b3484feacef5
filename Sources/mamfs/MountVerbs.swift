import Foundation
import MAMFS
import MAMFileProvider
import MAMProtection

/// `mount` and `unmount`: the FUSE overlay of the MAMFS module.
enum MountVerbs {
    static let mount = Verb(
        "mount",
        usage: ["mamfs mount BACKING MOUNTPOINT [--account ACCOUNT] [-f] [-o OPTIONS] [--state DIR]",
                "mamfs mount BACKING MOUNTPOINT --remote DIR --provider non-replicated|replicated",
                "            [--sync-interval SECONDS] [--location NAME] [--account ACCOUNT] [-f] [-o OPTIONS] [--state DIR]"],
        summary: "Mount the backing directory BACKING on the empty directory MOUNTPOINT: programs see plaintext, new files are owned by the nearest protected directory's owner, else ACCOUNT, and files of a managed account are encrypted in BACKING. With --remote and --provider, BACKING is the local root of a file provider for the remote directory DIR and the domain's account ACCOUNT: the remote tree appears in the mount (non-replicated: as placeholders downloaded on first open; replicated: as a replica kept in sync), and files changed in the mount are uploaded as plain copies. Returns once the mount answers unless -f.",
        options: ["--account ACCOUNT       owner of new files outside protected directories (default: unmanaged);",
                  "                        with --provider, the domain's account",
                  "--remote DIR            the remote directory of a file-provider mount (needs --provider)",
                  "--provider KIND         non-replicated or replicated (needs --remote)",
                  "--sync-interval SECONDS seconds between sync passes of a replicated mount (default 5)",
                  "--location NAME         the storage location the provider mount is for the policy's",
                  "                        saveToLocations/openFromLocations (default Other)",
                  "-f                      stay in the foreground until unmounted (SIGINT/SIGTERM unmount)",
                  "-o OPTIONS              FUSE options, comma-separated (allow_other, ro, default_permissions,",
                  "                        attr_timeout=S, entry_timeout=S, ...); repeatable"],
        spec: ArgumentSpec(flags: ["-f"], options: ["--account", "--remote", "--provider", "--sync-interval", "--location"],
                           repeatable: ["-o"], positionals: 2...2),
        run: runMount)

    static let unmount = Verb(
        "unmount",
        usage: ["mamfs unmount MOUNTPOINT [--state DIR]"],
        summary: "Unmount a mamfs mount (fusermount3 -u, lazily if it is busy).",
        spec: ArgumentSpec(positionals: 1...1),
        run: runUnmount)

    static func runMount(_ arguments: ParsedArguments, _ invocation: Invocation) throws -> ExitCode {
        let backing = arguments.positionals[0]
        let mountpoint = arguments.positionals[1]
        let provider = try providerOptions(arguments)
        let context = try invocation.openContext()
        var options = MountOptions(backingDirectory: backing, mountpoint: mountpoint,
                                   account: arguments.value("--account") ?? "",
                                   foreground: arguments.flag("-f"),
                                   fuseOptions: arguments.values("-o"),
                                   stateDirectory: invocation.stateDirectory.url.path,
                                   passphraseFile: invocation.passphraseFile)
        if let provider {
            options.remote = MountTable.resolvedPath(provider.remote)
            options.provider = provider.kind
            options.syncInterval = provider.syncInterval
            options.location = provider.location
        }
        do {
            return try MountDaemon.run(options: options, context: context)
        } catch let failure as MountFailure {
            throw CommandFailure(subject: mountpoint, message: failure.description, exitCode: failure.exitCode)
        } catch {
            throw CommandFailure(subject: mountpoint, error: error)
        }
    }

    /// `--remote DIR --provider KIND [--sync-interval SECONDS] [--location NAME]`, checked: both
    /// or neither of `--remote` and `--provider`, a known kind, a positive interval for a
    /// replicated mount only, a known location name (save or open location; default Other).
    /// - Returns: nil for a plain overlay.
    /// - Throws: `UsageError`.
    static func providerOptions(_ arguments: ParsedArguments) throws
        -> (remote: String, kind: ProviderKind, syncInterval: Double, location: StorageLocation)? {
        let remote = arguments.value("--remote")
        let kindName = arguments.value("--provider")
        let interval = arguments.value("--sync-interval")
        let locationName = arguments.value("--location")
        guard remote != nil || kindName != nil else {
            if interval != nil { throw UsageError("--sync-interval needs --remote DIR --provider replicated") }
            if locationName != nil {
                throw UsageError("--location is for --provider mounts (a plain mount's locations come from the policy's 'locations')")
            }
            return nil
        }
        var location = StorageLocation.other
        if let locationName {
            guard let named = StorageLocation(named: locationName) else {
                throw UsageError("unknown location '\(InputQuote.short(locationName))' (expected a save or open location name, e.g. OneDriveForBusiness, SharePoint, Other)")
            }
            location = named
        }
        guard let remote, !remote.isEmpty else { throw UsageError("--provider needs --remote DIR") }
        guard let kindName else { throw UsageError("--remote needs --provider non-replicated|replicated") }
        guard let kind = ProviderKind(rawValue: kindName) else {
            throw UsageError("unknown provider '\(InputQuote.short(kindName))' (expected 'non-replicated' or 'replicated')")
        }
        var seconds = 5.0
        if let interval {
            guard kind == .replicated else { throw UsageError("--sync-interval is for --provider replicated") }
            guard let value = Double(interval), value.isFinite, value > 0 else {
                throw UsageError("--sync-interval: expected a positive number of seconds, got '\(InputQuote.short(interval))'")
            }
            seconds = value
        }
        return (remote, kind, seconds, location)
    }

    static func runUnmount(_ arguments: ParsedArguments, _ invocation: Invocation) throws -> ExitCode {
        let mountpoint = arguments.positionals[0]
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: mountpoint, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw CommandFailure(subject: mountpoint, message: "no such directory", exitCode: ExitCode.noInput)
        }
        guard isFuseMount(mountpoint) else {
            throw CommandFailure(subject: mountpoint, message: "not a mamfs mount", exitCode: ExitCode.noInput)
        }
        do {
            try MountDaemon.unmount(mountpoint: mountpoint)
        } catch {
            throw CommandFailure(subject: mountpoint, message: "cannot unmount: not a mamfs mount, or not yours",
                                 exitCode: ExitCode.noInput)
        }
        return ExitCode.ok
    }

    /// True when the mount table lists `path` (resolved) as a FUSE mount, so `unmount`
    /// answers "not a mamfs mount" itself instead of passing fusermount3's complaints through.
    /// Without a readable table, fusermount3 is left to decide.
    static func isFuseMount(_ path: String) -> Bool {
        guard let resolved = realpath(path, nil) else { return false }
        let target = String(cString: resolved)
        free(resolved)
        return MountTable.current()?.isFuseMount(target) ?? true
    }
}
