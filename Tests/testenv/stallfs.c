/* stallfs MOUNTPOINT: a FUSE file system (spoken directly over /dev/fuse, no
 * libfuse) whose root directory exists but never answers anything else: a lookup,
 * an open or a read made in it waits for ever, as an app's own FUSE mount can make
 * a reader wait. For the identity-stall test (Tests/IntegrationTests); needs root.
 *
 * Prints "mounted" once mounted, then "stalled OPCODE TID" for every request it
 * leaves unanswered (TID: the requesting thread). Killing it fails every request
 * still waiting (ENOTCONN) and leaves the mount point to be unmounted. It dies with
 * its parent, so that a crashed test leaves no file system that stalls. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

static int dev;

static void reply(uint64_t unique, int error, const void *body, size_t size) {
    struct fuse_out_header header = { (uint32_t)(sizeof header + size), -error, unique };
    char buffer[sizeof header + 256];
    memcpy(buffer, &header, sizeof header);
    if (size) memcpy(buffer + sizeof header, body, size);
    if (write(dev, buffer, sizeof header + size) < 0) perror("stallfs: write");
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: stallfs MOUNTPOINT\n");
        return 2;
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dev = open("/dev/fuse", O_RDWR | O_CLOEXEC);
    if (dev < 0) { perror("stallfs: /dev/fuse"); return 1; }
    char options[128];
    snprintf(options, sizeof options, "fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other", dev);
    if (mount("stallfs", argv[1], "fuse.stallfs", MS_NOSUID | MS_NODEV, options) != 0) {
        perror("stallfs: mount");
        return 1;
    }
    printf("mounted\n");
    fflush(stdout);
    static char buffer[FUSE_MIN_READ_BUFFER + (1 << 20)];
    for (;;) {
        ssize_t n = read(dev, buffer, sizeof buffer);
        if (n < 0 && (errno == EINTR || errno == ENOENT)) continue;  /* ENOENT: an interrupted request */
        if (n < 0) { perror("stallfs: read"); return 1; }
        struct fuse_in_header *in = (struct fuse_in_header *)buffer;
        void *arg = buffer + sizeof *in;
        switch (in->opcode) {
        case FUSE_INIT: {
            struct fuse_init_in *init = arg;
            struct fuse_init_out out = { .major = FUSE_KERNEL_VERSION, .max_write = 4096 };
            out.minor = init->minor < FUSE_KERNEL_MINOR_VERSION ? init->minor : FUSE_KERNEL_MINOR_VERSION;
            out.max_readahead = init->max_readahead;
            reply(in->unique, 0, &out, sizeof out);
            break;
        }
        case FUSE_GETATTR: {  /* the root: an empty directory */
            struct fuse_attr_out out = { .attr_valid = 3600 };
            out.attr.ino = in->nodeid;
            out.attr.mode = S_IFDIR | 0755;
            out.attr.nlink = 2;
            reply(in->unique, 0, &out, sizeof out);
            break;
        }
        case FUSE_ACCESS:  /* chroot() into it asks */
            reply(in->unique, 0, NULL, 0);
            break;
        case FUSE_STATFS: {  /* df and the like should not hang */
            struct fuse_statfs_out out = { .st = { .bsize = 4096, .namelen = 255, .frsize = 4096 } };
            reply(in->unique, 0, &out, sizeof out);
            break;
        }
        case FUSE_FORGET: case FUSE_BATCH_FORGET: case FUSE_INTERRUPT:  /* no reply expected */
            break;
        case FUSE_DESTROY:
            return 0;
        default:
            printf("stalled %u %u\n", in->opcode, in->pid);
            fflush(stdout);
        }
    }
}
