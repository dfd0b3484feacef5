import Foundation
import MAMSystem

/// The owner-identity header at the start of every tagged file (docs/FORMAT.md, version 1).
///
/// Layout (integers little-endian):
/// ```
/// 0      8  magic 89 4D 41 4D 46 53 0D 0A
/// 8      1  format version (1)
/// 9      1  flags: bit 0 = encrypted, bit 1 = sparse (encrypted only); other bits must be 0
/// 10     2  header length H (body starts at byte H)
/// 12     1  owner length L (0...255)
/// 13     L  owner accountId, UTF-8, canonical lowercase ("" = unmanaged)
/// -- encrypted files only --
/// 13+L   4  account key id
/// 17+L  16  file id (random)
/// 33+L  12  wrap nonce
/// 45+L  32  file key, encrypted under the account key (AES-256-GCM, AAD = bytes 0..<33+L)
/// 77+L  16  wrap tag
/// ```
/// H = 13+L for plain files and 93+L for encrypted files.
public struct ProtectedFileHeader: Equatable, Sendable {
    /// The 8-byte magic.
    public static let magic: [UInt8] = [0x89, 0x4D, 0x41, 0x4D, 0x46, 0x53, 0x0D, 0x0A]
    /// The only format version this code writes and reads.
    public static let currentVersion: UInt8 = 1
    /// Longest possible header (encrypted, 255-byte owner).
    public static let maximumLength = 93 + 255
    static let encryptedFlag: UInt8 = 0x01
    /// Flag bit 1: an all-zero stored block of the body is a hole (encrypted files only).
    static let sparseFlag: UInt8 = 0x02
    /// Length of the file id in bytes.
    public static let fileIdSize = 16

    /// Canonical accountId of the owner; "" for an unmanaged-tagged file.
    public let owner: String
    /// Key material, present exactly when the body is encrypted.
    public let encryption: Encryption?

    /// The encrypted-file part of the header.
    public struct Encryption: Equatable, Sendable {
        /// Which of the owner's account keys wraps the file key.
        public let keyId: UInt32
        /// 16 random bytes naming this file in every block's AAD.
        public let fileId: [UInt8]
        /// nonce (12) || wrapped file key (32) || tag (16).
        public let wrappedFileKey: [UInt8]
        /// Flag bit 1: a stored block of only zero bytes is a hole, that many zero plaintext
        /// bytes (docs/FORMAT.md, "Holes"); without it such a block fails authentication.
        public let isSparse: Bool
    }

    /// True when the body is encrypted.
    public var isEncrypted: Bool { encryption != nil }

    /// True when the body may hold holes (an encrypted header with the sparse flag).
    public var isSparse: Bool { encryption?.isSparse ?? false }

    /// Length of the encoded header in bytes: where the body starts in the backing file.
    /// Counted, not encoded: asked whenever a content view is made (`ProtectedFileContent.Shape`).
    public var length: Int { ProtectedFileHeader.encodedLength(ownerBytes: owner.utf8.count, encrypted: isEncrypted) }

    /// The length of a header whose owner takes `ownerBytes` UTF-8 bytes: 13 fixed bytes, the
    /// owner, and 80 for the key id, file id and wrapped file key of an encrypted body.
    static func encodedLength(ownerBytes: Int, encrypted: Bool) -> Int { 13 + ownerBytes + (encrypted ? 80 : 0) }

    private var ownerBytes: [UInt8] { Array(owner.utf8) }

    /// A plain (unencrypted) header naming `owner`.
    /// - Throws: `MAMError.invalidArguments` for an owner longer than 255 bytes.
    public init(plainOwner owner: String) throws {
        self.owner = AccountIdentity.canonical(owner)
        self.encryption = nil
        guard self.ownerBytes.count <= 255 else { throw MAMError.invalidArguments("owner longer than 255 bytes") }
    }

    /// A new encrypted header: a fresh file key and file id, the file key wrapped under `accountKey`.
    /// - Returns: the header and the (unwrapped) file key for writing the body.
    public static func makeEncrypted(owner: String, keyId: UInt32, accountKey: SymmetricKey) throws -> (ProtectedFileHeader, SymmetricKey) {
        let fileKey = try SymmetricKey.random()
        let header = try ProtectedFileHeader(owner: owner, keyId: keyId, fileId: try PublicRandom.bytes(fileIdSize),
                                             fileKey: fileKey, accountKey: accountKey)
        return (header, fileKey)
    }

