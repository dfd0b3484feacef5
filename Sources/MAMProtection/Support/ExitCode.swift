/// The exit status of every mamfs program: the one table of codes, with the sysexits(3) names.
///
/// The numbers are a public contract (scripts test them; README lists them), so a case's value
/// never changes. What each one means in mamfs:
///
/// | case          | code | sysexits       | mamfs                                                                  |
/// |---------------|------|----------------|------------------------------------------------------------------------|
/// | `ok`          | 0    | EX_OK          | success; a `provider sync` pass with nothing left out of sync          |
/// | `failure`     | 1    | -              | the FUSE session of a mount ended with an error (the mount daemon, `mount -f`) |
/// | `usage`       | 64   | EX_USAGE       | unknown option or verb, missing or extra argument, invalid policy file, an argument or path variable that is not UTF-8, `MAMError.invalidArguments`; `mount` on a mountpoint with a FUSE mount (or a dead one, without `--force`) |
/// | `dataErr`     | 65   | EX_DATAERR     | corrupt or tampered data (authentication failure), input that is not protected or not base64, a damaged state database |
/// | `noInput`     | 66   | EX_NOINPUT     | a file, directory, state or account that is not there; `unmount` of something that is not a mamfs mount |
/// | `unavailable` | 69   | EX_UNAVAILABLE | `events`: there is no session bus, or it cannot be reached or went away |
/// | `software`    | 70   | EX_SOFTWARE    | internal error; the mount daemon exited before it could say why       |
/// | `cantCreate`  | 73   | EX_CANTCREAT   | cannot create the output (disk full, read-only, exists, link limit; `-o` names something that is not a regular file); the FUSE mount itself failed; `provider evict` of a file with changes not uploaded |
/// | `ioErr`       | 74   | EX_IOERR       | any other I/O error; items a `provider sync` pass could not bring in sync; a wipe whose deleted key bytes may remain in the state files; a declassification whose audit record cannot be written |
/// | `tempFail`    | 75   | EX_TEMPFAIL    | `provider sync`: the remote was unreachable; nothing local was lost, run it again; `unmount`: the mount is gone but its daemon is still running after the timeout |
/// | `noPerm`      | 77   | EX_NOPERM      | denied by policy, unknown account, key unavailable (wiped account, wrong passphrase), a state directory that cannot be read or is not safe; a key refused by the compliance gate |
/// | `notCompliant` | 80  | -              | `compliance check/remediate/status`: NotCompliant                        |
/// | `networkFailure` | 81 | -             | `compliance`: NetworkFailure                                            |
/// | `serviceFailure` | 82 | -             | `compliance`: ServiceFailure (a check that timed out or failed to run)   |
/// | `userCancelled` | 83 | -              | `compliance`: UserCancelled                                             |
/// | `interactionRequired` | 84 | -        | `compliance`: InteractionRequired (`remediate --silent` of a check that needs the user) |
///
/// `config` (78) is not used: mamfs reports a bad configuration file as one of the codes above.
public enum ExitCode: Int32, Sendable, CaseIterable, CustomStringConvertible {
    /// 0, EX_OK.
    case ok = 0
    /// 1: the FUSE session ended with an error (no sysexits name).
    case failure = 1
    /// 64, EX_USAGE: the command line was wrong.
    case usage = 64
    /// 65, EX_DATAERR: corrupt, tampered or unprotected input data.
    case dataErr = 65
    /// 66, EX_NOINPUT: an input file, directory, state or account is missing.
    case noInput = 66
    /// 69, EX_UNAVAILABLE: a service mamfs needs (the session bus of `mamfs events`) is not there.
    case unavailable = 69
    /// 70, EX_SOFTWARE: internal error.
    case software = 70
    /// 73, EX_CANTCREAT: the output cannot be created.
    case cantCreate = 73
    /// 74, EX_IOERR: an I/O error, or items left out of sync.
    case ioErr = 74
    /// 75, EX_TEMPFAIL: try again later (remote unreachable, daemon still running after unmount).
    case tempFail = 75
    /// 77, EX_NOPERM: denied (policy, account, key, unsafe state directory).
    case noPerm = 77
    /// 80: the compliance verbs' NotCompliant (`ComplianceStatus.exitCode`).
    case notCompliant = 80
    /// 81: the compliance verbs' NetworkFailure.
    case networkFailure = 81
    /// 82: the compliance verbs' ServiceFailure.
    case serviceFailure = 82
    /// 83: the compliance verbs' UserCancelled.
    case userCancelled = 83
    /// 84: the compliance verbs' InteractionRequired.
    case interactionRequired = 84

    /// The code as a decimal number, as a shell prints `$?`.
    public var description: String { String(rawValue) }
}
