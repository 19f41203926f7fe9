#define _GNU_SOURCE  /* memfd_create, F_ADD_SEALS */
#include <malloc.h>
#include <fcntl.h>
#include <getopt.h>
#include <sys/mman.h>
#include "cshims.h"

const char *cshims_optarg(void) { return optarg; }
int cshims_optind(void) { return optind; }
/* glibc restarts scanning when optind is 0. */
void cshims_reset_getopt(void) { optind = 0; opterr = 0; }

int cshims_memfd_create(const char *name) { return memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING); }
int cshims_memfd_seal(int fd) {
    return fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
}

int cshims_malloc_trim(void) { return malloc_trim(0); }
void cshims_fix_mmap_threshold(void) { mallopt(M_MMAP_THRESHOLD, 128 * 1024); }
