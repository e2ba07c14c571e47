// SPDX-License-Identifier: BSD-3-Clause
/*
 * rdma.c - the verbs transport: one UD queue pair per daemon, bare tally
 * packets (header + payload, as over kernel UDP) as SEND messages.
 * RoCEv2 and InfiniBand through rdma-core; tested on soft-RoCE (rxe).
 *
 * Why UD SEND (see docs/protocol.md, "RDMA"): the protocol recovers loss
 * itself (retransmission, duplicate and reorder tolerant), so a reliable
 * queue pair would only add a second, conflicting recovery and one QP per
 * peer; one UD QP serves every peer through an address handle each.
 *
 * Addressing: a peer is (GID or LID, QPN, Q_Key).  The GID of a RoCEv2
 * port with an IPv4 address is ::ffff:a.b.c.d, so the roster's IPv4 gives
 * it; LID and QPN travel in the roster's 6-byte hardware address, unused
 * by bare-packet transports: 02:LL:LL:QQ:QQ:QQ (see rdma_addr_encode).
 * The Q_Key is fixed (RDMA_QKEY).
 *
 * Memory: one slab registered as one memory region holds the receive
 * buffers (each with the 40-byte GRH space UD receives start with) and
 * the transmit buffers the engine builds packets in.
 * tx: free list -> FIFO -> ibv_post_send in chains while the send queue
 * has room; signalled completions return buffers (back-pressure, never a
 * silent drop).  rx: RDMA_RX_BUFS receives stay posted; a buffer is
 * posted again when the consumer releases it.  Completions of the
 * receive queue arm a completion channel whose fd is wait_fd.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "dataplane/dp_log.h"
#include "dataplane/transport/transport.h"

#define RDMA_TX_BUFS	1024
#define RDMA_RX_BUFS	4096	/* the burst a peer may send unread */
#define RDMA_SQ_DEPTH	256
#define RDMA_POST_BATCH	32
#define RDMA_GRH	40
#define RDMA_QKEY	0x74616c79u	/* "taly"; high bit clear */
#define RDMA_MAX_AH	(2 * TRANSPORT_MAX_NODES)
#define RDMA_ERR_LOGS	8		/* per kind, then only counted */

struct rdma_txq_ent {
	uint32_t buf;
	uint32_t len;
	uint16_t dst;
};

struct rdma_ah_ent {
	uint32_t ip;
	uint16_t lid;
	struct ibv_ah *ah;
};

struct rdma_peer {
	struct ibv_ah *ah;		/* NULL: unreachable, frames dropped */
	uint32_t qpn;
};

struct rdma_priv {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *scq, *rcq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *slab;
	uint32_t buf_size;		/* tx buffer: the largest frame */
	uint32_t rx_size;		/* GRH + largest frame */
	uint8_t port;
	int gid_index;
	bool roce;
	uint16_t lid;
	uint32_t self_ip;
	bool armed;
	unsigned int err_logs;
	/* tx */
	uint8_t *tx_base;
	uint32_t *tx_free;
	uint32_t n_tx_free;
	struct rdma_txq_ent txq[RDMA_TX_BUFS];
	uint32_t txq_head, txq_n;
	uint32_t sq_out;		/* posted, completion not yet seen */
	/* rx */
	uint8_t *rx_base;
	/* peers */
	struct rdma_peer peers[TRANSPORT_MAX_NODES];
	struct rdma_ah_ent ahs[RDMA_MAX_AH];
	uint32_t n_ahs;
};

void rdma_addr_encode(uint8_t mac[6], uint16_t lid, uint32_t qpn);
bool rdma_addr_decode(const uint8_t mac[6], uint16_t *lid, uint32_t *qpn);

/* 02:LL:LL:QQ:QQ:QQ - locally administered unicast, LID and QPN */
void rdma_addr_encode(uint8_t mac[6], uint16_t lid, uint32_t qpn)
{
	mac[0] = 0x02;
	mac[1] = (uint8_t)(lid >> 8);
	mac[2] = (uint8_t)lid;
	mac[3] = (uint8_t)(qpn >> 16);
	mac[4] = (uint8_t)(qpn >> 8);
	mac[5] = (uint8_t)qpn;
}

