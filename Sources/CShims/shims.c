#include <malloc.h>
#include <getopt.h>
#include "cshims.h"

const char *cshims_optarg(void) { return optarg; }
int cshims_optind(void) { return optind; }
/* glibc restarts scanning when optind is 0. */
void cshims_reset_getopt(void) { optind = 0; opterr = 0; }

int cshims_malloc_trim(void) { return malloc_trim(0); }
void cshims_tune_malloc(void) {
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    mallopt(M_ARENA_MAX, 2);
}
