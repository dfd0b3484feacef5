/* fuse_floor_store: the bytes an encrypting overlay must move to and from its backing disk, and
 * nothing else (fuse_floor -o backing=DIR).
 *
 * DIR mirrors the floor's tree: each directory of the floor is a backing directory (0700), each
 * regular file a backing file (0600) of the same name in it, made, renamed and removed there as
 * the floor's entries are (descriptor-relative, by the directory's O_PATH descriptor, as an
 * overlay reaches its backing tree). DIR must start empty. A backing file has the shape of a file
 * sealed in blocks: a header of FLOOR_HEADER bytes written at its creation, then for every
 * FLOOR_BLOCK bytes of data the block and a FLOOR_TAG-byte tag (zeros: no cipher runs). A WRITE
 * writes every block it touches, whole up to the file's end, each with its tag, and first reads a
 * block it changes only in part, as a block cipher with a tag per block needs; a READ reads the
 * blocks it covers and answers their data. No check, no cipher, no modes, owners, times or
 * extended attributes kept on the disk: what a workload costs on this store beyond the floor
 * without one is the disk's part of an encrypting overlay's work, the part no such filesystem
 * avoids.
 *
 * With floor_store_use_cipher (fuse_floor -o cipher) each block is also sealed as one AES-256-GCM
 * message (OpenSSL, through mamfs's own route to it, Sources/CCipher: one context with the key
 * set once, a 12-byte nonce from the block's index, 24 bytes of AAD as a file id and the index,
 * the tag after the data) and opened again when it is read, a tag that does not verify
 * failing the READ or WRITE with EIO: the cipher's part on top of the disk's, what no encrypting
 * overlay that seals 4 KiB blocks with OpenSSL avoids. The key is random and lives as long as the
 * process, and a block written again is sealed under the same nonce: a measure, not a cipher to
 * keep anything under. A block whose tag is all zeros and whose data is zeros is a hole (a
 * truncate's extension) and reads as zeros.
 *
 * Single-threaded like the floor (one static buffer). Not a store to keep anything in: a WRITE
 * that fails part-way (a full disk) may leave the blocks it touched half-written, and a truncate
 * whose tag cannot be written leaves the backing file cut. Each directory holds a descriptor
 * (fuse_floor raises its open-file limit to the hard one).
 */
#define _GNU_SOURCE
#include "fuse_floor_store.h"
#include "CCipher.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { STORED_BLOCK = FLOOR_BLOCK + FLOOR_TAG };

static int directory = -1;
/* The stored bytes of one largest WRITE (1 MiB) and the blocks at its two ends. */
static unsigned char stored[((1 << 20) / FLOOR_BLOCK + 2) * STORED_BLOCK];

int floor_store_open(const char *path) {
    directory = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    return directory;
}

int floor_store_enabled(void) { return directory >= 0; }

static mamfs_gcm *sealer; /* the key set once; each block gives its nonce and AAD */

int floor_store_use_cipher(void) {
    unsigned char key[32];
    if (RAND_bytes(key, sizeof key) != 1) return -1;
    sealer = mamfs_gcm_new(key);
    OPENSSL_cleanse(key, sizeof key);
    return sealer ? 0 : -1;
}

/* The nonce of plaintext block `block` (its index, then zeros) and its AAD (a file id of zeros,
   then the index: the format's 24 bytes). */
static void block_nonce(off_t block, unsigned char nonce[12], unsigned char aad[24]) {
    memset(nonce, 0, 12);
    memcpy(nonce, &block, sizeof block);
    memset(aad, 0, 24);
    memcpy(aad + 16, &block, sizeof block);
}

/* Seals the `len` data bytes at `at` in place, the tag after them; 0 or -EIO. Without a cipher,
   a zero tag. */
static int seal(off_t block, unsigned char *at, size_t len) {
    if (!sealer) { memset(at + len, 0, FLOOR_TAG); return 0; }
    unsigned char nonce[12], aad[24];
    block_nonce(block, nonce, aad);
    return mamfs_gcm_seal(sealer, nonce, aad, sizeof aad, at, len, at, at + len) == 1 ? 0 : -EIO;
}

/* Opens the `len` sealed bytes at `at` (the tag after them) in place; 0, or -EIO when the tag does
   not verify. A hole (zero tag, zero data) stays zeros. No-op without a cipher. */
static int open_block(off_t block, unsigned char *at, size_t len) {
    if (!sealer) return 0;
    static const unsigned char zeros[FLOOR_BLOCK + FLOOR_TAG];
    if (memcmp(at + len, zeros, FLOOR_TAG) == 0 && memcmp(at, zeros, len) == 0) return 0;
    unsigned char nonce[12], aad[24];
    block_nonce(block, nonce, aad);
    return mamfs_gcm_open(sealer, nonce, aad, sizeof aad, at, len, at, at + len) == 1 ? 0 : -EIO;
}

