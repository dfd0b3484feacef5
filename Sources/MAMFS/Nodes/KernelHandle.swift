/// An object the kernel holds by a 64-bit handle (fuse_file_info.fh): a retained reference,
/// borrowed by each request on it and released by release/releasedir.
protocol KernelHandle: AnyObject {}

extension KernelHandle {
    /// The value to store in fuse_file_info.fh (one retain, given back by `release`).
    func retainedHandle() -> UInt64 {
        UInt64(UInt(bitPattern: Unmanaged.passRetained(self).toOpaque()))
    }

    /// The object of `fh` without taking the kernel's reference; nil for 0.
    static func borrow(_ fh: UInt64) -> Self? {
        guard let pointer = UnsafeRawPointer(bitPattern: UInt(fh)) else { return nil }
        return Unmanaged<Self>.fromOpaque(pointer).takeUnretainedValue()
    }

    /// The object of `fh`, taking back the kernel's reference; nil for 0.
    static func release(_ fh: UInt64) -> Self? {
        guard let pointer = UnsafeRawPointer(bitPattern: UInt(fh)) else { return nil }
        return Unmanaged<Self>.fromOpaque(pointer).takeRetainedValue()
    }
}
