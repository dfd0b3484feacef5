/* fuse_floor: the round trip of a FUSE request on this machine with nothing behind it.
 *
 * A libfuse 3 low-level filesystem held in memory that keeps names, modes, owners, sizes and
 * times but no data: a READ answers zeros up to the file's size, a WRITE moves the size and
 * keeps nothing. It answers each request the way mamfs must (docs/PERFORMANCE.md): entries and
 * attributes kept by the kernel for 1 s, direct I/O on read-only handles, no writeback cache,
 * READDIRPLUS, GETXATTR answered rather than turned off, no FLUSH, 1 MiB writes, and mamfs's
 * own transport of /dev/fuse (Sources/CFuseTransport: the same INIT flags, FUSE_HANDLE_KILLPRIV_V2
 * among them, and the same reads and writes of the device). What a workload costs on it is what
 * the kernel, libfuse and the wakeups cost for mamfs's requests before any disk, cipher or policy
 * work: the time no FUSE filesystem answering them can beat.
 *
 * Not a filesystem to keep anything in: one thread, no locks, inodes never freed, an unlinked
 * file gone at once (even while open), set-ID bits never cleared. A directory's entries keep
 * their READDIR offsets while others are removed (a removed entry leaves an empty slot).
 *
 * With -o backing=DIR (fuse_floor_store.c) DIR mirrors the tree: every directory has a backing
 * directory there and every regular file a backing file that holds its data as an encrypting
 * overlay lays it out (a header, then each 4 KiB block with a 16-byte tag), and READ and WRITE
 * move those bytes: the round trips plus the disk's part of an encrypting overlay's work, with
 * no cipher and no check. With -o cipher as well, each block is sealed with AES-256-GCM when
 * written and opened when read (OpenSSL): the cipher's part added, still no check.
 *
 * Build: build_fuse_floor of Tools/bench/bench_setup.py (cc with Sources/CFuseTransport, Sources/CCipher,
 *        fuse3 and libcrypto)
 * Run:   fuse_floor MOUNTPOINT -f [-o backing=DIR[,cipher]]
 *        (Tools/bench/run.py mounts it as "fuse-floor", with a store as "fuse-floor-io", and with
 *        a store and the cipher as "fuse-floor-crypt")
 */
#define FUSE_USE_VERSION 34
#include <fuse_lowlevel.h>
#include "mamfs_fuse_transport.h"
#include "fuse_floor_store.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TIMEOUT 1.0

struct node {
    struct stat st;
    fuse_ino_t parent;
    char *name;
    fuse_ino_t *children; /* slots in the order made; 0: an entry removed since */
    size_t count, capacity, live;
    int fd; /* a directory's backing directory (O_PATH) with a store; -1 else */
};

static struct node *nodes;
static size_t node_count, node_capacity;
static char zeros[1 << 20];
static char data[1 << 20]; /* a READ's answer from the store */

static struct node *node(fuse_ino_t ino) {
    return ino >= 1 && ino < node_count && nodes[ino].st.st_nlink > 0 ? &nodes[ino] : NULL;
}

static void now(struct timespec *t) { clock_gettime(CLOCK_REALTIME, t); }

static fuse_ino_t child(struct node *dir, const char *name) {
    for (size_t i = 0; i < dir->count; i++)
        if (dir->children[i] && strcmp(nodes[dir->children[i]].name, name) == 0) return dir->children[i];
    return 0;
}

/* Empties the first slot holding `ino`. */
static void unlink_child(struct node *dir, fuse_ino_t ino) {
    for (size_t i = 0; i < dir->count; i++)
        if (dir->children[i] == ino) { dir->children[i] = 0; dir->live--; return; }
}

