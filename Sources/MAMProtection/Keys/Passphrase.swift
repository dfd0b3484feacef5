/// A passphrase read from a file for a moment, for a component that hands it on (`mamfs unlock`
/// to a mount daemon) rather than deriving the master key itself.
public enum Passphrase {
    /// Calls `body` with the passphrase in `path` (one trailing newline dropped), held in
    /// memory that is wiped when `body` returns.
    /// - Throws: `.fileNotFound` when the file cannot be read, `.invalidArguments` when it is
    ///   empty or longer than 64 KiB; what `body` throws.
    public static func withBytes<R>(ofFile path: String, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        let secret = try MasterKey.readPassphrase(path)
        return try body(UnsafeRawBufferPointer(secret.bytes))
    }
}
