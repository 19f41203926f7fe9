/* Unix-socket calls for UserSockets (Sources/UserSockets): see cshims.h. */
#define _GNU_SOURCE  /* struct ucred, O_PATH, accept4, MSG_CMSG_CLOEXEC */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "cshims.h"

const int cshims_O_PATH = O_PATH;

int cshims_peer_credentials(int fd, int32_t *pid, uint32_t *uid, uint32_t *gid) {
    struct ucred cred;
    socklen_t size = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &size) < 0) return -1;
    *pid = cred.pid;
    *uid = cred.uid;
    *gid = cred.gid;
    return 0;
}

int cshims_accept_cloexec(int fd) { return accept4(fd, NULL, NULL, SOCK_CLOEXEC); }

ssize_t cshims_send_with_fd(int socket, const void *bytes, size_t size, int fd) {
    struct iovec iov = { .iov_base = (void *) bytes, .iov_len = size };
    union {  /* aligned as a cmsghdr, as CMSG_FIRSTHDR needs */
        char buffer[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } control;
    struct msghdr message = { .msg_iov = &iov, .msg_iovlen = 1 };
    if (fd >= 0) {
        memset(&control, 0, sizeof control);
        message.msg_control = control.buffer;
        message.msg_controllen = sizeof control.buffer;
        struct cmsghdr *header = CMSG_FIRSTHDR(&message);
        header->cmsg_level = SOL_SOCKET;
        header->cmsg_type = SCM_RIGHTS;
        header->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(header), &fd, sizeof(int));
    }
    return sendmsg(socket, &message, MSG_NOSIGNAL);
}

ssize_t cshims_recv_with_fd(int socket, void *bytes, size_t size, int *fd, int *truncated) {
    struct iovec iov = { .iov_base = bytes, .iov_len = size };
    union {
        /* Room for a few, so that a peer sending more than one is seen doing so
         * (MSG_CTRUNC would otherwise hide how many the kernel dropped). */
        char buffer[CMSG_SPACE(4 * sizeof(int))];
        struct cmsghdr align;
    } control;
    struct msghdr message = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buffer, .msg_controllen = sizeof control.buffer,
    };
    *fd = -1;
    *truncated = 0;
    ssize_t n = recvmsg(socket, &message, MSG_CMSG_CLOEXEC);
    if (n < 0) return -1;
    int received = 0;
    for (struct cmsghdr *header = CMSG_FIRSTHDR(&message); header; header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
        size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; i++) {
            int one;
            memcpy(&one, CMSG_DATA(header) + i * sizeof(int), sizeof(int));
            if (received++ == 0) *fd = one; else close(one);  /* only one is ever sent */
        }
    }
    if (received > 1 || (message.msg_flags & MSG_CTRUNC)) {
        if (*fd >= 0) close(*fd);
        *fd = -1;
        *truncated = 1;
    }
    if (message.msg_flags & MSG_TRUNC) *truncated = 1;
    return n;
}
