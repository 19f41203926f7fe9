/* Whether a file system keeps its files in memory rather than caching a disk's
 * (tmpfs, which also holds memfds, and ramfs): their pages stay where they are
 * whether or not a process maps them. For code_pages.c and private_copy.c. */
#ifndef CSHIMS_MEMORY_FS_H
#define CSHIMS_MEMORY_FS_H

#include <sys/vfs.h>

#define CSHIMS_TMPFS_MAGIC 0x01021994
#define CSHIMS_RAMFS_MAGIC 0x858458f6

static inline int cshims_in_memory(const struct statfs *fs) {
    return fs->f_type == CSHIMS_TMPFS_MAGIC || fs->f_type == CSHIMS_RAMFS_MAGIC;
}

#endif
