import Foundation
import MAMProtection
import Synchronization

/// Writing to stdout and stderr. Everything goes through unbuffered write(2) calls so text
/// and binary output never interleave out of order.
///
/// A write to stdout that fails (a full disk, /dev/full, a closed descriptor, a reader that
/// went away) is remembered: `stdoutFailure` gives its errno, and `CommandLineTool.run` turns
/// a command that would otherwise succeed into EX_IOERR, so `mamfs protect-data > f && rm
/// original` never removes the original after a truncated `f`.
enum Output {
    /// The errno of the first failed write to stdout since `resetStdoutFailure`.
    private static let firstStdoutFailure = Mutex<Int32?>(nil)

    /// The errno of the first write to stdout that failed since the command started; nil when
    /// every write went through.
    static var stdoutFailure: Int32? { firstStdoutFailure.withLock { $0 } }

    /// Forgets an earlier stdout failure (the start of a command).
    static func resetStdoutFailure() {
        firstStdoutFailure.withLock { $0 = nil }
    }

    /// Writes `text` to stdout.
    static func out(_ text: String) {
        write(Data(text.utf8), to: STDOUT_FILENO)
    }

    /// Writes `text`, one line of human-readable text, and a newline to stdout. Its control
    /// and invisible format characters are written as escapes (`printable`): a file name, UPN
    /// or policy value in it cannot break the line or drive the terminal. Exact values are in
    /// the `--json` output.
    static func line(_ text: String = "") {
        out(printable(text) + "\n")
    }

    /// Writes raw bytes to stdout.
    static func bytes(_ data: Data) {
        write(data, to: STDOUT_FILENO)
    }

    /// Writes `text`, one line (an error, a note), and a newline to stderr, escaped as `line`
    /// escapes it.
    static func error(_ text: String) {
        write(Data((printable(text) + "\n").utf8), to: STDERR_FILENO)
    }

    /// Writes `text` (no newline added) to stderr.
    static func errorRaw(_ text: String) {
        write(Data(text.utf8), to: STDERR_FILENO)
    }

    /// Writes all of `data`, retrying short writes and EINTR. A failure ends the write; for
    /// stdout its errno is kept (`stdoutFailure`). A write to stderr that fails has nowhere to
    /// be reported.
    private static func write(_ data: Data, to fd: Int32) {
        data.withUnsafeBytes { (buffer: UnsafeRawBufferPointer) in
            guard var pointer = buffer.baseAddress else { return }
            var remaining = buffer.count
            while remaining > 0 {
                let written = Glibc.write(fd, pointer, remaining)
                if written < 0 {
                    if errno == EINTR { continue }
                    if fd == STDOUT_FILENO {
                        let code = errno
                        firstStdoutFailure.withLock { if $0 == nil { $0 = code } }
                    }
                    return
                }
                remaining -= written
                pointer += written
            }
        }
    }

    /// Reads stdin to its end, binary-safe, with read(2) (EINTR retried).
    /// - Throws: `CommandFailure` "stdin: REASON" with EX_IOERR (74) when stdin cannot be read
    ///   (a directory, a closed descriptor, an I/O error); nothing read is kept.
    static func readStandardInput() throws -> Data {
        var data = Data()
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(STDIN_FILENO, $0.baseAddress, $0.count) }
            if count == 0 { return data }
            if count < 0 {
                if errno == EINTR { continue }
                let reason = String(cString: strerror(errno))
                throw CommandFailure(subject: "stdin", message: "cannot read: \(reason)", exitCode: ExitCode.ioErr)
            }
            data.append(contentsOf: chunk[0..<count])
        }
    }

    /// `text` with its control and invisible format characters written as escapes
    /// (`InputQuote.escaped`). For text meant for a terminal; `--json` output keeps the exact text.
    static func printable(_ text: String) -> String {
        InputQuote.escaped(text)
    }

    /// Formats rows as left-aligned columns separated by two spaces (the last column unpadded),
    /// each cell `printable`: a file name or UPN cannot break a line or drive the terminal.
    static func table(_ rows: [[String]]) -> String {
        let rows = rows.map { $0.map(printable) }
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
