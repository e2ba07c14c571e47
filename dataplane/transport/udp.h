/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * udp.h - the kernel UDP transport's state, shared by its three files:
 * udp.c (socket, offload set-up, address table, ops table), udp_tx.c
 * (the tx queue and its UDP_SEGMENT batches) and udp_rx.c (the rx ring
 * and the split of UDP_GRO buffers).  Private to dataplane/transport.
 *
 * On the wire nothing changes with the offloads: one bare tally packet
 * per UDP datagram.  Only the crossing of the kernel boundary is batched:
 * a run of frames to one peer leaves in one sendmsg as a GSO
 * "super-datagram" that the kernel (or the NIC) cuts into datagrams, and
 * a run of datagrams of one flow may arrive coalesced by GRO in one
 * buffer, which rx hands out again as one frame per datagram.
 */
#ifndef TALLY_DATAPLANE_TRANSPORT_UDP_H
#define TALLY_DATAPLANE_TRANSPORT_UDP_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#include "dataplane/transport/transport.h"

#define UDP_TX_BUFS	1024
#define UDP_MMSG_BATCH	64		/* messages per sendmmsg */
#define UDP_SOCKBUF	(8 << 20)

/*
 * One GSO send: at most 64 segments (UDP_MAX_SEGMENTS since 4.18; newer
 * kernels may allow more, 64 works everywhere) and a payload of at most
 * 65535 - 20 (IPv4) - 8 (UDP) bytes.
 */
#define UDP_GSO_MAX_SEGS	64
#define UDP_GSO_MAX_BYTES	65507

/* rx ring: small buffers (one datagram each) without GRO, 64 KB with */
#define UDP_RX_BUFS		256	/* power of two */
#define UDP_RX_GRO_BUFS		64	/* power of two */
#define UDP_RX_GRO_BUF_SIZE	65536

/*
 * Frames to ourselves (node self: a co-located aggregator shard and the
 * worker beside it) skip the kernel: tx_send keeps them in their tx
 * buffer, the next rx_burst hands them out from there, and rx_release
 * frees the buffer.  TALLY_UDP_SELF_LOOP=off sends them through the
 * kernel (loopback) as before; never with the link emulator, which
 * carries every frame.
 */
#define UDP_SELF_LOOP_ENV	"TALLY_UDP_SELF_LOOP"
/* an rx cookie with this bit is a looped tx buffer, else an rx buffer */
#define UDP_LOOP_COOKIE		(1u << 31)

/* what TALLY_UDP_OFFLOAD (off | tx | rx | on) leaves enabled */
#define UDP_OFFLOAD_ENV		"TALLY_UDP_OFFLOAD"
#define UDP_OFFLOAD_TX		1	/* UDP_SEGMENT on send */
#define UDP_OFFLOAD_RX		2	/* UDP_GRO on receive */

struct udp_txq_ent {
	uint32_t buf;
	uint32_t len;
	uint16_t dst;
};

/* one rx ring buffer: a datagram, or a GRO run of datagrams of @seg */
struct udp_rx_buf {
	uint32_t len;		/* bytes received */
	uint32_t seg;		/* datagram size (the last may be shorter) */
	uint32_t off;		/* next datagram to hand out */
	uint32_t left;		/* datagrams not yet handed out */
	uint32_t refs;		/* handed out, not yet released */
	uint64_t arrival_ns;	/* the kernel's stamp (rx_stamps), or 0 */
};

struct udp_priv {
	int fd;
	int gfd;			/* the result group's socket, or -1 */
	int efd;			/* epoll of fd and gfd (wait_fd), or -1 */
	struct sockaddr_in bound;	/* our address */
	uint32_t buf_size;		/* tx buffers; the longest rx frame */
	/* [TRANSPORT_MAX_NODES + 1]: the nodes', then the result group's
	 * (TRANSPORT_GROUP_NODE) */
	struct sockaddr_in *peers;
	/* tx */
	bool gso;			/* UDP_SEGMENT in use */
	bool gso_proven;		/* a super-datagram went out */
	int gso_suspect;		/* errno of a refused one (EINVAL,
					 * EMSGSIZE): if its frames go out one
					 * by one, blame GSO */
	uint32_t tx_plain_n;		/* head frames to send one by one */
	uint8_t *tx_slab;
	uint32_t *tx_free;
	uint32_t n_tx_free;
	struct udp_txq_ent txq[UDP_TX_BUFS];
	uint32_t txq_head, txq_n;
	uint32_t txq_grouped;		/* head frames already grouped */
	struct udp_txq_ent txq_tmp[UDP_TX_BUFS];	/* for grouping */
	struct iovec *tx_iov;		/* [UDP_TX_BUFS]: one a queued frame */
	/* frames to ourselves: their tx buffers in order, and lengths */
	bool self_loop;			/* on (UDP_SELF_LOOP_ENV) */
	uint32_t loopq[UDP_TX_BUFS];
	uint32_t loopq_head, loopq_n;
	uint32_t loop_len[UDP_TX_BUFS];	/* by tx buffer */
	uint32_t loop_unflushed;	/* looped since the last tx_flush */
	/* rx */
	bool gro;			/* UDP_GRO in use */
	uint32_t rx_nbufs;		/* ring size, a power of two */
	uint32_t rx_buf_size;
	uint8_t *rx_slab;
	struct udp_rx_buf *rxb;		/* [rx_nbufs] */
	uint32_t rx_head;		/* next buffer recvmmsg fills */
	uint32_t rx_next;		/* oldest with datagrams to hand out */
	uint32_t rx_tail;		/* oldest not yet free */
};

/* udp_tx.c */
uint8_t *udp_tx_alloc(struct transport *tp, size_t len);
void udp_tx_send(struct transport *tp, uint16_t dst, uint8_t *frame,
		 size_t len);
int udp_tx_flush(struct transport *tp);
int udp_tx_pending(struct transport *tp);

/* udp_mtu.c, with cfg.no_fragments (else both return 0): every known
 * node's route checked against the largest frame (open and set_nodes),
 * and at open DF on as well; 0 or -errno (-EMSGSIZE), logged */
int udp_routes_check(struct transport *tp);
int udp_whole_frames(struct transport *tp);

/* udp_rx.c */
int udp_rx_burst(struct transport *tp, struct transport_rx *rx, int n);
void udp_rx_release(struct transport *tp, struct transport_rx *rx, int n);

#endif /* TALLY_DATAPLANE_TRANSPORT_UDP_H */
