import Foundation

/// Names the local copy kept when an item changed on both sides:
/// `name (conflict HOST YYYY-MM-DD HHMMSS).ext` (UTC), with ` 2`, ` 3`... added inside the
/// parentheses when that name is taken too. A name is at most `maximumBytes` UTF-8 bytes
/// (NAME_MAX): the stem of a long one is cut (at a character boundary) to make room, and an
/// extension too long to keep is cut with the rest as part of the stem.
enum ConflictName {
    /// NAME_MAX of Linux filesystems, in bytes.
    static let maximumBytes = 255

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
            let candidate = fitted(stem: stem, suffix: suffix, ext: ext, whole: filename)
            if !isTaken(candidate) { return candidate }
            counter += 1
        }
    }

    /// `stem (suffix).ext` within `maximumBytes`: the stem cut to fit; when even an empty stem
    /// leaves no room for the extension, the whole name is cut and no extension kept.
    private static func fitted(stem: String, suffix: String, ext: String, whole: String) -> String {
        let tail = " (\(suffix))" + (ext.isEmpty ? "" : ".\(ext)")
        if stem.utf8.count + tail.utf8.count <= maximumBytes { return stem + tail }
        if tail.utf8.count < maximumBytes - 8 { return prefix(of: stem, bytes: maximumBytes - tail.utf8.count) + tail }
        let bare = " (\(suffix))"
        return prefix(of: whole, bytes: maximumBytes - bare.utf8.count) + bare
    }

    /// The longest run of whole characters from the start of `text` within `bytes` UTF-8 bytes.
    private static func prefix(of text: String, bytes: Int) -> String {
        var result = ""
        var used = 0
        for character in text {
            let size = character.utf8.count
            guard used + size <= bytes else { break }
            result.append(character)
            used += size
        }
        return result
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
