#include <getopt.h>
#include "cshims.h"

const char *cshims_optarg(void) { return optarg; }
int cshims_optind(void) { return optind; }
/* glibc restarts scanning when optind is 0. */
void cshims_reset_getopt(void) { optind = 0; opterr = 0; }