static int link_child(fuse_ino_t parent, fuse_ino_t ino) {
    struct node *dir = &nodes[parent];
    if (dir->count == dir->capacity) {
        size_t capacity = dir->capacity ? dir->capacity * 2 : 16;
        fuse_ino_t *grown = realloc(dir->children, capacity * sizeof *grown);
        if (!grown) return ENOMEM;
        dir->children = grown;
        dir->capacity = capacity;
    }
    dir->children[dir->count++] = ino;
    dir->live++;
    return 0;
}

/* A new node named `name` in `parent`; 0 with errno set on failure. */
static fuse_ino_t make(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode) {
    if (node_count == node_capacity) {
        size_t capacity = node_capacity ? node_capacity * 2 : 1024;
        struct node *grown = realloc(nodes, capacity * sizeof *grown);
        if (!grown) { errno = ENOMEM; return 0; }
        nodes = grown;
        node_capacity = capacity;
    }
    fuse_ino_t ino = node_count;
    struct node *n = &nodes[ino];
    memset(n, 0, sizeof *n);
    n->name = strdup(name);
    if (!n->name || link_child(parent, ino) != 0) { free(n->name); errno = ENOMEM; return 0; }
    node_count++;
    const struct fuse_ctx *ctx = req ? fuse_req_ctx(req) : NULL;
    n->parent = parent;
    n->fd = -1;
    n->st.st_ino = ino;
    n->st.st_mode = mode;
    n->st.st_nlink = S_ISDIR(mode) ? 2 : 1;
    n->st.st_uid = ctx ? ctx->uid : getuid();
    n->st.st_gid = ctx ? ctx->gid : getgid();
    n->st.st_blksize = 4096;
    now(&n->st.st_atim);
    n->st.st_mtim = n->st.st_ctim = n->st.st_atim;
    if (S_ISDIR(mode) && parent) nodes[parent].st.st_nlink++;
    return ino;
}

/* The entry of `ino` as a LOOKUP, CREATE or READDIRPLUS reply gives it. */
static struct fuse_entry_param entry_of(fuse_ino_t ino) {
    struct fuse_entry_param e;
    memset(&e, 0, sizeof e);
    e.ino = ino;
    e.attr = nodes[ino].st;
    e.attr.st_blocks = (e.attr.st_size + 511) / 512;
    e.attr_timeout = e.entry_timeout = TIMEOUT;
    return e;
}

static void reply_entry(fuse_req_t req, fuse_ino_t ino) {
    struct fuse_entry_param e = entry_of(ino);
    fuse_reply_entry(req, &e);
}

static void floor_init(void *userdata, struct fuse_conn_info *conn) {
    (void)userdata;
    conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
    conn->max_write = 1 << 20;
}

static void floor_lookup(fuse_req_t req, fuse_ino_t parent, const char *name) {
    struct node *dir = node(parent);
    fuse_ino_t ino = dir ? child(dir, name) : 0;
    if (!ino) { fuse_reply_err(req, ENOENT); return; }
    reply_entry(req, ino);
}

static void floor_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    (void)fi;
    struct node *n = node(ino);
    if (!n) { fuse_reply_err(req, ENOENT); return; }
    struct fuse_entry_param e = entry_of(ino);
    fuse_reply_attr(req, &e.attr, TIMEOUT);
}

static void floor_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int set, struct fuse_file_info *fi) {
    (void)fi;
    struct node *n = node(ino);
    if (!n) { fuse_reply_err(req, ENOENT); return; }
    /* The size first: the only change that can fail, so a failed SETATTR changes nothing. */
    if (set & FUSE_SET_ATTR_SIZE) {
        int rc = floor_store_enabled() && S_ISREG(n->st.st_mode)
            ? floor_store_truncate(nodes[n->parent].fd, n->name, attr->st_size, n->st.st_size) : 0;
        if (rc) { fuse_reply_err(req, -rc); return; }
        n->st.st_size = attr->st_size;
    }
    if (set & FUSE_SET_ATTR_MODE) n->st.st_mode = (n->st.st_mode & S_IFMT) | (attr->st_mode & 07777);
    if (set & FUSE_SET_ATTR_UID) n->st.st_uid = attr->st_uid;
    if (set & FUSE_SET_ATTR_GID) n->st.st_gid = attr->st_gid;
    if (set & FUSE_SET_ATTR_ATIME) n->st.st_atim = attr->st_atim;
    if (set & FUSE_SET_ATTR_MTIME) n->st.st_mtim = attr->st_mtim;
    if (set & FUSE_SET_ATTR_ATIME_NOW) now(&n->st.st_atim);
    if (set & FUSE_SET_ATTR_MTIME_NOW) now(&n->st.st_mtim);
    now(&n->st.st_ctim);
    floor_getattr(req, ino, NULL);
}