    /// An encrypted header for a known file key and file id (used for rewrapping and test vectors).
    /// `sparse` sets flag bit 1 (the body may hold holes); the flag is covered by the wrap's AAD.
    public init(owner: String, keyId: UInt32, fileId: [UInt8], fileKey: SymmetricKey, accountKey: SymmetricKey,
                wrapNonce: [UInt8]? = nil, sparse: Bool = false) throws {
        guard fileId.count == ProtectedFileHeader.fileIdSize else { throw MAMError.invalidArguments("file id must be 16 bytes") }
        let canonicalOwner = AccountIdentity.canonical(owner)
        guard !canonicalOwner.isEmpty, canonicalOwner.utf8.count <= 255 else {
            throw MAMError.invalidArguments("an encrypted file needs an owner of 1...255 bytes")
        }
        let aad = ProtectedFileHeader.authenticatedPrefix(owner: canonicalOwner, keyId: keyId, fileId: fileId, sparse: sparse)
        let nonce = try wrapNonce ?? PublicRandom.bytes(AESGCM.nonceSize)
        guard nonce.count == AESGCM.nonceSize else { throw MAMError.invalidArguments("wrap nonce must be 12 bytes") }
        var wrapped = [UInt8](repeating: 0, count: AESGCM.nonceSize + 32 + AESGCM.tagSize)
        try wrapped.withUnsafeMutableBytes { out in
            out.copyBytes(from: nonce)
            try nonce.withUnsafeBytes { n in
                try aad.withUnsafeBytes { a in
                    // The file key is read in place: no copy of it is made.
                    try fileKey.withUnsafeBytes { k in
                        try accountKey.withCipher { cipher in
                            try cipher.seal(nonce: n, aad: a, plaintext: k, ciphertext: out.baseAddress! + 12, tag: out.baseAddress! + 44)
                        }
                    }
                }
            }
        }
        self.owner = canonicalOwner
        self.encryption = Encryption(keyId: keyId, fileId: fileId, wrappedFileKey: wrapped, isSparse: sparse)
    }

    private init(owner: String, encryption: Encryption?) {
        self.owner = owner
        self.encryption = encryption
    }

    /// Bytes 0..<33+L of an encrypted header: the AAD of the file-key wrap.
    static func authenticatedPrefix(owner: String, keyId: UInt32, fileId: [UInt8], sparse: Bool) -> [UInt8] {
        let ownerBytes = Array(owner.utf8)
        var bytes = magic
        bytes.append(currentVersion)
        bytes.append(encryptedFlag | (sparse ? sparseFlag : 0))
        let length = UInt16(encodedLength(ownerBytes: ownerBytes.count, encrypted: true))
        bytes.append(UInt8(length & 0xff)); bytes.append(UInt8(length >> 8))
        bytes.append(UInt8(ownerBytes.count))
        bytes += ownerBytes
        withUnsafeBytes(of: keyId.littleEndian) { bytes += $0 }
        bytes += fileId
        return bytes
    }

    /// The encoded header bytes (exactly `length` bytes).
    public func encoded() -> [UInt8] {
        if let encryption {
            return ProtectedFileHeader.authenticatedPrefix(owner: owner, keyId: encryption.keyId, fileId: encryption.fileId,
                                                           sparse: encryption.isSparse) + encryption.wrappedFileKey
        }
        var bytes = ProtectedFileHeader.magic
        bytes.append(ProtectedFileHeader.currentVersion)
        bytes.append(0)
        let length = UInt16(length)
        bytes.append(UInt8(length & 0xff)); bytes.append(UInt8(length >> 8))
        bytes.append(UInt8(ownerBytes.count))
        bytes += ownerBytes
        return bytes
    }

    /// Unwraps the file key with the owner's account key.
    /// - Throws: `MAMError.authenticationFailed` when the header was altered or the account key
    ///   is not the one that wrapped it; `MAMError.invalidArguments` for a plain header.
    public func unwrapFileKey(accountKey: SymmetricKey) throws -> SymmetricKey {
        guard let encryption else { throw MAMError.invalidArguments("the file is not encrypted") }
        let aad = ProtectedFileHeader.authenticatedPrefix(owner: owner, keyId: encryption.keyId, fileId: encryption.fileId,
                                                          sparse: encryption.isSparse)
        guard let secret = try accountKey.withCipher({ try $0.openSecret(encryption.wrappedFileKey, aad: aad) }),
              secret.count == SymmetricKey.byteCount else {
            throw MAMError.authenticationFailed("header of a file owned by \(owner) does not authenticate")
        }
        return try SymmetricKey(adopting: secret)
    }

    /// Whether `prefix` starts with the magic (the file is tagged). Needs 8 bytes.
    public static func hasMagic(_ prefix: UnsafeRawBufferPointer) -> Bool {
        prefix.count >= magic.count && zip(prefix.prefix(magic.count), magic).allSatisfy { $0 == $1 }
    }

