#define _GNU_SOURCE  /* memfd_create, F_ADD_SEALS, O_TMPFILE */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include "cshims.h"
#include "memory_fs.h"

int cshims_memfd_create(const char *name) { return memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING); }

int cshims_memfd_seal(int fd) {
    return fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
}

/* overlayfs: its files may be on any file system below it, tmpfs on a live
 * system's root among them. */
#define OVERLAYFS_MAGIC_VALUE 0x794c7630

/* Whether a copy of `size` bytes leaves 16 MiB available on its file system for
 * the decisions, besides root's own reserve (f_bavail does not count it). */
static int leaves_room(const struct statvfs *vfs, size_t size) {
    unsigned long long unit = vfs->f_frsize ? vfs->f_frsize : vfs->f_bsize;
    unsigned long long available = (unsigned long long)vfs->f_bavail * unit;
    return available >= (16ULL << 20) + size;
}

/* Whether the file of `fd` may hold a copy: its file system keeps it on a disk
 * (not tmpfs or ramfs, nor overlayfs, which may be either) and may map it
 * executable (not noexec); with `size` > 0, also that writing `size` more bytes
 * leaves room (leaves_room). */
static int holds_code(int fd, size_t size) {
    struct statfs fs;
    struct statvfs vfs;
    if (fstatfs(fd, &fs) != 0 || fstatvfs(fd, &vfs) != 0) return 0;
    if (cshims_in_memory(&fs) || fs.f_type == OVERLAYFS_MAGIC_VALUE || (vfs.f_flag & ST_NOEXEC)) return 0;
    return size == 0 || leaves_room(&vfs, size);
}

/* Closes `fd` and leaves errno as it was, so that the caller sees the errno of
 * the call made before the close. */
static void close_keeping_errno(int fd) {
    int saved = errno;
    close(fd);
    errno = saved;
}

/* The kept copies' directory, `name` in `state`, made (mode 0700) when `create`
 * says so and it is missing; never reached through a symbolic link, and only if
 * this euid owns it and nobody else may write it. A descriptor, or -1. */
static int kept_directory(const char *state, const char *name, int create) {
    int sfd = open(state, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (sfd < 0) return -1;
    if (create && mkdirat(sfd, name, 0700) != 0 && errno != EEXIST) {
        close_keeping_errno(sfd);
        return -1;
    }
    int dfd = openat(sfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    close_keeping_errno(sfd);
    if (dfd < 0) return -1;
    struct stat st;
    if (fstat(dfd, &st) != 0 || st.st_uid != geteuid()) {
        close(dfd);
        errno = EPERM;
        return -1;
    }
    /* Ours, but others may write it (a restore that lost its mode): made 0700 again. */
    if ((st.st_mode & 077) && fchmod(dfd, 0700) != 0) {
        close(dfd);
        errno = EPERM;
        return -1;
    }
    return dfd;
}

int cshims_unnamed_disk_file(const char *state, const char *kept, size_t size) {
    /* The state directory's file system first: nothing is made where no copy can live. */
    int sfd = open(state, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (sfd < 0) return -1;
    int suitable = holds_code(sfd, 0);
    close(sfd);
    if (!suitable) {
        errno = EXDEV;
        return -1;
    }
    int dfd = kept_directory(state, kept, 1);
    if (dfd < 0) return -1;
    /* Without O_EXCL: once it is on the disk, it is given its name (cshims_name_copy). */
    int fd = openat(dfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0400);
    close_keeping_errno(dfd);
    if (fd < 0) return -1;
    /* On the descriptor, so that the file checked is the file made. */
    if (!holds_code(fd, size)) {
        close(fd);
        errno = ENOSPC;
        return -1;
    }
    return fd;
}

int cshims_kept_copy_open(const char *state, const char *kept, const char *name, size_t size) {
    int dfd = kept_directory(state, kept, 0);
    if (dfd < 0) return -1;
    /* Without blocking or following a link: whatever is there must be a file we made. */
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    close_keeping_errno(dfd);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 07777) != 0400
        || st.st_nlink != 1 || st.st_size != (off_t)size || !holds_code(fd, 0)) {
        close(fd);
        errno = EINVAL;
        return -1;
    }
    return fd;
}

int cshims_name_copy(int fd, const char *state, const char *kept, const char *name) {
    int dfd = kept_directory(state, kept, 0);
    if (dfd < 0) return -1;
    char path[32];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    int rc = linkat(AT_FDCWD, path, dfd, name, AT_SYMLINK_FOLLOW);
    /* What has the name failed the checks (cshims_kept_copy_open) or its hash. */
    if (rc != 0 && errno == EEXIST
        && (unlinkat(dfd, name, 0) == 0 || (errno == EISDIR && unlinkat(dfd, name, AT_REMOVEDIR) == 0)))
        rc = linkat(AT_FDCWD, path, dfd, name, AT_SYMLINK_FOLLOW);
    close_keeping_errno(dfd);
    return rc;
}

int cshims_remove_kept_copy(const char *state, const char *kept, const char *name) {
    int dfd = kept_directory(state, kept, 0);
    if (dfd < 0) return -1;
    int rc = unlinkat(dfd, name, 0);
    /* An empty directory planted under a copy's name goes too. */
    if (rc != 0 && errno == EISDIR) rc = unlinkat(dfd, name, AT_REMOVEDIR);
    close_keeping_errno(dfd);
    return rc;
}

int cshims_reopen_read_only(int fd) {
    char path[32];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    int again = open(path, O_RDONLY | O_CLOEXEC);
    close_keeping_errno(fd);
    return again;
}

/* ContentHash's 32-byte blocks (PluginFile.swift): four FNV-1a lanes, each
 * taking one little-endian word of every block. In C, with the loop kept scalar:
 * compiled from Swift, the four lanes became two SSE2 vectors whose 64-bit
 * multiplies are emulated with three 32-bit ones each, twice the instructions of
 * four scalar multiplies, on every byte of every plugin at every start
 * (doc/performance.md, "Start-up's own work, counted"). */
void cshims_content_hash_blocks(uint64_t lanes[4], const unsigned char *bytes, size_t blocks)
{
    const uint64_t prime = 0x100000001b3ULL;
    uint64_t a = lanes[0], b = lanes[1], c = lanes[2], d = lanes[3];
#pragma clang loop vectorize(disable) interleave(disable)
    for (size_t i = 0; i < blocks; i++, bytes += 32) {
        uint64_t w[4];
        memcpy(w, bytes, 32); /* unaligned; x86-64 is little-endian, as the hash's words are */
        a = (a ^ w[0]) * prime;
        b = (b ^ w[1]) * prime;
        c = (c ^ w[2]) * prime;
        d = (d ^ w[3]) * prime;
    }
    lanes[0] = a;
    lanes[1] = b;
    lanes[2] = c;
    lanes[3] = d;
}
