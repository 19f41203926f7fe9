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

int cshims_unnamed_disk_file(const char *directory) {
    /* O_EXCL: linkat(2) can never give it a name. */
    int fd = open(directory, O_TMPFILE | O_RDWR | O_EXCL | O_CLOEXEC, 0400);
    if (fd < 0) return -1;
    struct statfs fs;
    struct statvfs vfs;
    /* On the descriptor, so that the file checked is the file made. */
    if (fstatfs(fd, &fs) != 0 || cshims_in_memory(&fs) || fstatvfs(fd, &vfs) != 0 || (vfs.f_flag & ST_NOEXEC)) {
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
