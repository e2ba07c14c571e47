// SPDX-License-Identifier: BSD-3-Clause
/*
 * fdpass.c - fixed-size messages with SCM_RIGHTS on a Unix stream socket.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "shm/fdpass.h"

void msg_init(struct tally_msg *msg, enum tally_msg_type type)
{
	memset(msg, 0, sizeof(*msg));
	msg->magic = TALLY_MSG_MAGIC;
	msg->version = TALLY_PROTO_VERSION;
	msg->type = (uint16_t)type;
}

void msg_put_fds(struct msghdr *mh, void *ctl, const int *fds, int nfds)
{
	size_t bytes = sizeof(int) * (size_t)nfds;
	struct cmsghdr *cm;

	memset(ctl, 0, CMSG_SPACE(bytes));
	mh->msg_control = ctl;
	mh->msg_controllen = CMSG_SPACE(bytes);
	cm = CMSG_FIRSTHDR(mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(bytes);
	memcpy(CMSG_DATA(cm), fds, bytes);
}

int msg_send(int sock, const struct tally_msg *msg, const int *fds, int nfds)
{
	char ctl[CMSG_SPACE(sizeof(int) * TALLY_MSG_MAX_FDS)];
	struct iovec iov = { (void *)msg, sizeof(*msg) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (nfds < 0 || nfds > TALLY_MSG_MAX_FDS)
		return -EINVAL;
	if (nfds > 0)
		msg_put_fds(&mh, ctl, fds, nfds);
	do {
		n = sendmsg(sock, &mh, MSG_NOSIGNAL);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if ((size_t)n != sizeof(*msg))	/* 48 bytes: never split in practice */
		return -EIO;
	return 0;
}

static void take_fds(struct msghdr *mh, int *fds, int *nfds)
{
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm;
	     cm = CMSG_NXTHDR(mh, cm)) {
		size_t n;
		int tmp[16];

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		if (n > 16)
			n = 16;
		memcpy(tmp, CMSG_DATA(cm), n * sizeof(int));
		for (size_t i = 0; i < n; i++) {
			if (*nfds < TALLY_MSG_MAX_FDS)
				fds[(*nfds)++] = tmp[i];
			else
				close(tmp[i]);	/* more than we accept */
		}
	}
}

static void close_fds(int *fds, int *nfds)
{
	for (int i = 0; i < *nfds; i++) {
		close(fds[i]);
		fds[i] = -1;
	}
	*nfds = 0;
}

void msg_rx_init(struct msg_rx *rx)
{
	memset(rx, 0, sizeof(*rx));
	for (int i = 0; i < TALLY_MSG_MAX_FDS; i++)
		rx->fds[i] = -1;
}

void msg_rx_reset(struct msg_rx *rx)
{
	for (int i = 0; i < rx->nfds; i++)
		if (rx->fds[i] >= 0)
			close(rx->fds[i]);
	msg_rx_init(rx);
}

int msg_recv_step(int sock, struct msg_rx *rx)
{
	char ctl[CMSG_SPACE(sizeof(int) * 16)];
	struct iovec iov = { (char *)&rx->msg + rx->got,
			     sizeof(rx->msg) - rx->got };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = ctl,
			     .msg_controllen = sizeof(ctl) };
	ssize_t n;

	if (rx->got >= sizeof(rx->msg))
		return 1;
	do {
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	} while (n < 0 && errno == EINTR);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return -EAGAIN;
	if (n <= 0) {
		int err = n < 0 ? -errno : (rx->got ? -ECONNRESET : 0);

		msg_rx_reset(rx);
		return err;
	}
	take_fds(&mh, rx->fds, &rx->nfds);
	rx->got += (size_t)n;
	if (rx->got < sizeof(rx->msg))
		return -EAGAIN;
	if (rx->msg.magic != TALLY_MSG_MAGIC ||
	    rx->msg.version != TALLY_PROTO_VERSION) {
		msg_rx_reset(rx);
		return -EPROTO;
	}
	return 1;
}

int msg_recv(int sock, struct tally_msg *msg, int *fds, int *nfds)
{
	char ctl[CMSG_SPACE(sizeof(int) * 16)];
	size_t got = 0;

	*nfds = 0;
	for (int i = 0; i < TALLY_MSG_MAX_FDS; i++)
		fds[i] = -1;
	while (got < sizeof(*msg)) {
		struct iovec iov = { (char *)msg + got, sizeof(*msg) - got };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
				     .msg_control = ctl,
				     .msg_controllen = sizeof(ctl) };
		ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int err = n < 0 ? -errno : (got ? -ECONNRESET : 0);

			close_fds(fds, nfds);
			return err;
		}
		take_fds(&mh, fds, nfds);
		got += (size_t)n;
	}
	if (msg->magic != TALLY_MSG_MAGIC ||
	    msg->version != TALLY_PROTO_VERSION) {
		close_fds(fds, nfds);
		return -EPROTO;
	}
	return 1;
}
