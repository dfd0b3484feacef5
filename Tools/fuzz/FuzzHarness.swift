// libFuzzer target over the protected-file format: ProtectedFileHeader.decode and
// DataProtectionManager.unprotect. Compiled together with Sources/MAMProtection by
// Tools/fuzz/build.sh (swiftc -sanitize=fuzzer,address), so it needs no public API changes.
import Foundation

/// The state in $MAMFS_FUZZ_STATE (made by run.sh with `mamfs init` + `enroll`, so the
/// seed corpus made with `mamfs protect-data` unwraps and the fuzzer reaches block decryption).
final class FuzzState: @unchecked Sendable {
    static let shared = FuzzState()
    let context: ProtectionContext
    init() {
        guard let dir = ProcessInfo.processInfo.environment["MAMFS_FUZZ_STATE"] else {
            fatalError("set MAMFS_FUZZ_STATE to an initialized state directory (see Tools/fuzz/run.sh)")
        }
        context = try! ProtectionContext.open(stateDirectory: StateDirectory(path: dir), passphraseFile: nil)
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: start, count: count)
    if let header = try? ProtectedFileHeader.decode(bytes) {
        // A header that parses must re-encode to the bytes it was parsed from.
        let encoded = header.encoded()
        if encoded.count > bytes.count || !zip(encoded, bytes).allSatisfy({ $0 == $1 }) {
            fatalError("decode/encode round trip differs")
        }
    }
    let data = Data(bytes)
    if let plain = try? FuzzState.shared.context.data.unprotect(data) {
        // Only never-protected input or input protected by this state may come back.
        let header = try? data.withUnsafeBytes { try ProtectedFileHeader.decode($0) }
        if header == nil && plain != data { fatalError("untagged input changed") }
    }
    return 0
}