static void create_node(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi) {
    struct node *dir = node(parent);
    if (!dir || !S_ISDIR(dir->st.st_mode)) { fuse_reply_err(req, dir ? ENOTDIR : ENOENT); return; }
    if (child(dir, name)) { fuse_reply_err(req, EEXIST); return; }
    fuse_ino_t ino = make(req, parent, name, mode);
    if (!ino) { fuse_reply_err(req, errno); return; }
    dir = &nodes[parent]; /* make() may have moved the nodes */
    if (floor_store_enabled()) {
        int fd = S_ISDIR(mode) ? floor_store_mkdir(dir->fd, name) : floor_store_create(dir->fd, name, fi != NULL);
        if (fd < 0) {
            unlink_child(dir, ino);
            if (S_ISDIR(mode)) dir->st.st_nlink--;
            nodes[ino].st.st_nlink = 0;
            fuse_reply_err(req, -fd);
            return;
        }
        if (S_ISDIR(mode)) nodes[ino].fd = fd;
        else if (fi) fi->fh = (uint64_t)fd;
    }
    if (!fi) { reply_entry(req, ino); return; }
    struct fuse_entry_param e = entry_of(ino);
    fi->direct_io = (fi->flags & O_ACCMODE) == O_RDONLY;
    /* A reply that does not reach the kernel (the open was interrupted) gets no RELEASE. */
    if (fuse_reply_create(req, &e, fi) != 0 && floor_store_enabled()) close((int)fi->fh);
}

static void floor_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode) {
    create_node(req, parent, name, S_IFDIR | (mode & 07777), NULL);
}

static void floor_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev) {
    (void)rdev;
    if (!S_ISREG(mode)) { fuse_reply_err(req, EPERM); return; }
    create_node(req, parent, name, mode, NULL);
}

static void floor_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi) {
    create_node(req, parent, name, S_IFREG | (mode & 07777), fi);
}

static void remove_node(fuse_req_t req, fuse_ino_t parent, const char *name, int directory) {
    struct node *dir = node(parent);
    fuse_ino_t ino = dir ? child(dir, name) : 0;
    if (!ino) { fuse_reply_err(req, ENOENT); return; }
    struct node *n = &nodes[ino];
    if (directory != !!S_ISDIR(n->st.st_mode)) { fuse_reply_err(req, directory ? ENOTDIR : EISDIR); return; }
    if (directory && n->live) { fuse_reply_err(req, ENOTEMPTY); return; }
    int rc = floor_store_enabled() ? floor_store_remove(dir->fd, name, directory) : 0;
    if (rc) { fuse_reply_err(req, -rc); return; }
    if (n->fd >= 0) close(n->fd);
    n->fd = -1;
    unlink_child(dir, ino);
    if (directory) dir->st.st_nlink--;
    n->st.st_nlink = 0;
    free(n->children);
    n->children = NULL;
    fuse_reply_err(req, 0);
}

static void floor_unlink(fuse_req_t req, fuse_ino_t parent, const char *name) { remove_node(req, parent, name, 0); }
static void floor_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name) { remove_node(req, parent, name, 1); }