bool rdma_addr_decode(const uint8_t mac[6], uint16_t *lid, uint32_t *qpn)
{
	*lid = (uint16_t)(mac[1] << 8 | mac[2]);
	*qpn = (uint32_t)mac[3] << 16 | (uint32_t)mac[4] << 8 | mac[5];
	return mac[0] == 0x02 && *qpn != 0;
}

static void rdma_verr(struct transport *tp, const char *call, int err)
{
	struct rdma_priv *r = tp->priv;

	if (r && r->err_logs++ >= RDMA_ERR_LOGS)
		return;
	dp_err("transport rdma: %s failed: %s", call,
		strerror(err));
}

static void rdma_wc_err(struct transport *tp, const char *what,
			const struct ibv_wc *wc)
{
	struct rdma_priv *r = tp->priv;

	if (r->err_logs++ >= RDMA_ERR_LOGS)
		return;
	dp_err("transport rdma: ibv_poll_cq (%s) wr %llu: %s (vendor 0x%x)",
		what, (unsigned long long)wc->wr_id,
		ibv_wc_status_str(wc->status), wc->vendor_err);
}

static void gid_from_ip(union ibv_gid *g, uint32_t ip)
{
	memset(g, 0, sizeof(*g));
	g->raw[10] = 0xff;
	g->raw[11] = 0xff;
	tly_put32(g->raw + 12, ip);
}

static void rdma_close(struct transport *tp)
{
	struct rdma_priv *r = tp->priv;
	uint32_t i;

	if (!r)
		return;
	if (r->qp)
		ibv_destroy_qp(r->qp);
	for (i = 0; i < r->n_ahs; i++)
		ibv_destroy_ah(r->ahs[i].ah);
	if (r->mr)
		ibv_dereg_mr(r->mr);
	if (r->scq)
		ibv_destroy_cq(r->scq);
	if (r->rcq) {
		if (r->ch) {	/* events not yet acknowledged block destroy */
			struct ibv_cq *cq;
			void *cctx;
			unsigned int n = 0;

			while (!ibv_get_cq_event(r->ch, &cq, &cctx))
				n++;
			if (n)
				ibv_ack_cq_events(r->rcq, n);
		}
		ibv_destroy_cq(r->rcq);
	}
	if (r->ch)
		ibv_destroy_comp_channel(r->ch);
	if (r->pd)
		ibv_dealloc_pd(r->pd);
	if (r->ctx)
		ibv_close_device(r->ctx);
	free(r->slab);
	free(r->tx_free);
	free(r);
	tp->priv = NULL;
}

static struct ibv_context *open_device(const char *name)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	int n, i;

	list = ibv_get_device_list(&n);
	if (!list) {
		dp_err("transport rdma: ibv_get_device_list failed: %s",
			strerror(errno));
		return NULL;
	}
	for (i = 0; i < n; i++) {
		if (name && name[0] &&
		    strcmp(ibv_get_device_name(list[i]), name))
			continue;
		ctx = ibv_open_device(list[i]);
		if (!ctx)
			dp_err("transport rdma: ibv_open_device(%s) failed: %s",
				ibv_get_device_name(list[i]), strerror(errno));
		break;
	}
	if (i == n)
		dp_err("transport rdma: no verbs device%s%s (%d found)",
			name && name[0] ? " named " : "",
			name && name[0] ? name : "", n);
	ibv_free_device_list(list);
	return ctx;
}

static int post_recv(struct transport *tp, uint32_t buf)
{
	struct rdma_priv *r = tp->priv;
	struct ibv_sge sge = {
		.addr = (uintptr_t)(r->rx_base + (size_t)buf * r->rx_size),
		.length = r->rx_size,
		.lkey = r->mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = buf, .sg_list = &sge,
				  .num_sge = 1 }, *bad;
	int err = ibv_post_recv(r->qp, &wr, &bad);

	if (err)
		rdma_verr(tp, "ibv_post_recv", err);
	return -err;
}

