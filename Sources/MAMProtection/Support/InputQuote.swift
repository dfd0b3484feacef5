/// How error messages quote input they reject: at most a short prefix, on one line, so a huge
/// or multi-line value (a 50 MB policy string, a pasted file) never floods stderr or a log.
public enum InputQuote {
    /// Characters of input an error message quotes before cutting it off with "…".
    public static let limit = 64

    /// `text` for an error message: newlines and other control characters (C0, DEL, C1) shown as spaces,
    /// cut to `limit` characters followed by "…" when longer.
    public static func short(_ text: String, limit: Int = InputQuote.limit) -> String {
        var result = ""
        var count = 0
        for character in text {
            if count == limit { return result + "…" }
            let isControl = character.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }
            result.append(isControl ? " " : character)
            count += 1
        }
        return result
    }
}