    /// Parses a header from the first bytes of a file.
    /// - Parameter prefix: the file's first bytes; pass at least `maximumLength` bytes or the whole file.
    /// - Returns: nil when the file does not start with the magic (untagged).
    /// - Throws: `MAMError.authenticationFailed` when the magic is present but any field is
    ///   malformed, truncated, of an unknown version or has unknown flags.
    public static func decode(_ prefix: UnsafeRawBufferPointer) throws -> ProtectedFileHeader? {
        guard hasMagic(prefix) else { return nil }
        func fail(_ why: String) -> MAMError { .authenticationFailed("malformed header: \(why)") }
        guard prefix.count >= 13 else { throw fail("truncated") }
        guard prefix[8] == currentVersion else { throw fail("unknown format version \(prefix[8])") }
        let flags = prefix[9]
        guard flags & ~(encryptedFlag | sparseFlag) == 0 else { throw fail("unknown flags 0x\(String(flags, radix: 16))") }
        let declaredLength = Int(prefix[10]) | Int(prefix[11]) << 8
        let ownerLength = Int(prefix[12])
        let encrypted = flags & encryptedFlag != 0
        guard encrypted || flags & sparseFlag == 0 else { throw fail("sparse flag on a plain header") }
        let expected = encodedLength(ownerBytes: ownerLength, encrypted: encrypted)
        guard declaredLength == expected else { throw fail("header length \(declaredLength), expected \(expected)") }
        guard prefix.count >= expected else { throw fail("truncated") }
        guard let owner = String(validating: prefix[13..<(13 + ownerLength)], as: UTF8.self),
              owner == AccountIdentity.canonical(owner) else {
            throw fail("owner is not canonical UTF-8")
        }
        guard encrypted else { return ProtectedFileHeader(owner: owner, encryption: nil) }
        guard !owner.isEmpty else { throw fail("encrypted file without owner") }
        let base = 13 + ownerLength
        let keyId = UInt32(prefix[base]) | UInt32(prefix[base + 1]) << 8 | UInt32(prefix[base + 2]) << 16 | UInt32(prefix[base + 3]) << 24
        let fileId = Array(prefix[(base + 4)..<(base + 20)])
        let wrapped = Array(prefix[(base + 20)..<(base + 80)])
        return ProtectedFileHeader(owner: owner, encryption: Encryption(keyId: keyId, fileId: fileId, wrappedFileKey: wrapped,
                                                                        isSparse: flags & sparseFlag != 0))
    }

    /// Reads and parses the header of an open file (pread at offset 0).
    /// - Returns: nil for an untagged file (including files shorter than the magic).
    /// - Throws: `MAMError.authenticationFailed` for a malformed header; `.system` on I/O errors.
    public static func read(fd: Int32) throws -> ProtectedFileHeader? {
        var buffer = [UInt8](repeating: 0, count: maximumLength)
        let filled: Int
        do {
            filled = try buffer.withUnsafeMutableBytes { bytes in try SystemCall.pread(fd: fd, into: bytes, at: 0) }
        } catch let error as Errno {
            throw MAMError.system("reading header", errno: error.rawValue)
        }
        return try buffer.withUnsafeBytes { try decode(UnsafeRawBufferPointer(rebasing: $0[0..<filled])) }
    }

    /// Returns a copy with the file key rewrapped for another owner / account key, keeping the
    /// file id, the file key and the sparse flag (re-owning between managed accounts does not
    /// rewrite the body).
    public func rewrapped(owner newOwner: String, keyId: UInt32, oldAccountKey: SymmetricKey, newAccountKey: SymmetricKey) throws -> ProtectedFileHeader {
        guard let encryption else { throw MAMError.invalidArguments("the file is not encrypted") }
        let fileKey = try unwrapFileKey(accountKey: oldAccountKey)
        return try ProtectedFileHeader(owner: newOwner, keyId: keyId, fileId: encryption.fileId, fileKey: fileKey,
                                       accountKey: newAccountKey, sparse: encryption.isSparse)
    }

    /// Returns a copy with the sparse flag set: the same owner, key id, file id and file key,
    /// wrapped again under the same account key with a fresh wrap nonce (the flag is in the
    /// wrap's AAD, so only a holder of the account key can set it). Same length as `self`.
    /// - Throws: `MAMError.invalidArguments` for a plain header; `.authenticationFailed` when
    ///   `accountKey` does not unwrap this header.
    public func markedSparse(accountKey: SymmetricKey) throws -> ProtectedFileHeader {
        guard let encryption else { throw MAMError.invalidArguments("the file is not encrypted") }
        if encryption.isSparse { return self }
        let fileKey = try unwrapFileKey(accountKey: accountKey)
        return try ProtectedFileHeader(owner: owner, keyId: encryption.keyId, fileId: encryption.fileId, fileKey: fileKey,
                                       accountKey: accountKey, sparse: true)
    }
}
