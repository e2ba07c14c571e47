// SPDX-License-Identifier: BSD-3-Clause
/*
 * vec.c - the driven vector (a worker's CONFIRM) and the line reader.
 */
#include "vec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataplane/engine/worker.h"

#define VK 8
#define VJOB 0x1234
#define VCOOKIE 0xc001d00du

struct vcap {
	uint16_t to;
	uint8_t *out;
	size_t len;
	uint8_t buf[4][TLY_HDR_LEN + 8 * 64 + 4 * VK];
	unsigned int next;
};

static struct vcap cap;

static uint8_t *v_alloc(void *ctx, size_t len)
{
	(void)ctx;
	if (len > sizeof(cap.buf[0]))
		return NULL;
	return cap.buf[cap.next++ % 4];
}

static void v_send(void *ctx, uint16_t dst, uint8_t *f, size_t len)
{
	(void)ctx;
	if ((f[0] & 0x0f) == TLY_T_CONFIRM && dst == 4 + cap.to &&
	    !cap.len) {
		memcpy(cap.out, f, len);
		cap.len = len;
	}
}

/* a worker of @c with tensor @d submitted and every chunk sent, its
 * CONFIRMs to aggregator @to captured into @out; NULL if it cannot be */
static struct tly_worker *worker_start(const struct tly_worker_cfg *c,
				       const struct tly_tensor_desc *d,
				       uint16_t to, uint8_t *out)
{
	struct tly_worker *w = tly_worker_create(c);

	if (!w)
		return NULL;
	memset(&cap, 0, sizeof(cap));
	cap.to = to;
	cap.out = out;
	if (tly_worker_submit(w, d, 0)) {
		tly_worker_destroy(w);
		return NULL;
	}
	tly_worker_poll(w, 1);		/* every chunk sent */
	return w;
}

/* the RESULT of @chunk (K = @k words of zeros, 4096 slots) to @w */
static void result_in(struct tly_worker *w, uint16_t k, uint16_t rank,
		      uint32_t tensor, uint16_t chunk, uint8_t flags,
		      uint64_t now)
{
	uint8_t f[TLY_HDR_LEN + 4 * 64] = { 0 };
	struct tly_hdr h = {
		.type = TLY_T_RESULT, .flags = flags, .job = VJOB,
		.rank = rank, .tensor = tensor, .chunk = chunk,
		.cookie = VCOOKIE,
	};

	h.slot = (uint16_t)tly_slot_of(tensor, chunk, flags & TLY_F_EXP, 4096);
	tly_hdr_write(f, &h);
	tly_worker_rx(w, f, TLY_HDR_LEN + 4u * k, now);
}

size_t vec_confirm(uint16_t rank, uint16_t n_aggs, uint16_t to,
		   uint32_t tensor, uint32_t n_chunks, const uint16_t *chunks,
		   unsigned int n, const struct vec_foreign *fo,
		   uint8_t *out)
{
	static const uint16_t aggs[4] = { 4, 5, 6, 7 };
	static int32_t x[VK * VEC_MAX_CHUNKS];
	struct tly_worker_cfg c = {
		.job = VJOB, .cookie = VCOOKIE, .k = VK, .n_workers = 4,
		.rank = rank, .n_slots = 4096, .n_aggs = n_aggs,
		.agg_nodes = aggs, .window = 1024, .max_tensors = 1,
		.rto_ns = 1000000, .acked_ns = 1000000, .busy_ns = 1000000,
		.confirm_ns = 10, .confirm_batch = 1000, .cc_off = 1,
		.ops = { .alloc = v_alloc, .send = v_send },
	};
	struct tly_tensor_desc d = {
		.id = tensor, .dtype = TLY_DT_I32, .src = x, .dst = x,
		.count = (size_t)n_chunks * VK,
	};
	struct tly_worker *w;
	unsigned int i;

	if (n_aggs > 4 || to >= n_aggs || n_chunks > VEC_MAX_CHUNKS)
		return 0;
	w = worker_start(&c, &d, to, out);
	if (!w)
		return 0;
	for (i = 0; i < n; i++)
		result_in(w, VK, rank, tensor, chunks[i], TLY_F_INT, 2);
	for (i = 0; i < fo->n2; i++)
		result_in(w, VK, rank, fo->tensor2, fo->chunks2[i],
			  fo->exps2[i] ? TLY_F_EXP : 0, 3);
	tly_worker_poll(w, 100);	/* confirm_ns has passed */
	tly_worker_destroy(w);
	return cap.len;
}

