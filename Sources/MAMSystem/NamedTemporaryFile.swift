/// A named temp file just created by `TemporaryFile.createNamed`: its open descriptor and path.
public struct NamedTemporaryFile: ~Copyable {
    /// The file, open read-write.
    public var descriptor: FileDescriptor
    /// The path mkostemp made.
    public let path: String

    public init(descriptor: consuming FileDescriptor, path: String) {
        self.descriptor = descriptor
        self.path = path
    }

    /// Gives up ownership of the descriptor (see `FileDescriptor.take`).
    public consuming func take() -> Int32 { descriptor.take() }
}
