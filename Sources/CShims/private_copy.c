#define _GNU_SOURCE  /* memfd_create, F_ADD_SEALS, O_TMPFILE */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
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

int cshims_unnamed_disk_file(const char *directory, size_t size) {
    /* O_EXCL: linkat(2) can never give it a name. */
    int fd = open(directory, O_TMPFILE | O_RDWR | O_EXCL | O_CLOEXEC, 0400);
    if (fd < 0) return -1;
    struct statfs fs;
    struct statvfs vfs;
    /* On the descriptor, so that the file checked is the file made. */
    if (fstatfs(fd, &fs) != 0 || fstatvfs(fd, &vfs) != 0 || cshims_in_memory(&fs)
        || fs.f_type == OVERLAYFS_MAGIC_VALUE || (vfs.f_flag & ST_NOEXEC) || !leaves_room(&vfs, size)) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

int cshims_reopen_read_only(int fd) {
    char path[32];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    int again = open(path, O_RDONLY | O_CLOEXEC);
    int saved = errno;
    close(fd);
    errno = saved;
    return again;
}
