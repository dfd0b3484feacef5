import Foundation
import MAMFS
import MAMFileProvider
import MAMProtection

/// `mount` and `unmount`: the FUSE overlay of the MAMFS module.
enum MountVerbs {
    static let mount = Verb(
        "mount",
        usage: ["mamfs mount BACKING MOUNTPOINT [--account ACCOUNT] [-f] [--force] [-o OPTIONS] [--state DIR]",
                "mamfs mount BACKING MOUNTPOINT --remote DIR|URL --provider non-replicated|replicated",
                "            [--remote-credentials FILE] [--remote-ca FILE] [--sync-interval SECONDS] [--location NAME] [--account ACCOUNT] [-f] [--force] [-o OPTIONS] [--state DIR]"],
        summary: "Mount the backing directory BACKING on the empty directory MOUNTPOINT: programs see plaintext, new files are owned by the nearest protected directory's owner, else ACCOUNT, and files of a managed account are encrypted in BACKING. \(noAccountSentence) With --remote and --provider, BACKING is the local root of a file provider for the remote directory DIR (or the WebDAV collection at the http:// or https:// URL) and the domain's account ACCOUNT: the remote tree appears in the mount (non-replicated: as placeholders downloaded on first open; replicated: as a replica kept in sync), and files changed in the mount are uploaded as plain copies. A MOUNTPOINT that already has a FUSE mount is refused (\(ExitCode.usage)); so is a dead one (its daemon exited; 'Transport endpoint is not connected') unless --force. Returns once the mount answers unless -f.",
        options: ["--account ACCOUNT       owner of new files outside protected directories (default: unmanaged);",
                  "                        with --provider, the domain's account; an account the allowed-accounts",
                  "                        list does not name is refused (\(ExitCode.noPerm), written to the audit log)",
                  "--remote DIR|URL        the remote directory of a file-provider mount, or the https:// URL",
                  "                        of a WebDAV collection (http:// only to a loopback host; needs --provider)",
                  "--remote-credentials FILE  WebDAV login: a netrc file (machine HOST login USER password PASS),",
                  "                        mode 0600; default: MAMFS_REMOTE_USER and MAMFS_REMOTE_PASSWORD",
                  "--remote-ca FILE        a PEM CA bundle to trust for the WebDAV server (TLS is always verified)",
                  "--provider KIND         non-replicated or replicated (needs --remote)",
                  "--sync-interval SECONDS seconds between sync passes (replicated, default 5) or remote",
                  "                        change checks (non-replicated, default 30) of a provider mount",
                  "--location NAME         the storage location the provider mount is for the policy's",
                  "                        saveToLocations/openFromLocations (default Other)",
                  "-f                      stay in the foreground until unmounted (SIGINT/SIGTERM unmount)",
                  "--force                 remove a dead mount on MOUNTPOINT first (as 'mamfs unmount' does)",
                  "-o OPTIONS              FUSE options, comma-separated (allow_other, ro, default_permissions,",
                  "                        attr_timeout=S, entry_timeout=S, ...; retry_base=S: a non-replicated",
                  "                        mount's first wait before retrying a change the unreachable remote",
                  "                        did not take, doubling to 5 min, default 1; notify: blocked accesses",
                  "                        also as desktop notifications, docs/NOTIFICATIONS.md; busy_poll=US:",
                  "                        poll for requests that long before sleeping, 0-1000, default 0);",
                  "                        repeatable"],
        spec: ArgumentSpec(flags: ["-f", "--force"], options: ["--account", "--remote", "--provider", "--sync-interval", "--location",
                                                                    "--remote-credentials", "--remote-ca"],
                           repeatable: ["-o"], positionals: 2...2),
        run: runMount)

    static let unmount = Verb(
        "unmount",
        usage: ["mamfs unmount MOUNTPOINT [--timeout SECONDS] [--state DIR]"],
        summary: "Unmount a mamfs mount (fusermount3 -u) and return once its daemon has exited. A busy mount (a process has its working directory or a file open in it) is detached lazily: it disappears at once and its daemon exits when the last user leaves. A dead mount (its daemon exited) is removed. A daemon still running after the timeout is reported with exit \(ExitCode.tempFail) (the mount is gone then).",
        options: ["--timeout SECONDS       how long to wait for the daemon to exit (default \(MountDaemon.seconds(MountDaemon.defaultUnmountTimeout)))"],
        spec: ArgumentSpec(options: ["--timeout"], positionals: 1...1),
        run: runUnmount)

    /// What a mount without `--account` does with new files, for `mount --help`.
    static let noAccountSentence = "Without --account, new files outside protected directories are unmanaged (personal) and stored plain; mount says so on stderr."

    /// The note a mount without `--account` prints on stderr as it starts.
    static let noAccountNote = "mamfs: mount: note: no --account: new files outside protected directories are unmanaged (personal) and stored plain; mount with --account ACCOUNT to make them the account's managed files"

    /// The note for a dead mount that was removed (`unmount`, `mount --force`).
    static func deadMountNote(verb: String, _ mountpoint: String) -> String {
        "mamfs: \(verb): note: \(mountpoint) was a dead mount (its daemon had exited); removed it"
    }

