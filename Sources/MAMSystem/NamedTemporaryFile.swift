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
}