size_t vec_confirm_switch(uint16_t rank, uint32_t tensor, uint32_t n_chunks,
			  const uint16_t *chunks, unsigned int n,
			  uint8_t *out)
{
	static const uint16_t aggs[1] = { 4 };
	static int32_t x[64 * VEC_MAX_CHUNKS];
	struct tly_worker_cfg c = {
		.job = VJOB, .cookie = VCOOKIE, .k = 64, .n_workers = 4,
		.rank = rank, .n_slots = 4096, .n_aggs = 1,
		.agg_nodes = aggs, .window = 1024, .max_tensors = 1,
		.rto_ns = 1000000, .acked_ns = 1000000, .busy_ns = 1000000,
		.cc_off = 1, .profile = TLY_PROFILE_SWITCH,
		.ops = { .alloc = v_alloc, .send = v_send },
	};
	struct tly_tensor_desc d = {
		.id = tensor, .dtype = TLY_DT_I32, .src = x, .dst = x,
		.count = (size_t)n_chunks * 64,
	};
	struct tly_worker *w;
	unsigned int i;

	if (n_chunks > VEC_MAX_CHUNKS)
		return 0;
	w = worker_start(&c, &d, 0, out);
	if (!w)
		return 0;
	for (i = 0; i < n; i++)
		result_in(w, 64, rank, tensor, chunks[i], TLY_F_INT, 2);
	tly_worker_poll(w, 3);		/* the end of a poll: sent */
	tly_worker_destroy(w);
	return cap.len;
}

int vec_parse(const char *text, struct vec_line *l)
{
	char *p, *tok, *save = NULL;

	memset(l, 0, sizeof(*l));
	if (strlen(text) >= sizeof(l->buf))
		return -1;
	strcpy(l->buf, text);
	p = l->buf + strspn(l->buf, " \t");
	if (*p == '#' || *p == '\n' || *p == '\0')
		return 1;
	tok = strtok_r(p, " \t\n", &save);
	if (!tok || strlen(tok) >= sizeof(l->kind))
		return -1;
	strcpy(l->kind, tok);
	while ((tok = strtok_r(NULL, " \t\n", &save))) {
		char *eq = strchr(tok, '=');

		if (!eq || l->n == VEC_MAX_FIELDS ||
		    (size_t)(eq - tok) >= sizeof(l->name[0]))
			return -1;
		memcpy(l->name[l->n], tok, (size_t)(eq - tok));
		l->value[l->n++] = eq + 1;
	}
	return 0;
}

const char *vec_str(const struct vec_line *l, const char *name)
{
	unsigned int i;

	for (i = 0; i < l->n; i++)
		if (!strcmp(l->name[i], name))
			return l->value[i];
	return NULL;
}

uint64_t vec_u64(const struct vec_line *l, const char *name, int *ok)
{
	const char *s = vec_str(l, name);
	char *end;
	uint64_t v;

	if (!s || !*s) {
		*ok = 0;
		return (uint64_t)-1;
	}
	v = strtoull(s, &end, 0);
	if (*end)
		*ok = 0;
	return v;
}

long vec_hex(const struct vec_line *l, const char *name, uint8_t *out,
	     size_t cap)
{
	const char *s = vec_str(l, name);
	size_t n, i;

	if (!s || strlen(s) % 2 || strlen(s) / 2 > cap)
		return -1;
	n = strlen(s) / 2;
	for (i = 0; i < n; i++) {
		unsigned int b;

		if (sscanf(s + 2 * i, "%2x", &b) != 1)
			return -1;
		out[i] = (uint8_t)b;
	}
	return (long)n;
}

long vec_list(const struct vec_line *l, const char *name, uint64_t *out,
	      size_t cap)
{
	const char *s = vec_str(l, name);
	size_t n = 0;
	char *end;

	if (!s)
		return -1;
	while (*s) {
		if (n == cap)
			return -1;
		out[n++] = strtoull(s, &end, 0);
		if (end == s || (*end && *end != ','))
			return -1;
		s = *end ? end + 1 : end;
	}
	return (long)n;
}

void vec_tohex(const uint8_t *p, size_t n, char *s)
{
	size_t i;

	for (i = 0; i < n; i++)
		sprintf(s + 2 * i, "%02x", p[i]);
	s[2 * n] = '\0';
}