static void floor_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                         const char *newname, unsigned int flags) {
    struct node *from = node(parent), *to = node(newparent);
    fuse_ino_t ino = from ? child(from, name) : 0;
    if (!ino || !to) { fuse_reply_err(req, ENOENT); return; }
    if (flags) { fuse_reply_err(req, EINVAL); return; }
    fuse_ino_t there = child(to, newname);
    if (there == ino) { fuse_reply_err(req, 0); return; }
    if (there && S_ISDIR(nodes[there].st.st_mode) && nodes[there].live) { fuse_reply_err(req, ENOTEMPTY); return; }
    /* Everything that can fail comes first: a failed rename changes nothing. The new slot
     * comes after the old one, so the old one is the first that unlink_child finds. */
    char *copy = strdup(newname);
    if (!copy || link_child(newparent, ino) != 0) { free(copy); fuse_reply_err(req, ENOMEM); return; }
    int rc = floor_store_enabled() ? floor_store_rename(from->fd, name, to->fd, newname) : 0;
    if (rc) {
        to->count--; /* the slot just added, the last */
        to->live--;
        free(copy);
        fuse_reply_err(req, -rc);
        return;
    }
    if (there) {
        struct node *old = &nodes[there];
        unlink_child(to, there);
        if (S_ISDIR(old->st.st_mode)) to->st.st_nlink--;
        old->st.st_nlink = 0;
        if (old->fd >= 0) close(old->fd);
        old->fd = -1;
        free(old->children);
        old->children = NULL;
    }
    unlink_child(from, ino);
    if (S_ISDIR(nodes[ino].st.st_mode)) { from->st.st_nlink--; to->st.st_nlink++; }
    free(nodes[ino].name);
    nodes[ino].name = copy;
    nodes[ino].parent = newparent;
    fuse_reply_err(req, 0);
}

static void floor_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    struct node *n = node(ino);
    if (!n) { fuse_reply_err(req, ENOENT); return; }
    if (floor_store_enabled() && S_ISREG(n->st.st_mode)) {
        int fd = floor_store_reopen(nodes[n->parent].fd, n->name, (fi->flags & O_TRUNC) != 0);
        if (fd < 0) { fuse_reply_err(req, -fd); return; }
        fi->fh = (uint64_t)fd;
    }
    if (fi->flags & O_TRUNC) n->st.st_size = 0;
    fi->direct_io = (fi->flags & O_ACCMODE) == O_RDONLY;
    if (fuse_reply_open(req, fi) != 0 && floor_store_enabled() && S_ISREG(n->st.st_mode)) close((int)fi->fh);
}

static void floor_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
    struct node *n = node(ino);
    if (!n) { fuse_reply_err(req, ENOENT); return; }
    size_t available = off < n->st.st_size ? (size_t)(n->st.st_size - off) : 0;
    if (size > available) size = available;
    if (size > sizeof zeros) size = sizeof zeros;
    if (floor_store_enabled()) {
        ssize_t got = floor_store_read((int)fi->fh, data, size, off, n->st.st_size);
        if (got < 0) fuse_reply_err(req, (int)-got); else fuse_reply_buf(req, data, (size_t)got);
        return;
    }
    fuse_reply_buf(req, zeros, size);
}

static void floor_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                        struct fuse_file_info *fi) {
    struct node *n = node(ino);
    if (!n) { fuse_reply_err(req, ENOENT); return; }
    if (floor_store_enabled()) {
        ssize_t put = floor_store_write((int)fi->fh, buf, size, off, n->st.st_size);
        if (put < 0) { fuse_reply_err(req, (int)-put); return; }
    }
    if (off + (off_t)size > n->st.st_size) n->st.st_size = off + (off_t)size;
    now(&n->st.st_mtim);
    n->st.st_ctim = n->st.st_mtim;
    fuse_reply_write(req, size);
}

static void floor_done(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    (void)ino; (void)fi;
    fuse_reply_err(req, 0);
}

