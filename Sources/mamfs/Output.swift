import Foundation

/// Writing to stdout and stderr. Everything goes through unbuffered `FileHandle` writes so text
/// and binary output never interleave out of order.
enum Output {
    /// Writes `text` to stdout.
    static func out(_ text: String) {
        write(Data(text.utf8), to: STDOUT_FILENO)
    }

    /// Writes `text` and a newline to stdout.
    static func line(_ text: String = "") {
        out(text + "\n")
    }

    /// Writes raw bytes to stdout.
    static func bytes(_ data: Data) {
        write(data, to: STDOUT_FILENO)
    }

    /// Writes `text` and a newline to stderr.
    static func error(_ text: String) {
        write(Data((text + "\n").utf8), to: STDERR_FILENO)
    }

    /// Writes `text` (no newline added) to stderr.
    static func errorRaw(_ text: String) {
        write(Data(text.utf8), to: STDERR_FILENO)
    }

    /// Writes all of `data`, retrying short writes and EINTR. A closed pipe ends the write
    /// silently (the reader has gone away; SIGPIPE normally ends the process first).
    private static func write(_ data: Data, to fd: Int32) {
        data.withUnsafeBytes { (buffer: UnsafeRawBufferPointer) in
            guard var pointer = buffer.baseAddress else { return }
            var remaining = buffer.count
            while remaining > 0 {
                let written = Glibc.write(fd, pointer, remaining)
                if written < 0 {
                    if errno == EINTR { continue }
                    return
                }
                remaining -= written
                pointer += written
            }
        }
    }

    /// Reads stdin to its end, binary-safe.
    static func readStandardInput() -> Data {
        FileHandle.standardInput.readDataToEndOfFile()
    }

    /// Formats rows as left-aligned columns separated by two spaces (the last column unpadded).
    static func table(_ rows: [[String]]) -> String {
        guard let columns = rows.map(\.count).max(), columns > 0 else { return "" }
        var widths = [Int](repeating: 0, count: columns)
        for row in rows {
            for (index, cell) in row.enumerated() { widths[index] = max(widths[index], cell.count) }
        }
        return rows.map { row in
            row.enumerated().map { index, cell in
                index == row.count - 1 ? cell : cell.padding(toLength: widths[index], withPad: " ", startingAt: 0)
            }.joined(separator: "  ")
        }.joined(separator: "\n") + "\n"
    }
}