static int qp_up(struct transport *tp)
{
	struct rdma_priv *r = tp->priv;
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = r->port,
		.qkey = RDMA_QKEY,
	};
	int err;

	err = ibv_modify_qp(r->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			    IBV_QP_PORT | IBV_QP_QKEY);
	if (err) {
		rdma_verr(tp, "ibv_modify_qp(INIT)", err);
		return -err;
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	err = ibv_modify_qp(r->qp, &a, IBV_QP_STATE);
	if (err) {
		rdma_verr(tp, "ibv_modify_qp(RTR)", err);
		return -err;
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	err = ibv_modify_qp(r->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
	if (err) {
		rdma_verr(tp, "ibv_modify_qp(RTS)", err);
		return -err;
	}
	return 0;
}

static struct ibv_ah *ah_get(struct transport *tp, uint32_t ip, uint16_t lid)
{
	struct rdma_priv *r = tp->priv;
	struct ibv_ah_attr a = { .port_num = r->port };
	struct ibv_ah *ah;
	uint32_t i;

	if (r->roce)
		lid = 0;
	else
		ip = 0;
	/* kept until close: sends still in the queue may use them */
	for (i = 0; i < r->n_ahs; i++)
		if (r->ahs[i].ip == ip && r->ahs[i].lid == lid)
			return r->ahs[i].ah;
	if (r->n_ahs == RDMA_MAX_AH) {
		dp_err("transport rdma: more than %d peer addresses",
			RDMA_MAX_AH);
		return NULL;
	}
	if (r->roce) {
		a.is_global = 1;
		gid_from_ip(&a.grh.dgid, ip);
		a.grh.sgid_index = (uint8_t)r->gid_index;
		a.grh.hop_limit = 64;
	} else {
		a.dlid = lid;
	}
	ah = ibv_create_ah(r->pd, &a);
	if (!ah) {
		rdma_verr(tp, "ibv_create_ah", errno);
		return NULL;
	}
	r->ahs[r->n_ahs++] = (struct rdma_ah_ent){ ip, lid, ah };
	return ah;
}

static int rdma_set_nodes(struct transport *tp)
{
	const struct transport_config *cfg = &tp->cfg;
	struct rdma_priv *r = tp->priv;
	struct rdma_peer peers[TRANSPORT_MAX_NODES] = { 0 };
	uint16_t lid;
	uint32_t qpn, i, missing = 0;

	if (cfg->addrs[cfg->self].ip != r->self_ip) {
		dp_err("transport rdma: our address changed: reopen the transport");
		return -EADDRNOTAVAIL;
	}
	for (i = 0; i < cfg->n_nodes; i++) {
		if (i == cfg->self) {
			lid = r->lid;
			qpn = r->qp->qp_num;
		} else if (!rdma_addr_decode(cfg->addrs[i].mac, &lid, &qpn)) {
			missing++;
			continue;	/* frames to it are dropped */
		}
		peers[i].ah = ah_get(tp, cfg->addrs[i].ip, lid);
		if (!peers[i].ah)
			return -ENOMEM;
		peers[i].qpn = qpn;
	}
	if (missing)
		dp_err("transport rdma: %u of %u nodes have no verbs address (not on the rdma transport?): frames to them are dropped",
			missing, cfg->n_nodes);
	memcpy(r->peers, peers, sizeof(peers));
	return 0;
}

static int port_setup(struct transport *tp, const struct transport_config *cfg)
{
	struct rdma_priv *r = tp->priv;
	struct ibv_port_attr pa;
	union ibv_gid gid, want;
	uint32_t ip = cfg->addrs[cfg->self].ip;
	uint32_t pkt = cfg->mtu - TLY_L2L4_LEN;
	int err;

	err = ibv_query_port(r->ctx, r->port, &pa);
	if (err) {
		rdma_verr(tp, "ibv_query_port", err);
		return -err;
	}
	if (pa.state != IBV_PORT_ACTIVE)
		dp_err("transport rdma: %s port %u is %s, not active",
			ibv_get_device_name(r->ctx->device), r->port,
			ibv_port_state_str(pa.state));
	if ((size_t)(128u << pa.active_mtu) < pkt) {
		dp_err("transport rdma: packets of %u bytes exceed %s's active MTU %u (raise the netdev's MTU, or lower k)",
			pkt, ibv_get_device_name(r->ctx->device),
			128u << pa.active_mtu);
		return -EMSGSIZE;
	}
	r->roce = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
	r->lid = pa.lid;
	if (!r->roce)
		return 0;
	err = ibv_query_gid(r->ctx, r->port, r->gid_index, &gid);
	if (err) {
		rdma_verr(tp, "ibv_query_gid", err);
		return -err;
	}
	gid_from_ip(&want, ip);
	if (memcmp(&gid, &want, sizeof(gid))) {
		char s[INET6_ADDRSTRLEN] = "?";

		inet_ntop(AF_INET6, gid.raw, s, sizeof(s));
		dp_err("transport rdma: GID %d of %s port %u is %s, not this daemon's address %u.%u.%u.%u mapped (::ffff:a.b.c.d): set dataplane.address to the RoCE interface's IPv4, and rdma_gid_index to its RoCEv2 GID (ibv_devinfo -v, show_gids)",
			r->gid_index, ibv_get_device_name(r->ctx->device),
			r->port, s, ip >> 24, (ip >> 16) & 0xff,
			(ip >> 8) & 0xff, ip & 0xff);
		return -EADDRNOTAVAIL;
	}
	return 0;
}

static int rdma_open(struct transport *tp, const struct transport_config *cfg)
{
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_UD,
		.sq_sig_all = 1,
		.cap = {
			.max_send_wr = RDMA_SQ_DEPTH,
			.max_recv_wr = RDMA_RX_BUFS,
			.max_send_sge = 1,
			.max_recv_sge = 1,
		},
	};
	struct rdma_priv *r;
	size_t rx_len, tx_len;
	uint32_t i;
	int err, fl;

	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	tp->priv = r;
	tp->full_frames = false;
	r->port = cfg->rdma_port ? cfg->rdma_port : 1;
	r->gid_index = cfg->rdma_gid_index;
	r->self_ip = cfg->addrs[cfg->self].ip;
	/* bare packets: the frame size less the Ethernet/IP/UDP headers */
	r->buf_size = cfg->mtu;
	r->rx_size = RDMA_GRH + cfg->mtu;
	rx_len = (size_t)RDMA_RX_BUFS * r->rx_size;
	tx_len = (size_t)RDMA_TX_BUFS * r->buf_size;
	r->slab = calloc(1, rx_len + tx_len);
	r->tx_free = calloc(RDMA_TX_BUFS, sizeof(*r->tx_free));
	if (!r->slab || !r->tx_free) {
		rdma_close(tp);
		return -ENOMEM;
	}
	r->rx_base = r->slab;
	r->tx_base = r->slab + rx_len;
	for (i = 0; i < RDMA_TX_BUFS; i++)
		r->tx_free[i] = RDMA_TX_BUFS - 1 - i;
	r->n_tx_free = RDMA_TX_BUFS;

	r->ctx = open_device(cfg->rdma_device);
	if (!r->ctx) {
		rdma_close(tp);
		return -ENODEV;
	}
	err = port_setup(tp, cfg);
	if (err) {
		rdma_close(tp);
		return err;
	}
	r->pd = ibv_alloc_pd(r->ctx);
	if (!r->pd) {
		rdma_verr(tp, "ibv_alloc_pd", errno);
		goto fail;
	}
	r->mr = ibv_reg_mr(r->pd, r->slab, rx_len + tx_len,
			   IBV_ACCESS_LOCAL_WRITE);
	if (!r->mr) {
		rdma_verr(tp, "ibv_reg_mr", errno);
		goto fail;
	}
	r->ch = ibv_create_comp_channel(r->ctx);
	if (!r->ch) {
		rdma_verr(tp, "ibv_create_comp_channel", errno);
		goto fail;
	}
	fl = fcntl(r->ch->fd, F_GETFL);
	if (fl < 0 || fcntl(r->ch->fd, F_SETFL, fl | O_NONBLOCK)) {
		rdma_verr(tp, "fcntl(comp channel, O_NONBLOCK)", errno);
		goto fail;
	}
	r->scq = ibv_create_cq(r->ctx, RDMA_SQ_DEPTH, NULL, NULL, 0);
	r->rcq = ibv_create_cq(r->ctx, RDMA_RX_BUFS, NULL, r->ch, 0);
	if (!r->scq || !r->rcq) {
		rdma_verr(tp, "ibv_create_cq", errno);
		goto fail;
	}
	qa.send_cq = r->scq;
	qa.recv_cq = r->rcq;
	r->qp = ibv_create_qp(r->pd, &qa);
	if (!r->qp) {
		rdma_verr(tp, "ibv_create_qp(UD)", errno);
		goto fail;
	}
	err = qp_up(tp);
	if (err)
		goto fail_err;
	for (i = 0; i < RDMA_RX_BUFS; i++) {
		err = post_recv(tp, i);
		if (err)
			goto fail_err;
	}
	err = ibv_req_notify_cq(r->rcq, 0);
	if (err) {
		rdma_verr(tp, "ibv_req_notify_cq", err);
		err = -err;
		goto fail_err;
	}
	r->armed = true;
	rdma_addr_encode(tp->local_mac, r->lid, r->qp->qp_num);
	tp->has_local_mac = true;
	err = rdma_set_nodes(tp);
	if (err)
		goto fail_err;
	return 0;
fail:
	err = errno ? -errno : -EIO;
fail_err:
	rdma_close(tp);
	return err;
}

static uint32_t reap_send(struct transport *tp)
{
	struct rdma_priv *r = tp->priv;
	struct ibv_wc wc[RDMA_POST_BATCH];
	uint32_t done = 0;
	int n, i;

	while (r->sq_out) {
		n = ibv_poll_cq(r->scq, RDMA_POST_BATCH, wc);
		if (n < 0) {
			rdma_verr(tp, "ibv_poll_cq(send)", EIO);
			break;
		}
		for (i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				rdma_wc_err(tp, "send", &wc[i]);
				tp->stats.tx_drops++;
			}
			r->tx_free[r->n_tx_free++] = (uint32_t)wc[i].wr_id;
			r->sq_out--;
		}
		done += (uint32_t)n;
		if (n < RDMA_POST_BATCH)
			break;
	}
	return done;
}

