import Foundation

/// Names the local copy kept when an item changed on both sides:
/// `name (conflict HOST YYYY-MM-DD HHMMSS).ext` (UTC), with ` 2`, ` 3`... added inside the
/// parentheses when that name is taken too.
enum ConflictName {
    /// The conflict name for `filename`; `isTaken` says whether a candidate already exists.
    static func make(for filename: String, date: Date = Date(), host: String = hostName(),
                     isTaken: (String) -> Bool) -> String {
        // The extension is what follows the last dot, unless that dot starts the name (".bashrc").
        let dot = filename.lastIndex(of: ".").flatMap { $0 == filename.startIndex ? nil : $0 }
        let ext = dot.map { String(filename[filename.index(after: $0)...]) } ?? ""
        let stem = dot.map { String(filename[..<$0]) } ?? filename
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd HHmmss"
        let tag = "conflict \(host) \(formatter.string(from: date))"
        var counter = 1
        while true {
            let suffix = counter == 1 ? tag : "\(tag) \(counter)"
            let candidate = "\(stem) (\(suffix))" + (ext.isEmpty ? "" : ".\(ext)")
            if !isTaken(candidate) { return candidate }
            counter += 1
        }
    }

    /// The short host name (no domain), "localhost" when unknown.
    static func hostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "localhost" }
        let name = String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let short = name.split(separator: ".").first.map(String.init) ?? ""
        return short.isEmpty ? "localhost" : short.replacingOccurrences(of: "/", with: "_")
    }
}
