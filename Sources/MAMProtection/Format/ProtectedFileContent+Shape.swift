extension ProtectedFileContent {
    /// What the stored layout of a file takes from its header, as plain values (no owner
    /// string, no arrays): the body's offset, the kind of body and its size limit.
    public struct Shape: Equatable, Sendable {
        /// The header's length in bytes; nil for an untagged file.
        public let headerLength: Int64?
        /// The body is encrypted blocks (docs/FORMAT.md).
        public let isEncrypted: Bool
        /// The header has the sparse flag: all-zero stored blocks are holes.
        public let isSparse: Bool
        /// Byte offset of the body in the backing file (0 when untagged).
        public var dataOffset: Int64 { headerLength ?? 0 }
        /// `ProtectedFileContent.maximumPlaintextSize(header:)`, in plaintext bytes.
        public let maximumPlaintextSize: Int64

        /// The shape of a file with `header` (nil: untagged).
        public init(_ header: ProtectedFileHeader?) {
            if let header {
                headerLength = Int64(header.length)
                isEncrypted = header.isEncrypted
                isSparse = header.isSparse
            } else {
                (headerLength, isEncrypted, isSparse) = (nil, false, false)
            }
            maximumPlaintextSize = ProtectedFileContent.maximumPlaintextSize(headerLength: headerLength, isEncrypted: isEncrypted)
        }

        /// Whether the file has a header (is tagged).
        public var isTagged: Bool { headerLength != nil }
    }
}