static uint8_t *rdma_tx_alloc(struct transport *tp, size_t len)
{
	struct rdma_priv *r = tp->priv;

	if (len > r->buf_size)
		return NULL;
	if (!r->n_tx_free)
		reap_send(tp);
	if (!r->n_tx_free)
		return NULL;
	return r->tx_base + (size_t)r->tx_free[--r->n_tx_free] * r->buf_size;
}

static void rdma_tx_send(struct transport *tp, uint16_t dst, uint8_t *frame,
			 size_t len)
{
	struct rdma_priv *r = tp->priv;
	uint32_t buf = (uint32_t)((size_t)(frame - r->tx_base) / r->buf_size);
	struct rdma_txq_ent *e;

	if (dst >= tp->cfg.n_nodes || !r->peers[dst].ah) {
		tp->stats.tx_drops++;
		r->tx_free[r->n_tx_free++] = buf;
		return;
	}
	e = &r->txq[(r->txq_head + r->txq_n++) % RDMA_TX_BUFS];
	e->buf = buf;
	e->len = (uint32_t)len;
	e->dst = dst;
}

static int rdma_tx_flush(struct transport *tp)
{
	struct rdma_priv *r = tp->priv;
	struct ibv_send_wr wr[RDMA_POST_BATCH], *bad;
	struct ibv_sge sge[RDMA_POST_BATCH];
	int sent = 0, n, i, err;

	reap_send(tp);
	while (r->txq_n && r->sq_out < RDMA_SQ_DEPTH) {
		n = (int)r->txq_n;
		if (n > RDMA_POST_BATCH)
			n = RDMA_POST_BATCH;
		if ((uint32_t)n > RDMA_SQ_DEPTH - r->sq_out)
			n = (int)(RDMA_SQ_DEPTH - r->sq_out);
		for (i = 0; i < n; i++) {
			struct rdma_txq_ent *e =
				&r->txq[(r->txq_head + i) % RDMA_TX_BUFS];
			struct rdma_peer *p = &r->peers[e->dst];

			sge[i] = (struct ibv_sge){
				.addr = (uintptr_t)(r->tx_base +
					(size_t)e->buf * r->buf_size),
				.length = e->len,
				.lkey = r->mr->lkey,
			};
			memset(&wr[i], 0, sizeof(wr[i]));
			wr[i].wr_id = e->buf;
			wr[i].sg_list = &sge[i];
			wr[i].num_sge = 1;
			wr[i].opcode = IBV_WR_SEND;
			wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
			if (p->ah) {
				wr[i].wr.ud.ah = p->ah;
				wr[i].wr.ud.remote_qpn = p->qpn;
				wr[i].wr.ud.remote_qkey = RDMA_QKEY;
			}
		}
		/* a node gone since tx_send (new roster): drop its frames */
		for (i = 0; i < n; i++)
			if (!wr[i].wr.ud.ah)
				break;
		if (i == 0) {
			tp->stats.tx_drops++;
			r->tx_free[r->n_tx_free++] = r->txq[r->txq_head].buf;
			r->txq_head = (r->txq_head + 1) % RDMA_TX_BUFS;
			r->txq_n--;
			continue;
		}
		n = i;
		wr[n - 1].next = NULL;
		bad = NULL;
		err = ibv_post_send(r->qp, wr, &bad);
		if (err) {
			rdma_verr(tp, "ibv_post_send", err);
			n = bad ? (int)(bad - wr) : 0;
		}
		for (i = 0; i < n; i++) {
			tp->stats.tx_pkts++;
			tp->stats.tx_bytes += sge[i].length;
			r->txq_head = (r->txq_head + 1) % RDMA_TX_BUFS;
			r->txq_n--;
		}
		r->sq_out += (uint32_t)n;
		sent += n;
		if (err)
			break;	/* the rest stay queued: retried later */
	}
	return sent;
}