static void floor_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    if (floor_store_enabled()) close((int)fi->fh);
    floor_done(req, ino, fi);
}

static void floor_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi) {
    if (floor_store_enabled() && fi && (datasync ? fdatasync((int)fi->fh) : fsync((int)fi->fh)) != 0) {
        fuse_reply_err(req, errno);
        return;
    }
    floor_done(req, ino, fi);
}

static void floor_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi) {
    (void)datasync;
    floor_done(req, ino, fi);
}

static void floor_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    struct node *n = node(ino);
    if (!n) { fuse_reply_err(req, ENOENT); return; }
    if (!S_ISDIR(n->st.st_mode)) { fuse_reply_err(req, ENOTDIR); return; }
    fuse_reply_open(req, fi);
}

/* Entries ".", ".." and the children in their order, empty slots skipped; `off` is the index
 * of the next one (stable: a removal empties a slot and moves nothing). */
static void list(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, int plus) {
    struct node *dir = node(ino);
    if (!dir) { fuse_reply_err(req, ENOENT); return; }
    char *buf = malloc(size);
    if (!buf) { fuse_reply_err(req, ENOMEM); return; }
    size_t used = 0;
    for (size_t i = (size_t)off; i < dir->count + 2; i++) {
        if (i >= 2 && dir->children[i - 2] == 0) continue;
        fuse_ino_t entry = i == 0 ? ino : i == 1 ? (dir->parent ? dir->parent : ino) : dir->children[i - 2];
        const char *name = i == 0 ? "." : i == 1 ? ".." : nodes[entry].name;
        size_t added;
        if (plus) {
            struct fuse_entry_param e;
            if (i >= 2) {
                e = entry_of(entry);
            } else {
                memset(&e, 0, sizeof e);
                e.attr.st_ino = entry;
                e.attr.st_mode = S_IFDIR;
            }
            added = fuse_add_direntry_plus(req, buf + used, size - used, name, &e, (off_t)i + 1);
        } else {
            struct stat st = nodes[entry].st;
            added = fuse_add_direntry(req, buf + used, size - used, name, &st, (off_t)i + 1);
        }
        if (added > size - used) break;
        /* A READDIRPLUS entry counts as a lookup of the child: the kernel sends FORGET for it. */
        used += added;
    }
    fuse_reply_buf(req, buf, used);
    free(buf);
}

static void floor_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
    (void)fi;
    list(req, ino, size, off, 0);
}

static void floor_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
    (void)fi;
    list(req, ino, size, off, 1);
}

static void floor_statfs(fuse_req_t req, fuse_ino_t ino) {
    (void)ino;
    struct statvfs sv;
    memset(&sv, 0, sizeof sv);
    sv.f_bsize = sv.f_frsize = 4096;
    sv.f_blocks = sv.f_bfree = sv.f_bavail = 1 << 24;
    sv.f_files = sv.f_ffree = sv.f_favail = 1 << 24;
    sv.f_namemax = 255;
    fuse_reply_statfs(req, &sv);
}

/* ENODATA, or EOPNOTSUPP for the names mamfs does not keep (ACLs, security labels: ls then
 * stops asking for them on this filesystem), as mamfs answers. */
static void floor_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size) {
    (void)ino; (void)size;
    int unkept = strcmp(name, "system.posix_acl_access") == 0 || strcmp(name, "system.posix_acl_default") == 0 ||
                 strcmp(name, "security.selinux") == 0 || strncmp(name, "security.SMACK64", 16) == 0;
    fuse_reply_err(req, unkept ? EOPNOTSUPP : ENODATA);
}

static void floor_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
    (void)ino;
    if (size == 0) fuse_reply_xattr(req, 0); else fuse_reply_buf(req, NULL, 0);
}

static void floor_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
    (void)ino; (void)nlookup;
    fuse_reply_none(req);
}

