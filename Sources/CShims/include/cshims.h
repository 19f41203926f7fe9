/* C pieces that Swift cannot use directly, each a one-line wrapper.
 * getopt's optarg/optind are mutable C globals, which Swift 6 refuses to touch
 * ("not concurrency-safe"); options are parsed once at start-up on one thread. */
#ifndef CSHIMS_H
#define CSHIMS_H

#include <getopt.h>

const char *cshims_optarg(void);
int cshims_optind(void);
/* Restart scanning and silence getopt's own messages (we print ours). */
void cshims_reset_getopt(void);

#endif
