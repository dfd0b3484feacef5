/// How error messages quote input they reject: at most a short prefix, on one line, so a huge
/// or multi-line value (a 50 MB policy string, a pasted file) never floods stderr or a log.
public enum InputQuote {
    /// Characters of input an error message quotes before cutting it off with "…".
    public static let limit = 64

    /// True for a control character: C0 (below U+0020), DEL, C1 (U+0080-U+009F).
    public static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
    }

    /// True for a character that changes what a terminal shows without showing itself: a
    /// control character, or an invisible format character (Unicode category Cf: bidi
    /// overrides, zero-width ones).
    public static func isInvisible(_ scalar: Unicode.Scalar) -> Bool {
        isControl(scalar) || scalar.properties.generalCategory == .format
    }

    /// `text` for an error message: newlines and other control characters (C0, DEL, C1) shown as spaces,
    /// cut to `limit` characters followed by "…" when longer.
    public static func short(_ text: String, limit: Int = InputQuote.limit) -> String {
        var result = ""
        var count = 0
        for character in text {
            if count == limit { return result + "…" }
            let isControl = character.unicodeScalars.contains(where: Self.isControl)
            result.append(isControl ? " " : character)
            count += 1
        }
        return result
    }

    /// `text` with its control characters (C0, DEL, C1) and invisible format characters (bidi
    /// overrides, zero-width ones: Cf) written as escapes: `\n`, `\t`, `\r`, else `\xHH` (C0,
    /// DEL) or `\u{HHHH}` (C1, Cf); a backslash stays as it is. What a line for a terminal or
    /// a log is made of, so a file name or UPN in it cannot end the line or drive the terminal.
    public static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: InputQuote.isInvisible) else { return text }
        var result = ""
        for scalar in text.unicodeScalars {
            guard InputQuote.isInvisible(scalar) else { result.unicodeScalars.append(scalar); continue }
            switch scalar {
            case "\n": result += "\\n"
            case "\t": result += "\\t"
            case "\r": result += "\\r"
            default:
                let hex = String(scalar.value, radix: 16)
                result += scalar.value <= 0x7F ? "\\x" + (hex.count < 2 ? "0" + hex : hex) : "\\u{" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex + "}"
            }
        }
        return result
    }
}