static int rdma_rx_burst(struct transport *tp, struct transport_rx *rx, int n)
{
	struct rdma_priv *r = tp->priv;
	struct ibv_wc wc[TRANSPORT_RX_BURST];
	struct ibv_cq *cq;
	void *cctx;
	unsigned int events = 0;
	int got, i, k = 0, err;

	if (n > TRANSPORT_RX_BURST)
		n = TRANSPORT_RX_BURST;
	while (!ibv_get_cq_event(r->ch, &cq, &cctx))
		events++;
	if (events) {
		ibv_ack_cq_events(r->rcq, events);
		r->armed = false;
	}
	got = ibv_poll_cq(r->rcq, n, wc);
	if (got < 0) {
		rdma_verr(tp, "ibv_poll_cq(recv)", EIO);
		got = 0;
	}
	if (!r->armed) {
		err = ibv_req_notify_cq(r->rcq, 0);
		if (err) {
			rdma_verr(tp, "ibv_req_notify_cq", err);
		} else {
			int more;

			r->armed = true;
			/* what arrived before the arm raises no event */
			more = got < n ? ibv_poll_cq(r->rcq, n - got,
						     wc + got) : 0;
			if (more > 0)
				got += more;
		}
	}
	for (i = 0; i < got; i++) {
		uint32_t b = (uint32_t)wc[i].wr_id;

		if (wc[i].status != IBV_WC_SUCCESS ||
		    wc[i].byte_len < RDMA_GRH) {
			if (wc[i].status != IBV_WC_SUCCESS)
				rdma_wc_err(tp, "recv", &wc[i]);
			tp->stats.rx_drops++;
			post_recv(tp, b);
			continue;
		}
		rx[k].data = r->rx_base + (size_t)b * r->rx_size + RDMA_GRH;
		rx[k].len = wc[i].byte_len - RDMA_GRH;
		rx[k].cookie = (void *)(uintptr_t)b;
		tp->stats.rx_pkts++;
		tp->stats.rx_bytes += rx[k].len;
		k++;
	}
	return k;
}

static void rdma_rx_release(struct transport *tp, struct transport_rx *rx,
			    int n)
{
	int i;

	for (i = 0; i < n; i++)
		post_recv(tp, (uint32_t)(uintptr_t)rx[i].cookie);
}

static int rdma_wait_fd(struct transport *tp)
{
	return ((struct rdma_priv *)tp->priv)->ch->fd;
}

static int rdma_tx_pending(struct transport *tp)
{
	return (int)((struct rdma_priv *)tp->priv)->txq_n;
}

const struct transport_ops transport_rdma_ops = {
	.name = "rdma",
	.open = rdma_open,
	.close = rdma_close,
	.tx_alloc = rdma_tx_alloc,
	.tx_send = rdma_tx_send,
	.tx_flush = rdma_tx_flush,
	.rx_burst = rdma_rx_burst,
	.rx_release = rdma_rx_release,
	.wait_fd = rdma_wait_fd,
	.tx_pending = rdma_tx_pending,
	.set_nodes = rdma_set_nodes,
};
