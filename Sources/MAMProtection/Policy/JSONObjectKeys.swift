import Foundation

/// Finds object keys that repeat within one JSON object. JSONSerialization keeps the last of
/// two equal keys without saying so, which would let a policy file hide a setting behind a
/// later one; the policy parser refuses such files with this check.
enum JSONObjectKeys {
    /// The first key that occurs twice in the same object of `json`, decoded (escapes
    /// resolved); nil when there is none. Keys of different (nested) objects never clash, and
    /// strings that are values are not keys. Expects valid JSON (run it after
    /// JSONSerialization accepted the text); on malformed input it returns nil or a best guess.
    static func firstDuplicate(in json: Data) -> String? {
        let bytes = [UInt8](json)
        // One entry per open container: the keys seen so far (nil for an array) and whether
        // the next string in it is a key.
        var stack: [(keys: Set<String>?, expectingKey: Bool)] = []
        var index = 0
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "{"):
                stack.append((keys: [], expectingKey: true))
            case UInt8(ascii: "["):
                stack.append((keys: nil, expectingKey: false))
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                if !stack.isEmpty { stack.removeLast() }
            case UInt8(ascii: ","):
                if let top = stack.last, top.keys != nil { stack[stack.count - 1].expectingKey = true }
            case UInt8(ascii: "\""):
                let (text, end) = decodeString(bytes, from: index + 1)
                index = end
                if let top = stack.last, var keys = top.keys, top.expectingKey {
                    if !keys.insert(text).inserted { return text }
                    stack[stack.count - 1] = (keys: keys, expectingKey: false)
                }
            default:
                break
            }
            index += 1
        }
        return nil
    }

    /// Decodes the string whose first content byte is at `start`.
    /// - Returns: the text and the index of the closing quote (or the end of the input).
    private static func decodeString(_ bytes: [UInt8], from start: Int) -> (String, Int) {
        var scalars = String.UnicodeScalarView()
        var raw: [UInt8] = []
        var index = start
        func flushRaw() {
            scalars.append(contentsOf: String(decoding: raw, as: UTF8.self).unicodeScalars)
            raw.removeAll()
        }
        while index < bytes.count, bytes[index] != UInt8(ascii: "\"") {
            guard bytes[index] == UInt8(ascii: "\\"), index + 1 < bytes.count else {
                raw.append(bytes[index])
                index += 1
                continue
            }
            flushRaw()
            let escape = bytes[index + 1]
            index += 2
            switch escape {
            case UInt8(ascii: "b"): scalars.append("\u{08}")
            case UInt8(ascii: "f"): scalars.append("\u{0C}")
            case UInt8(ascii: "n"): scalars.append("\n")
            case UInt8(ascii: "r"): scalars.append("\r")
            case UInt8(ascii: "t"): scalars.append("\t")
            case UInt8(ascii: "u"):
                guard var unit = hex4(bytes, at: index) else { continue }
                index += 4
                if (0xD800..<0xDC00).contains(unit), index + 5 < bytes.count,
                   bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u"),
                   let low = hex4(bytes, at: index + 2), (0xDC00..<0xE000).contains(low) {
                    unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                    index += 6
                }
                scalars.append(Unicode.Scalar(unit) ?? "\u{FFFD}")
            default: scalars.append(Unicode.Scalar(escape))
            }
        }
        flushRaw()
        return (String(scalars), index)
    }

    private static func hex4(_ bytes: [UInt8], at index: Int) -> UInt32? {
        guard index + 4 <= bytes.count else { return nil }
        var value: UInt32 = 0
        for byte in bytes[index..<(index + 4)] {
            guard let digit = Character(Unicode.Scalar(byte)).hexDigitValue else { return nil }
            value = value << 4 | UInt32(digit)
        }
        return value
    }
}
