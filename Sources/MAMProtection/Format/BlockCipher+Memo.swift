import Glibc

/// The last partial block a write merged and sealed, kept with the cipher so that the next
/// write merging into the same block (the next append of `dd bs=512`, of a log) does not open
/// it again: when the stored bytes read back are exactly the ones this cipher sealed for that
/// index, under the same key and fileId, their plaintext is the one sealed (opening is a
/// function of those inputs), so the open is skipped and nothing else changes. Any other byte
/// on disk (another writer, a torn write, tampering) misses the memo and is opened and
/// authenticated as before.
///
/// Holds one block's plaintext in memory, as long as the cipher and the key it was made from;
/// wiped when replaced by a shorter one, when the fileId changes and when the cipher goes.
extension BlockCipher {
    /// Records block `index`, sealed just now from `plaintext` into `stored` (nonce ||
    /// ciphertext || tag), as the memo. Only a write that merged into an existing partial
    /// block records one, and the memo's buffers are made at the second such write into the
    /// same block (the first only notes the index): a file written in one call, or in a few
    /// calls that each merge another block (`tar x`), allocates none.
    func rememberSealed(index: Int64, plaintext: UnsafeRawBufferPointer, stored: UnsafeRawBufferPointer) {
        precondition(plaintext.count <= BlockLayout.plaintextBlockSize && stored.count <= BlockLayout.storedBlockSize)
        let memo: SealedBlockMemo
        if let kept = sealedMemo {
            memo = kept
        } else {
            guard mergedBlock == index else {
                mergedBlock = index
                return
            }
            memo = SealedBlockMemo()
            sealedMemo = memo
        }
        if memo.plainLength > plaintext.count {
            SecureWipe.bytes(memo.plain.baseAddress! + plaintext.count, count: memo.plainLength - plaintext.count)
        }
        memo.plain.baseAddress!.copyMemory(from: plaintext.baseAddress!, byteCount: plaintext.count)
        memo.stored.baseAddress!.copyMemory(from: stored.baseAddress!, byteCount: stored.count)
        memo.plainLength = plaintext.count
        memo.storedLength = stored.count
        memo.index = index
    }

    /// Copies the memo's plaintext into `target` when `stored` (block `index` as read from the
    /// backing file) is byte for byte the block the memo sealed; false (nothing copied) otherwise.
    func recallSealed(index: Int64, stored: UnsafeRawBufferPointer, into target: UnsafeMutableRawPointer) -> Bool {
        guard let memo = sealedMemo, memo.index == index, memo.storedLength == stored.count,
              memcmp(memo.stored.baseAddress!, stored.baseAddress!, stored.count) == 0 else { return false }
        target.copyMemory(from: memo.plain.baseAddress!, byteCount: memo.plainLength)
        return true
    }

    /// Drops the memo, its plaintext wiped (a new fileId, the cipher's end).
    func forgetSealed() {
        sealedMemo = nil
        mergedBlock = -1
    }
}

/// The buffers of `BlockCipher`'s memo: one block's stored bytes and its plaintext.
final class SealedBlockMemo {
    let stored = UnsafeMutableRawBufferPointer.allocate(byteCount: BlockLayout.storedBlockSize, alignment: 16)
    let plain = UnsafeMutableRawBufferPointer.allocate(byteCount: BlockLayout.plaintextBlockSize, alignment: 16)
    var index: Int64 = -1
    var storedLength = 0
    var plainLength = 0

    deinit {
        SecureWipe.bytes(plain.baseAddress, count: plainLength)
        plain.deallocate()
        stored.deallocate()
    }
}
