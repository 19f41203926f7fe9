/* C pieces that Swift cannot use directly, each a small wrapper.
 * getopt's optarg/optind are mutable C globals, which Swift 6 refuses to touch
 * ("not concurrency-safe"); options are parsed once at start-up on one thread.
 * memfd_create, the F_SEAL_* flags and O_TMPFILE are declared by glibc only
 * under _GNU_SOURCE, which Swift's Glibc module does not define. */
#ifndef CSHIMS_H
#define CSHIMS_H

#include <getopt.h>
#include <stdint.h>
#include <sys/types.h>

const char *cshims_optarg(void);
int cshims_optind(void);
/* Restart scanning and silence getopt's own messages (we print ours). */
void cshims_reset_getopt(void);

/* A plugin's private copy (private_copy.c, for PrivateCopy). */
/* An anonymous file (memfd_create with MFD_CLOEXEC | MFD_ALLOW_SEALING), or -1. */
int cshims_memfd_create(const char *name);
/* Seals a memfd: its size and content can no longer change (0, or -1 with errno). */
int cshims_memfd_seal(int fd);
/* Kept copies: files in `kept`, a directory in the state directory `state` that
 * is made (mode 0700) when missing, never reached through a symbolic link, and
 * used only if this euid owns it (errno EPERM otherwise; ENOTDIR or ELOOP when it
 * is not a directory), made 0700 again if others may write it.
 *
 * A new file without a name in `kept` (O_TMPFILE; mode 0400; close-on-exec),
 * open for reading and writing, for `size` bytes; or -1 when the state
 * directory's file system keeps its files in memory (tmpfs, ramfs) or may
 * (overlayfs), is mounted noexec or cannot make such a file, or would be left
 * with less than 16 MiB available (root's reserve aside) once the file is
 * written (errno EXDEV for the file system, ENOSPC for the room). Nothing is
 * made in `state` when its file system is refused. */
int cshims_unnamed_disk_file(const char *state, const char *kept, size_t size);
/* The kept copy `name`, read-only, if it is a regular file this euid owns, of
 * mode 0400, with one link and `size` bytes, on a file system that may hold a
 * copy (see cshims_unnamed_disk_file): its descriptor, or -1. Its bytes are the
 * caller's to check. */
int cshims_kept_copy_open(const char *state, const char *kept, const char *name, size_t size);
/* Gives the unnamed file `fd` (from cshims_unnamed_disk_file) the name `name`
 * in `kept`, in place of a file or an empty directory of that name: 0, or -1
 * with errno. */
int cshims_name_copy(int fd, const char *state, const char *kept, const char *name);
/* Removes the kept copy `name` (or an empty directory of that name): 0, or -1
 * with errno. */
int cshims_remove_kept_copy(const char *state, const char *kept, const char *name);
/* Opens the file of `fd` again, read-only (through /proc/self/fd), and closes
 * `fd`: the new descriptor, or -1 with errno. */
int cshims_reopen_read_only(int fd);
/* Adds `blocks` 32-byte blocks of `bytes` to ContentHash's four lanes. */
void cshims_content_hash_blocks(uint64_t lanes[4], const unsigned char *bytes, size_t blocks);

/* Gives the heap's free pages back to the kernel (glibc's malloc_trim(0), which
 * Swift's Glibc module does not declare); 1 if any memory was released. */
int cshims_malloc_trim(void);
/* glibc's malloc as the daemon wants it; called first thing, before any thread
 * allocates (the arena limit is read when the second arena is made).
 * - The mmap threshold fixed at its default (128 KiB): every larger block is
 *   mapped and unmapped on free. Left dynamic, the threshold rises to the size
 *   of the first such block freed (a plugin file read whole), and later ones of
 *   that size stay resident in the heap after they are freed.
 * - At most two arenas. glibc gives each new thread an arena of its own, up to
 *   eight per CPU, and what a thread frees stays in its arena: start-up's
 *   short-lived worker threads (about 20) left about 0.8 MiB resident in 15
 *   arenas. The daemon's threads seldom allocate at the same moment (the serving
 *   queue does nearly all the work), so two are enough to keep them from waiting
 *   on each other's lock. */
void cshims_tune_malloc(void);

/* Unmaps the code of every loaded object whose file is on a disk (code_pages.c):
 * the pages stay in the page cache, and come back at the next fault, from there,
 * if the code runs again. For code that ran at start-up only, which would
 * otherwise stay mapped, and so resident and kept from reclaim, for the
 * daemon's life. Skips tmpfs and memfd files (their pages are memory either way)
 * and every page that is the process's own, not the file's (/proc/self/pagemap:
 * relocated, patched, a breakpoint, remapped to anonymous memory). The bytes of
 * the ranges unmapped; 0 without the page map. */
size_t cshims_release_code_pages(void);

/* Unix sockets (sockets.c), for UserSockets. glibc declares struct ucred, O_PATH,
 * accept4 and MSG_CMSG_CLOEXEC only under _GNU_SOURCE, and the CMSG_* macros that
 * build and walk an SCM_RIGHTS message are macros Swift cannot import. */

/* O_PATH: an fd that names a file without opening it for reading or writing. */
extern const int cshims_O_PATH;
/* SO_PEERCRED: who is at the other end of a Unix socket, as of its connect(2) or
 * (for the connecting side) its peer's listen(2). 0, or -1 with errno. */
int cshims_peer_credentials(int fd, int32_t *pid, uint32_t *uid, uint32_t *gid);
/* accept4(fd, NULL, NULL, SOCK_CLOEXEC). */
int cshims_accept_cloexec(int fd);
/* sendmsg of `size` bytes, with `fd` in SCM_RIGHTS unless it is negative;
 * MSG_NOSIGNAL (a peer gone is EPIPE, not SIGPIPE). Bytes sent, or -1 with errno. */
ssize_t cshims_send_with_fd(int socket, const void *bytes, size_t size, int fd);
/* recvmsg of at most `size` bytes (MSG_CMSG_CLOEXEC): the bytes received, or -1
 * with errno. `*fd` is the one descriptor that came in SCM_RIGHTS, else -1;
 * `*truncated` is 1 when the message was longer than `size`, or carried more
 * than one descriptor (every one is closed then, and `*fd` is -1). */
ssize_t cshims_recv_with_fd(int socket, void *bytes, size_t size, int *fd, int *truncated);

#endif