/* The data bytes of block `block` in a file of `size` bytes (0 past its end). */
static size_t block_length(off_t block, off_t size) {
    off_t rest = size - block * FLOOR_BLOCK;
    return rest <= 0 ? 0 : rest < FLOOR_BLOCK ? (size_t)rest : FLOOR_BLOCK;
}

/* Where plaintext block `block` starts in the backing file. */
static off_t stored_offset(off_t block) { return FLOOR_HEADER + block * STORED_BLOCK; }

/* The backing file's size for `size` bytes of data: whole blocks, then the last one's data and tag. */
static off_t stored_size(off_t size) {
    off_t rest = size % FLOOR_BLOCK;
    return stored_offset(size / FLOOR_BLOCK) + (rest ? rest + FLOOR_TAG : 0);
}

int floor_store_create(int dir, const char *name, int keep_open) {
    int fd = openat(dir, name, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return -errno;
    static const unsigned char header[FLOOR_HEADER];
    if (pwrite(fd, header, sizeof header, 0) != (ssize_t)sizeof header) {
        int error = errno ? errno : EIO;
        close(fd);
        unlinkat(dir, name, 0);
        return -error;
    }
    if (keep_open) return fd;
    close(fd);
    return 0;
}

int floor_store_mkdir(int dir, const char *name) {
    if (mkdirat(dir, name, 0700) != 0) return -errno;
    int fd = openat(dir, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        int error = errno;
        unlinkat(dir, name, AT_REMOVEDIR);
        return -error;
    }
    return fd;
}

int floor_store_reopen(int dir, const char *name, int truncate) {
    int fd = openat(dir, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -errno;
    if (truncate && ftruncate(fd, FLOOR_HEADER) != 0) {
        int error = errno;
        close(fd);
        return -error;
    }
    return fd;
}

/* Block `block` of a file going from `old_size` to `size` bytes of data: read and opened at its
   old length (zeros past it), for reseal to seal at its new one. */
static unsigned char resealed[STORED_BLOCK];

static int reseal_read(int fd, off_t block, off_t old_size) {
    size_t len = block_length(block, old_size);
    memset(resealed, 0, sizeof resealed);
    if (len == 0) return 0;
    ssize_t got = pread(fd, resealed, len + FLOOR_TAG, stored_offset(block));
    if (got < 0) return -errno;
    if ((size_t)got < len + FLOOR_TAG) return -EIO;
    int rc = open_block(block, resealed, len);
    memset(resealed + len, 0, FLOOR_TAG);
    return rc;
}

static int reseal_write(int fd, off_t block, off_t size) {
    size_t len = block_length(block, size);
    int rc = seal(block, resealed, len);
    if (rc) return rc;
    ssize_t put = pwrite(fd, resealed, len + FLOOR_TAG, stored_offset(block));
    return put < 0 ? -errno : (size_t)put == len + FLOOR_TAG ? 0 : -EIO;
}

int floor_store_truncate(int dir, const char *name, off_t size, off_t old_size) {
    int fd = floor_store_reopen(dir, name, 0);
    if (fd < 0) return fd;
    /* With a cipher, the block that gets a new end (the one cut in part, or the old last one
       extended) is sealed again at its new length, its tag after its new end. */
    off_t block = size < old_size ? size / FLOOR_BLOCK : old_size / FLOOR_BLOCK;
    int changed = sealer && (size < old_size ? size % FLOOR_BLOCK != 0 : size > old_size && old_size % FLOOR_BLOCK != 0);
    int rc = changed ? reseal_read(fd, block, old_size) : 0;
    if (rc == 0 && ftruncate(fd, stored_size(size)) != 0) rc = -errno;
    if (rc == 0 && changed) rc = reseal_write(fd, block, size);
    /* Without a cipher a block cut in part gets a zero tag after its new end. */
    static const unsigned char tag[FLOOR_TAG];
    if (rc == 0 && !sealer && size % FLOOR_BLOCK
        && pwrite(fd, tag, sizeof tag, stored_size(size) - FLOOR_TAG) != (ssize_t)sizeof tag)
        rc = errno ? -errno : -EIO;
    close(fd);
    return rc;
}

int floor_store_remove(int dir, const char *name, int is_directory) {
    return unlinkat(dir, name, is_directory ? AT_REMOVEDIR : 0) == 0 ? 0 : -errno;
}

int floor_store_rename(int from, const char *name, int to, const char *newname) {
    return renameat(from, name, to, newname) == 0 ? 0 : -errno;
}

ssize_t floor_store_read(int fd, char *out, size_t size, off_t off, off_t file_size) {
    if (off >= file_size || size == 0) return 0;
    if ((off_t)size > file_size - off) size = (size_t)(file_size - off);
    off_t first = off / FLOOR_BLOCK, last = (off + (off_t)size - 1) / FLOOR_BLOCK;
    off_t from = stored_offset(first);
    /* Whole blocks with a cipher (a tag covers its block), else up to the last byte asked for. */
    off_t to = stored_offset(last) + (sealer ? (off_t)block_length(last, file_size)
                                             : (off_t)size + off - last * FLOOR_BLOCK) + FLOOR_TAG;
    if (to - from > (off_t)sizeof stored) return -EINVAL;
    ssize_t got = pread(fd, stored, (size_t)(to - from), from);
    if (got < 0) return -errno;
    for (off_t block = first; sealer && block <= last; block++) {
        off_t at = (block - first) * STORED_BLOCK;
        size_t len = block_length(block, file_size);
        if (at + (off_t)len + FLOOR_TAG > got) { got = at; break; } /* a torn block ends the data */
        if (open_block(block, stored + at, len)) return -EIO;
    }
    /* The data of each block, without its tag; a short read ends the data where the disk's does. */
    size_t copied = 0;
    for (off_t block = first; block <= last && copied < size; block++) {
        off_t at = (block - first) * STORED_BLOCK;
        off_t skip = block == first ? off % FLOOR_BLOCK : 0;
        if (at + skip >= got) break;
        size_t n = FLOOR_BLOCK - (size_t)skip;
        if (n > size - copied) n = size - copied;
        if ((off_t)n > got - at - skip) n = (size_t)(got - at - skip);
        memcpy(out + copied, stored + at + skip, n);
        copied += n;
    }
    return (ssize_t)copied;
}

/* Reads the stored block `block` of a file of `file_size` bytes (the whole block and tag, or what
   the file has of it) into `into` and opens it (its tag cleared: the block is sealed again); 0 or a
   negative errno. */
static int read_block(int fd, off_t block, unsigned char *into, off_t file_size) {
    ssize_t got = pread(fd, into, STORED_BLOCK, stored_offset(block));
    if (got < 0) return -errno;
    size_t len = block_length(block, file_size);
    if (!sealer) return 0;
    if ((size_t)got < len + FLOOR_TAG) return -EIO;
    int rc = open_block(block, into, len);
    memset(into + len, 0, FLOOR_TAG);
    return rc;
}

ssize_t floor_store_write(int fd, const char *data, size_t size, off_t off, off_t file_size) {
    if (size == 0) return 0;
    off_t end = off + (off_t)size, new_size = end > file_size ? end : file_size;
    off_t first = off / FLOOR_BLOCK, last = (end - 1) / FLOOR_BLOCK;
    if ((last - first + 1) * STORED_BLOCK > (off_t)sizeof stored) return -EINVAL;
    unsigned char *last_block = stored + (last - first) * STORED_BLOCK;
    memset(stored, 0, STORED_BLOCK);
    memset(last_block, 0, STORED_BLOCK);
    /* A block changed in part keeps its other bytes: read it first. */
    if (off % FLOOR_BLOCK && first * FLOOR_BLOCK < file_size) {
        int rc = read_block(fd, first, stored, file_size);
        if (rc) return rc;
    }
    if (end % FLOOR_BLOCK && end < file_size && (last != first || off % FLOOR_BLOCK == 0)) {
        int rc = read_block(fd, last, last_block, file_size);
        if (rc) return rc;
    }
    /* A write that starts past a partial last block leaves that block whole (zeros after its
       data): with a cipher it is sealed again at its full length first. */
    off_t old_last = file_size / FLOOR_BLOCK;
    if (sealer && file_size % FLOOR_BLOCK && first > old_last) {
        int rc = reseal_read(fd, old_last, file_size);
        if (rc == 0) rc = reseal_write(fd, old_last, new_size);
        if (rc) return rc;
    }
    size_t taken = 0;
    for (off_t block = first; block <= last; block++) {
        unsigned char *at = stored + (block - first) * STORED_BLOCK;
        size_t skip = block == first ? (size_t)(off % FLOOR_BLOCK) : 0;
        size_t n = FLOOR_BLOCK - skip;
        if (n > size - taken) n = size - taken;
        memcpy(at + skip, data + taken, n);
        taken += n;
        if (seal(block, at, block_length(block, new_size))) return -EIO;
    }
    off_t from = stored_offset(first), to = stored_offset(last) + (new_size < (last + 1) * FLOOR_BLOCK
        ? new_size - last * FLOOR_BLOCK : FLOOR_BLOCK) + FLOOR_TAG;
    ssize_t put = pwrite(fd, stored, (size_t)(to - from), from);
    if (put < 0) return -errno;
    return put == to - from ? (ssize_t)size : -EIO;
}