static const struct fuse_lowlevel_ops operations = {
    .init = floor_init, .lookup = floor_lookup, .forget = floor_forget, .getattr = floor_getattr,
    .setattr = floor_setattr, .mknod = floor_mknod, .mkdir = floor_mkdir, .unlink = floor_unlink,
    .rmdir = floor_rmdir, .rename = floor_rename, .open = floor_open, .read = floor_read,
    /* No flush: libfuse answers ENOSYS and the kernel sends no more (mamfs refuses the first). */
    .write = floor_write, .release = floor_release, .fsync = floor_fsync,
    .opendir = floor_opendir, .readdir = floor_readdir, .releasedir = floor_done,
    .fsyncdir = floor_fsyncdir, .statfs = floor_statfs, .getxattr = floor_getxattr,
    .listxattr = floor_listxattr, .create = floor_create, .readdirplus = floor_readdirplus,
};

struct floor_options { char *backing; int cipher; };
static const struct fuse_opt floor_option_spec[] = {
    {"backing=%s", offsetof(struct floor_options, backing), 0},
    {"cipher", offsetof(struct floor_options, cipher), 1},
    FUSE_OPT_END
};

int main(int argc, char *argv[]) {
    struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
    struct floor_options options = {NULL, 0};
    if (fuse_opt_parse(&args, &options, floor_option_spec, NULL) != 0) return 1;
    /* Each directory of a store holds a descriptor. */
    struct rlimit files;
    if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
        files.rlim_cur = files.rlim_max;
        setrlimit(RLIMIT_NOFILE, &files);
    }
    int store = options.backing ? floor_store_open(options.backing) : -1;
    if (options.backing && store < 0) {
        fprintf(stderr, "fuse_floor: backing=%s: %s\n", options.backing, strerror(errno));
        return 1;
    }
    if (options.cipher && (!options.backing || floor_store_use_cipher() != 0)) {
        fprintf(stderr, "fuse_floor: cipher: %s\n",
                options.backing ? "OpenSSL could not set up AES-256-GCM" : "needs -o backing=DIR");
        return 1;
    }
    struct fuse_cmdline_opts opts;
    if (fuse_parse_cmdline(&args, &opts) != 0) return 1;
    if (opts.show_help || !opts.mountpoint) {
        printf("usage: %s MOUNTPOINT [-f] [-o backing=DIR[,cipher]] [-o OPTION,...]\n", argv[0]);
        fuse_cmdline_help();
        return opts.show_help ? 0 : 1;
    }
    nodes = calloc(1024, sizeof *nodes);
    if (!nodes) return 1;
    node_capacity = 1024;
    node_count = 2; /* inode 0 is not a node; 1 is the root */
    struct node *root = &nodes[FUSE_ROOT_ID];
    root->name = strdup("");
    root->fd = store;
    root->st.st_ino = FUSE_ROOT_ID;
    root->st.st_mode = S_IFDIR | 0755;
    root->st.st_nlink = 2;
    root->st.st_uid = getuid();
    root->st.st_gid = getgid();
    now(&root->st.st_atim);
    root->st.st_mtim = root->st.st_ctim = root->st.st_atim;

    int rc = 1;
    struct fuse_session *se = fuse_session_new(&args, &operations, sizeof operations, NULL);
    if (!se) goto out;
    if (fuse_set_signal_handlers(se) != 0) goto destroy;
    if (fuse_session_mount(se, opts.mountpoint) != 0) goto handlers;
    if (mamfs_fuse_use_transport(se, 0) != 0) goto unmount;
    fuse_daemonize(opts.foreground);
    rc = fuse_session_loop(se); /* one thread whatever -s says: nothing here takes a lock */
unmount:
    fuse_session_unmount(se);
handlers:
    fuse_remove_signal_handlers(se);
destroy:
    fuse_session_destroy(se);
out:
    free(opts.mountpoint);
    fuse_opt_free_args(&args);
    return rc ? 1 : 0;
}
