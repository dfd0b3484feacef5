/* fuse_floor_store: the backing files of fuse_floor -o backing=DIR (fuse_floor_store.c). */
#ifndef FUSE_FLOOR_STORE_H
#define FUSE_FLOOR_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum {
    FLOOR_HEADER = 64, /* bytes before the first block, written at a file's creation */
    FLOOR_BLOCK = 4096, /* bytes of data a block */
    FLOOR_TAG = 16     /* bytes after each block's data */
};

/* Opens DIR as the store (a directory): the backing directory of the floor's root; its
   descriptor, or -1 with errno set. */
int floor_store_open(const char *path);
/* Whether a store was opened. */
int floor_store_enabled(void);
/* Seals every block of the store's files with AES-256-GCM under a random key from here on (see
   fuse_floor_store.c); 0, or -1 when OpenSSL could not set it up. Before any file is made. */
int floor_store_use_cipher(void);
/* Each call below names an entry by the descriptor of its directory's backing directory (the
   store's, or one floor_store_mkdir gave) and its name, as the floor names it. */
/* Makes (or empties) the backing file `name` in `dir` with its header; its descriptor if
   `keep_open`, else 0; a negative errno on failure (nothing left behind). */
int floor_store_create(int dir, const char *name, int keep_open);
/* Makes the backing directory `name` in `dir` (mode 0700, as backing files are 0600: the floor
   checks no permission); an O_PATH descriptor of it, or a negative errno (nothing left behind). */
int floor_store_mkdir(int dir, const char *name);
/* Opens the backing file `name` in `dir` for reading and writing, emptied to its header if
   `truncate`; its descriptor or a negative errno. */
int floor_store_reopen(int dir, const char *name, int truncate);
/* Cuts or extends the backing file `name` in `dir` from `old_size` to hold `size` bytes of data; 0
   or a negative errno. */
int floor_store_truncate(int dir, const char *name, off_t size, off_t old_size);
/* Removes the backing file or (`directory`) empty backing directory `name` in `dir` (open
   descriptors keep a file); 0 or a negative errno. */
int floor_store_remove(int dir, const char *name, int directory);
/* Renames `name` in `from` to `newname` in `to`, replacing what is there; 0 or a negative errno. */
int floor_store_rename(int from, const char *name, int to, const char *newname);
/* Reads up to `size` bytes of data at `off` of a file of `file_size` bytes into `out`; the
   bytes read (0 at or past the end) or a negative errno. At most 1 MiB. */
ssize_t floor_store_read(int fd, char *out, size_t size, off_t off, off_t file_size);
/* Writes `size` bytes at `off` of a file of `file_size` bytes as sealed blocks; `size` or a
   negative errno. At most 1 MiB. */
ssize_t floor_store_write(int fd, const char *data, size_t size, off_t off, off_t file_size);

#endif
