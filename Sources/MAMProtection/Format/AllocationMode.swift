import MAMSystem

/// What an fallocate(2) call asks of a plaintext range: the Linux modes mamfs supports.
///
/// FALLOC_FL_COLLAPSE_RANGE, FALLOC_FL_INSERT_RANGE and FALLOC_FL_UNSHARE_RANGE are not
/// supported (an encrypted block is bound to its index, so shifting the body means
/// re-encrypting everything after the range); callers answer EOPNOTSUPP for them.
public enum AllocationMode: Equatable, Sendable {
    /// Mode 0 (the file grows when the range ends past it) or FALLOC_FL_KEEP_SIZE (space
    /// reserved, the size unchanged): a later write into the range cannot fail with ENOSPC.
    case allocate(keepSize: Bool)
    /// FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE: the range reads as zeros and its space is
    /// given back; the size is unchanged.
    case punchHole
    /// FALLOC_FL_ZERO_RANGE, with or without FALLOC_FL_KEEP_SIZE: the range reads as zeros and
    /// stays allocated; without KEEP_SIZE the file grows when the range ends past it.
    case zeroRange(keepSize: Bool)

    /// The mode of fallocate(2) `flags`; nil for a mode mamfs does not support (see the type).
    public init?(flags: Int32) {
        let keep = SystemConstants.fallocateKeepSize
        switch flags {
        case 0: self = .allocate(keepSize: false)
        case keep: self = .allocate(keepSize: true)
        case SystemConstants.fallocatePunchHole | keep: self = .punchHole
        case SystemConstants.fallocateZeroRange: self = .zeroRange(keepSize: false)
        case SystemConstants.fallocateZeroRange | keep: self = .zeroRange(keepSize: true)
        default: return nil
        }
    }

    /// The fallocate(2) flags of this mode.
    public var flags: Int32 {
        let keep = SystemConstants.fallocateKeepSize
        switch self {
        case .allocate(let keepSize): return keepSize ? keep : 0
        case .punchHole: return SystemConstants.fallocatePunchHole | keep
        case .zeroRange(let keepSize): return SystemConstants.fallocateZeroRange | (keepSize ? keep : 0)
        }
    }

    /// Whether the file keeps its size whatever the range.
    public var keepsSize: Bool {
        switch self {
        case .allocate(let keepSize), .zeroRange(let keepSize): return keepSize
        case .punchHole: return true
        }
    }
}
