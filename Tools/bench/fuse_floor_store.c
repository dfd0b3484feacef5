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
 * Single-threaded like the floor (one static buffer). Not a store to keep anything in: a WRITE
 * that fails part-way (a full disk) may leave the blocks it touched half-written, and a truncate
 * whose tag cannot be written leaves the backing file cut. Each directory holds a descriptor
 * (fuse_floor raises its open-file limit to the hard one).
 */
#define _GNU_SOURCE
#include "fuse_floor_store.h"

#include <errno.h>
#include <fcntl.h>
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

int floor_store_truncate(int dir, const char *name, off_t size) {
    int fd = floor_store_reopen(dir, name, 0);
    if (fd < 0) return fd;
    int rc = ftruncate(fd, stored_size(size)) == 0 ? 0 : -errno;
    /* A block cut in part gets its tag after its new end, over the bytes that were data there. */
    static const unsigned char tag[FLOOR_TAG];
    if (rc == 0 && size % FLOOR_BLOCK
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
    off_t to = stored_offset(last) + ((off_t)size + off - last * FLOOR_BLOCK) + FLOOR_TAG;
    if (to - from > (off_t)sizeof stored) return -EINVAL;
    ssize_t got = pread(fd, stored, (size_t)(to - from), from);
    if (got < 0) return -errno;
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

/* Reads the stored block `block` (the whole block and tag, or what the file has of it) into
   `into`; 0 or a negative errno. */
static int read_block(int fd, off_t block, unsigned char *into) {
    ssize_t got = pread(fd, into, STORED_BLOCK, stored_offset(block));
    return got < 0 ? -errno : 0;
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
        int rc = read_block(fd, first, stored);
        if (rc) return rc;
    }
    if (end % FLOOR_BLOCK && end < file_size && (last != first || off % FLOOR_BLOCK == 0)) {
        int rc = read_block(fd, last, last_block);
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
        off_t block_end = (block + 1) * FLOOR_BLOCK < new_size ? (block + 1) * FLOOR_BLOCK : new_size;
        memset(at + (block_end - block * FLOOR_BLOCK), 0, FLOOR_TAG);
    }
    off_t from = stored_offset(first), to = stored_offset(last) + (new_size < (last + 1) * FLOOR_BLOCK
        ? new_size - last * FLOOR_BLOCK : FLOOR_BLOCK) + FLOOR_TAG;
    ssize_t put = pwrite(fd, stored, (size_t)(to - from), from);
    if (put < 0) return -errno;
    return put == to - from ? (ssize_t)size : -EIO;
}
