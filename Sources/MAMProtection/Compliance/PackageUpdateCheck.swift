import Foundation

/// The `packagesUpdatedWithinDays` check: how long ago apt last showed evidence of an update.
///
/// The newest of: the modification time of `/var/lib/apt/periodic/update-success-stamp`
/// (a successful `apt-get update` by APT::Periodic), the last `Start-Date:` of
/// `/var/log/apt/history.log` (an apt install/upgrade run; local time), and the modification
/// time of `/var/lib/dpkg/status` (any package change dpkg made).
enum PackageUpdateCheck {
    /// One source of evidence.
    struct Sources: Sendable {
        var updateStamp = "/var/lib/apt/periodic/update-success-stamp"
        var history = "/var/log/apt/history.log"
        var dpkgStatus = "/var/lib/dpkg/status"
    }

    /// Bytes at the end of history.log that are searched for the last Start-Date.
    static let historyTail = 1 << 20

    static func evaluate(days: Int, now: Date, sources: Sources = Sources()) -> ComplianceOutcome {
        let name = "packagesUpdatedWithinDays"
        guard let (newest, source) = newestEvidence(sources) else {
            return ComplianceOutcome(check: name, status: .notCompliant,
                                     reason: "no evidence of a package update (none of \(sources.updateStamp), \(sources.history), \(sources.dpkgStatus))")
        }
        let age = now.timeIntervalSince(newest)
        let ageDays = Int((max(age, 0) / 86_400).rounded(.down))
        let stamp = AuditTime.format(newest)
        if age <= Double(days) * 86_400 {
            return ComplianceOutcome(check: name, status: .compliant,
                                     reason: "packages updated \(ageDays) day\(ageDays == 1 ? "" : "s") ago (\(source), \(stamp))")
        }
        return ComplianceOutcome(check: name, status: .notCompliant,
                                 reason: "packages last updated \(ageDays) day\(ageDays == 1 ? "" : "s") ago (\(source), \(stamp)), more than \(days)")
    }

    /// The newest evidence and where it came from, or nil when there is none.
    static func newestEvidence(_ sources: Sources) -> (Date, String)? {
        var found: [(Date, String)] = []
        if let date = modificationTime(sources.updateStamp) { found.append((date, sources.updateStamp)) }
        if let date = lastStartDate(sources.history) { found.append((date, sources.history)) }
        if let date = modificationTime(sources.dpkgStatus) { found.append((date, sources.dpkgStatus)) }
        return found.max { $0.0 < $1.0 }
    }

    static func modificationTime(_ path: String) -> Date? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        return Date(timeIntervalSince1970: Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9)
    }

    /// The last `Start-Date: YYYY-MM-DD  HH:MM:SS` (local time) in the file's last MiB.
    static func lastStartDate(_ path: String) -> Date? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        let size = (try? handle.seekToEnd()) ?? 0
        try? handle.seek(toOffset: size > UInt64(historyTail) ? size - UInt64(historyTail) : 0)
        guard let data = try? handle.readToEnd() else { return nil }
        let text = String(decoding: data, as: UTF8.self)
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone.current
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss"
        for line in text.split(separator: "\n").reversed() where line.hasPrefix("Start-Date:") {
            let value = line.dropFirst("Start-Date:".count).split(separator: " ").joined(separator: " ")
            if let date = formatter.date(from: value) { return date }
        }
        return nil
    }
}
