import Foundation

/// The command line and the environment paths mamfs uses, read as bytes and checked to be
/// UTF-8 before anything decodes them: Swift's `String` replaces invalid bytes with U+FFFD, so
/// `x\xff` would silently become the name of a different file (`x\u{FFFD}`).
enum RawArguments {
    /// Environment variables whose values mamfs turns into paths.
    static let pathVariables = ["MAMFS_STATE", "MAMFS_PASSPHRASE_FILE", "XDG_DATA_HOME", "HOME"]

    /// The first problem found: `argument N` (1-based, after the program name) or an
    /// environment variable whose bytes are not valid UTF-8, as one line for stderr.
    /// - Parameters: `argc`/`argv` as the process got them (`CommandLine.argc`, `unsafeArgv`).
    /// - Returns: nil when every argument and every variable in `pathVariables` is UTF-8.
    static func invalidUTF8(argc: Int32, argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> String? {
        if argc > 1 {
            for index in 1..<Int(argc) {
                guard let pointer = argv[index] else { continue }
                let bytes = bytesOf(pointer)
                if !isUTF8(bytes) {
                    return "mamfs: argument \(index) ('\(escapedPrefix(bytes))') is not valid UTF-8; mamfs accepts only UTF-8 arguments and paths"
                }
            }
        }
        for name in pathVariables {
            guard let pointer = getenv(name) else { continue }
            let bytes = bytesOf(pointer)
            if !isUTF8(bytes) {
                return "mamfs: $\(name) ('\(escapedPrefix(bytes))') is not valid UTF-8; mamfs accepts only UTF-8 paths"
            }
        }
        return nil
    }

    private static func bytesOf(_ pointer: UnsafePointer<CChar>) -> [UInt8] {
        let length = strlen(pointer)
        return pointer.withMemoryRebound(to: UInt8.self, capacity: length) {
            Array(UnsafeBufferPointer(start: $0, count: length))
        }
    }

    /// True when `bytes` decode as UTF-8 without a replacement (the standard library's decoder,
    /// which rejects overlong forms, surrogates and values above U+10FFFF).
    static func isUTF8(_ bytes: [UInt8]) -> Bool {
        var iterator = bytes.makeIterator()
        var decoder = UTF8()
        while true {
            switch decoder.decode(&iterator) {
            case .scalarValue: continue
            case .emptyInput: return true
            case .error: return false
            }
        }
    }

    /// At most `limit` bytes of `bytes`: printable ASCII as is, every other byte as `\xHH`,
    /// followed by "…" when cut.
    static func escapedPrefix(_ bytes: [UInt8], limit: Int = 32) -> String {
        var text = ""
        for byte in bytes.prefix(limit) {
            if byte >= 0x20 && byte < 0x7F && byte != UInt8(ascii: "\\") && byte != UInt8(ascii: "'") {
                text.append(Character(Unicode.Scalar(byte)))
            } else {
                text += "\\x" + (byte < 0x10 ? "0" : "") + String(byte, radix: 16)
            }
        }
        return bytes.count > limit ? text + "…" : text
    }
}