    static func runMount(_ arguments: ParsedArguments, _ invocation: Invocation) throws -> ExitCode {
        let backing = arguments.positionals[0]
        let mountpoint = arguments.positionals[1]
        let provider = try providerOptions(arguments)
        let context = try invocation.openContext()
        if let account = arguments.value("--account") {
            try CommandAudit.requireAllowed(context, action: "mount", names: [account])
        }
        var options = MountOptions(backingDirectory: backing, mountpoint: mountpoint,
                                   account: arguments.value("--account") ?? "",
                                   foreground: arguments.flag("-f"),
                                   fuseOptions: arguments.values("-o"),
                                   stateDirectory: invocation.stateDirectory.url.path,
                                   passphraseFile: invocation.passphraseFile)
        options.force = arguments.flag("--force")
        options.verbose = invocation.verbose
        if let provider {
            options.remote = WebDAVRemote.isURL(provider.remote) ? provider.remote : MountTable.resolvedPath(provider.remote)
            options.remoteAccess = provider.access
            options.provider = provider.kind
            options.syncInterval = provider.syncInterval
            options.location = provider.location
        }
        var events = MountEvents()
        events.removedDeadMount = { _ in Output.error(deadMountNote(verb: "mount", mountpoint)) }
        if arguments.value("--account") == nil {
            events.prepared = { _ in Output.error(noAccountNote) }
        }
        if invocation.verbose {
            events.started = { started in
                Output.line("Mounted \(started.backingDirectory) on \(started.mountpoint) (daemon pid \(started.pid))")
            }
        }
        do {
            return try MountDaemon.run(options: options, context: context, events: events)
        } catch let failure as MountFailure {
            throw CommandFailure(subject: mountpoint, message: failure.description, exitCode: failure.exitCode)
        } catch {
            throw CommandFailure(subject: mountpoint, error: error)
        }
    }

    /// `--remote DIR --provider KIND [--sync-interval SECONDS] [--location NAME]`, checked: both
    /// or neither of `--remote` and `--provider`, a known kind, a positive interval (default:
    /// `MountOptions.defaultSyncInterval` of the kind), a known location name (save or open location; default Other).
    /// - Returns: nil for a plain overlay.
    /// - Throws: `UsageError`.
    static func providerOptions(_ arguments: ParsedArguments) throws
        -> (remote: String, kind: ProviderKind, syncInterval: Double, location: StorageLocation, access: RemoteAccess)? {
        let remote = arguments.value("--remote")
        let access = try remoteAccess(arguments)
        let kindName = arguments.value("--provider")
        let interval = arguments.value("--sync-interval")
        let locationName = arguments.value("--location")
        guard remote != nil || kindName != nil else {
            if interval != nil { throw UsageError("--sync-interval needs --remote DIR --provider KIND") }
            if access != RemoteAccess() { throw UsageError("--remote-credentials and --remote-ca need --remote URL --provider KIND") }
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
        var seconds = MountOptions.defaultSyncInterval(kind)
        if let interval {
            guard let value = Double(interval), value.isFinite, value > 0 else {
                throw UsageError("--sync-interval: expected a positive number of seconds, got '\(InputQuote.short(interval))'")
            }
            seconds = value
        }
        return (remote, kind, seconds, location, access)
    }

    /// `--remote-credentials FILE` and `--remote-ca FILE`, made absolute (the daemon leaves
    /// the working directory) without resolving symbolic links (a credentials file that is
    /// one is refused).
    /// - Throws: `UsageError` for an empty value.
    static func remoteAccess(_ arguments: ParsedArguments) throws -> RemoteAccess {
        var access = RemoteAccess()
        for (option, keyPath) in [("--remote-credentials", \RemoteAccess.credentialsFile), ("--remote-ca", \RemoteAccess.caFile)] {
            guard let value = arguments.value(option) else { continue }
            guard !value.isEmpty else { throw UsageError("\(option) needs a file") }
            access[keyPath: keyPath] = value.hasPrefix("/") ? value : FileManager.default.currentDirectoryPath + "/" + value
        }
        return access
    }

    static func runUnmount(_ arguments: ParsedArguments, _ invocation: Invocation) throws -> ExitCode {
        let mountpoint = arguments.positionals[0]
        var timeout = MountDaemon.defaultUnmountTimeout
        if let text = arguments.value("--timeout") {
            guard let value = Double(text), value.isFinite, value >= 0 else {
                throw UsageError("--timeout: expected a number of seconds, got '\(InputQuote.short(text))'")
            }
            timeout = value
        }
        let result: MountDaemon.UnmountResult
        do {
            result = try MountDaemon.unmount(mountpoint: mountpoint, timeout: timeout)
        } catch let failure as MountFailure {
            throw CommandFailure(subject: mountpoint, message: failure.description, exitCode: failure.exitCode)
        }
        switch result {
        case .unmounted(let daemons):
            if invocation.verbose {
                let pids = daemons.map(String.init).joined(separator: ", ")
                Output.line(daemons.isEmpty ? "Unmounted \(mountpoint) (its daemon was not found, so not waited for)"
                            : "Unmounted \(mountpoint) (daemon pid\(daemons.count == 1 ? "" : "s") \(pids) exited)")
            }
        case .deadMountRemoved:
            Output.error(deadMountNote(verb: "unmount", mountpoint))
        case .detachedLazily:
            Output.error("mamfs: unmount: note: \(mountpoint) is busy (a process has its working directory or a file open in it): detached lazily; its daemon exits when the last one leaves")
        }
        return ExitCode.ok
    }
}
