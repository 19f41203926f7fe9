/* C pieces that Swift cannot use directly, each a one-line wrapper.
 * getopt's optarg/optind are mutable C globals, which Swift 6 refuses to touch
 * ("not concurrency-safe"); options are parsed once at start-up on one thread.
 * memfd_create and the F_SEAL_* flags are declared by glibc only under
 * _GNU_SOURCE, which Swift's Glibc module does not define. */
#ifndef CSHIMS_H
#define CSHIMS_H

#include <getopt.h>

const char *cshims_optarg(void);
int cshims_optind(void);
/* Restart scanning and silence getopt's own messages (we print ours). */
void cshims_reset_getopt(void);

/* An anonymous file (memfd_create with MFD_CLOEXEC | MFD_ALLOW_SEALING), or -1. */
int cshims_memfd_create(const char *name);
/* Seals a memfd: its size and content can no longer change (0, or -1 with errno). */
int cshims_memfd_seal(int fd);

/* Gives the heap's free pages back to the kernel (glibc's malloc_trim(0), which
 * Swift's Glibc module does not declare); 1 if any memory was released. */
int cshims_malloc_trim(void);
/* Fixes glibc's mmap threshold at its default (128 KiB): every larger block is
 * mapped and unmapped on free. Left dynamic, the threshold rises to the size of
 * the first such block freed (a plugin file read whole), and later ones of that
 * size stay resident in the heap after they are freed. */
void cshims_fix_mmap_threshold(void);

#endif
