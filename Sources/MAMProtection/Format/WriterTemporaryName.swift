import Glibc

/// The name of the temp file a rewrite (`AtomicFileWriter`) gives the new contents when they
/// cannot go straight in place: `.NAME.mamfs-tmp-pPID-SUFFIX`, NAME the target's name cut to 80
/// characters, PID the writing process, SUFFIX random (base 36).
///
/// A process killed between linking the temp file and renaming it over the target leaves it
/// behind, with the new contents: plaintext, for a `decrypt`. The PID tells such a leftover
/// (its writer is gone) from a rewrite under way, and NAME its target, so a wipe can remove
/// the left-over of a file it wipes (`isLeftOver`, `target(of:)`).
public enum WriterTemporaryName {
    static let marker = ".mamfs-tmp-p"

    /// The temp name for `target` written by `pid`.
    static func make(for target: String, pid: pid_t = getpid(), suffix: String) -> String {
        ".\(target.prefix(80))\(marker)\(pid)-\(suffix)"
    }

    /// The writer's PID in a name of this form; nil for any other name (older temp names
    /// without a PID included: whose they are cannot be told).
    public static func writer(of name: String) -> pid_t? {
        guard name.hasPrefix("."), let range = name.range(of: marker, options: .backwards) else { return nil }
        let rest = name[range.upperBound...]
        guard let dash = rest.firstIndex(of: "-"), let pid = pid_t(rest[..<dash]), pid > 0,
              rest.index(after: dash) < rest.endIndex else { return nil }
        return pid
    }

    /// The target's name in a name of this form, nil for any other name or when the target's
    /// name was cut (80 characters or more: the full name cannot be told).
    public static func target(of name: String) -> String? {
        guard writer(of: name) != nil, let range = name.range(of: marker, options: .backwards) else { return nil }
        let target = name[name.index(after: name.startIndex)..<range.lowerBound]
        guard !target.isEmpty, target.count < 80 else { return nil }
        return String(target)
    }

    /// True for a name of this form whose writer no longer runs (kill(pid, 0) answers ESRCH).
    /// A writer of another user that runs (EPERM), or a PID reused since, keeps it.
    public static func isLeftOver(_ name: String) -> Bool {
        guard let pid = writer(of: name) else { return false }
        return kill(pid, 0) != 0 && errno == ESRCH
    }
}
