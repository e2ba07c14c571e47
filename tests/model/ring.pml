/*
 * ring.pml - SPIN model of tally's ring all-reduce hops (docs/protocol.md
 * section 6; the code is dataplane/engine/ring.c and worker.c's window and
 * timers).  Companion of agg.pml, same conventions: bags with bounded
 * loss and duplication, timers at ticks taken when nothing else moves.
 *
 * Three ranks all-reduce one int32 tensor of C chunks, chunk c in segment
 * c.  Hop p of chunk c goes from rank (c + p) % 3 to (c + p + 1) % 3:
 * hops 0 and 1 carry the running sum (reduce-scatter), hops 2 and 3 the
 * final value (all-gather).  Every hop is acknowledged (RING_ACK) and
 * retransmitted until it is; a rank that has not submitted the tensor yet
 * refuses (RING_ACK + REFUSE) and the sender defers; a rank that finished
 * the tensor acknowledges (its finished-tensor memory).  Ranks submit
 * the tensor at any time.
 *
 * Abstracted: K = 1 and small integer values (rank r adds VAL(r, c));
 * one RING_ACK per hop (coalescing only batches them); the job key,
 * mismatch checks and the 1024-entry memory (one tensor here).
 *
 * Planted bug (the runner checks that SPIN rejects it):
 *   BUG_NO_RFLAGS  a duplicate reduce-scatter hop is added again
 */

#define N	3		/* ranks */
#ifndef C
#define C	3		/* chunks, one per segment */
#endif
#define H	4		/* hops per chunk: 2 (N - 1) */
#ifndef WINDOW
#define WINDOW	1
#endif
#ifndef LOSS
#define LOSS	1
#endif
#ifndef DUP
#define DUP	0
#endif

#define VAL(r, c)	(1 << (r))	/* distinct: a lost or doubled add shows */
#define TRUE(c)		7

#define C_READY		1
#define C_INFLIGHT	2
#define C_DEFER		4
#define C_DONE		5
#define C_IDLE		6

#define R_RS_IN		1
#define R_AG_IN		2

#define RC(r, c)	((r) * C + (c))
#define NEXT(r)		(((r) + 1) % N)
#define PREV(r)		(((r) + N - 1) % N)

/* rank r -> NEXT(r): RING of chunk c, hop p with value v: bit v */
int ring[N * C * H];
#define RI(r, c, p)	((r) * C * H + (c) * H + (p))
/* NEXT(r) -> r: RING_ACK of chunk c, hop p: bit c * H + p; REFUSE: + 16 */
int ack[N];
#define AB(c, p)	(1 << ((c) * H + (p)))
#define RB(c, p)	(1 << (16 + (c) * H + (p)))

byte loss = LOSS, dup = DUP;

/* per rank */
bit sub[N];			/* the tensor is submitted */
bit finished[N];		/* finished: in the retired memory */
byte inflight[N];
byte unacked[N];		/* ring_unacked */
byte ndone[N];			/* chunks written to dst */
/* per rank and chunk */
byte cst[N * C];
byte hop[N * C];		/* the hop this chunk sends next */
byte rfl[N * C];
byte acc[N * C];
byte dst[N * C];

bit fin;
hidden byte v, rr, cc;

/* -DWITNESS: every marked path is taken (see agg.pml) */
#ifdef WITNESS
hidden int seen;
#define W_REFUSE	0	/* a hop refused: not submitted yet */
#define W_RETIRED	1	/* a hop of a finished tensor ACKed */
#define W_DUP		2	/* a duplicate hop re-ACKed */
#define W_AG_PROOF	3	/* an all-gather hop frees the RS hop's credit */
#define W_DEFER_SENT	4	/* a refused hop sent again */
#define SEEN_ALL	((1 << 5) - 1)
#define SEEN(k)		seen = seen | (1 << (k)); assert(seen != SEEN_ALL)
#else
#define SEEN(k)		skip
#endif

#define put(bag, bits)	bag = (bag) | (bits)

#define VMAX	30

/* ring_setup() at submission */
inline submit(r)
{
	sub[r] = 1;
	cc = 0;
	do
	:: cc < C ->
		hop[RC(r, cc)] = (r + N - cc) % N;
		unacked[r] = unacked[r] + 1 + (hop[RC(r, cc)] + 3 <= N -> 1 : 0);
		if
		:: hop[RC(r, cc)] == 0 -> cst[RC(r, cc)] = C_READY
		:: else -> cst[RC(r, cc)] = C_IDLE
		fi;
		cc++
	:: else -> break
	od;
	skip
}

inline send_hop(r, c)
{
	if
	:: hop[RC(r, c)] == 0 -> acc[RC(r, c)] = VAL(r, c)
	:: else -> skip
	fi;
	put(ring[RI(r, c, hop[RC(r, c)])], 1 << acc[RC(r, c)])
}

inline launch(r, c)
{
	cst[RC(r, c)] = C_INFLIGHT;
	inflight[r]++;
	send_hop(r, c)
}

inline maybe_finish(r)
{
	if
	:: ndone[r] == C && unacked[r] == 0 && !finished[r] ->
		finished[r] = 1
	:: else -> skip
	fi
}

inline hop_acked(r, c)
{
	if
	:: cst[RC(r, c)] == C_INFLIGHT -> inflight[r]--
	:: else -> skip
	fi;
	cst[RC(r, c)] = (hop[RC(r, c)] + 3 <= N -> C_IDLE : C_DONE);
	unacked[r]--
}

/* ring_rx(): rank r receives hop p of chunk c with value v from PREV(r) */
inline rx_ring(r, c, p, v)
{
	if
	:: !sub[r] -> put(ack[PREV(r)], RB(c, p)); SEEN(W_REFUSE)
	:: sub[r] && finished[r] -> put(ack[PREV(r)], AB(c, p));	/* retired */
		SEEN(W_RETIRED)
	:: sub[r] && !finished[r] &&
#ifndef BUG_NO_RFLAGS
	   (rfl[RC(r, c)] & (p < N - 1 -> R_RS_IN : R_AG_IN)) ->
#else
	   (rfl[RC(r, c)] & R_AG_IN) && p >= N - 1 ->
#endif
		put(ack[PREV(r)], AB(c, p));			/* duplicate */
		SEEN(W_DUP)
	:: else ->
		/* an all-gather hop proves our reduce-scatter hop arrived */
		if
		:: p >= N - 1 && hop[RC(r, c)] + N - 1 == p &&
		   (cst[RC(r, c)] == C_INFLIGHT || cst[RC(r, c)] == C_DEFER) ->
			hop_acked(r, c); SEEN(W_AG_PROOF)
		:: else -> skip
		fi;
		rfl[RC(r, c)] = rfl[RC(r, c)] | (p < N - 1 -> R_RS_IN : R_AG_IN);
		if
		:: p >= N - 1 -> acc[RC(r, c)] = v
		:: p < N - 1 && v + VAL(r, c) > VMAX -> acc[RC(r, c)] = VMAX
		:: else -> acc[RC(r, c)] = v + VAL(r, c)
		fi;
		if
		:: p >= N - 2 ->
			dst[RC(r, c)] = acc[RC(r, c)];
			assert(dst[RC(r, c)] == TRUE(c));
			ndone[r]++
		:: else -> skip
		fi;
		put(ack[PREV(r)], AB(c, p));
		if
		:: p + 1 <= 2 * N - 3 ->
			hop[RC(r, c)] = p + 1; cst[RC(r, c)] = C_READY
		:: else -> skip
		fi;
		maybe_finish(r)
	fi
}

/* ring_rx_ack(): rank r gets RING_ACK (refuse or not) of chunk c, hop p */
inline rx_ack(r, c, p, refuse)
{
	if
	:: !sub[r] || finished[r] -> skip			/* stale */
	:: else ->
		if
		:: hop[RC(r, c)] != p || cst[RC(r, c)] != C_INFLIGHT -> skip
		:: else ->
			if
			:: refuse -> inflight[r]--; cst[RC(r, c)] = C_DEFER
			:: else -> hop_acked(r, c)
			fi
		fi;
		maybe_finish(r)
	fi
}

#define RX_RING(c, p) \
	:: d_step { ring[RI(PREV(r), c, p)] != 0 -> \
		v = 0; do :: (ring[RI(PREV(r), c, p)] >> v) & 1 -> break \
			  :: else -> v++ od; \
		ring[RI(PREV(r), c, p)] = ring[RI(PREV(r), c, p)] & ~(1 << v); \
		rx_ring(r, c, p, v) } \
	:: d_step { dup > 0 && ring[RI(PREV(r), c, p)] != 0 -> dup--; \
		v = 0; do :: (ring[RI(PREV(r), c, p)] >> v) & 1 -> break \
			  :: else -> v++ od; \
		rx_ring(r, c, p, v) }
#define RX_ACK(c, p) \
	:: d_step { ack[r] & AB(c, p) -> ack[r] = ack[r] & ~AB(c, p); \
		rx_ack(r, c, p, 0) } \
	:: d_step { dup > 0 && (ack[r] & AB(c, p)) -> dup--; \
		rx_ack(r, c, p, 0) } \
	:: d_step { ack[r] & RB(c, p) -> ack[r] = ack[r] & ~RB(c, p); \
		rx_ack(r, c, p, 1) } \
	:: d_step { dup > 0 && (ack[r] & RB(c, p)) -> dup--; \
		rx_ack(r, c, p, 1) }
#define LAUNCH(c) \
	:: d_step { sub[r] && !finished[r] && inflight[r] < WINDOW && \
		    cst[RC(r, c)] == C_READY -> launch(r, c) }
#define RX_C(c) \
	RX_RING(c, 0) RX_RING(c, 1) RX_RING(c, 2) RX_RING(c, 3) \
	RX_ACK(c, 0) RX_ACK(c, 1) RX_ACK(c, 2) RX_ACK(c, 3) LAUNCH(c)

proctype rank(byte r)
{
end:
	do
	:: d_step { !sub[r] -> submit(r) }
	RX_C(0)
#if C > 1
	RX_C(1)
#endif
#if C > 2
	RX_C(2)
#endif
	od
}

/* losses: any packet in flight */
#define LOSE_RING(r, c, p) \
	:: d_step { loss > 0 && ring[RI(r, c, p)] != 0 -> loss--; \
		v = 0; do :: (ring[RI(r, c, p)] >> v) & 1 -> break \
			  :: else -> v++ od; \
		ring[RI(r, c, p)] = ring[RI(r, c, p)] & ~(1 << v) }
#define LOSE_ACK(r, c, p) \
	:: d_step { loss > 0 && (ack[r] & AB(c, p)) -> loss--; \
		ack[r] = ack[r] & ~AB(c, p) } \
	:: d_step { loss > 0 && (ack[r] & RB(c, p)) -> loss--; \
		ack[r] = ack[r] & ~RB(c, p) }
#define LOSE_RC(r, c) \
	LOSE_RING(r, c, 0) LOSE_RING(r, c, 1) LOSE_RING(r, c, 2) \
	LOSE_RING(r, c, 3) LOSE_ACK(r, c, 0) LOSE_ACK(r, c, 1) \
	LOSE_ACK(r, c, 2) LOSE_ACK(r, c, 3)
#if C > 2
#define LOSE_R(r)	LOSE_RC(r, 0) LOSE_RC(r, 1) LOSE_RC(r, 2)
#elif C > 1
#define LOSE_R(r)	LOSE_RC(r, 0) LOSE_RC(r, 1)
#else
#define LOSE_R(r)	LOSE_RC(r, 0)
#endif

active proctype net()
{
end:
	do
	LOSE_R(0)
	LOSE_R(1)
	LOSE_R(2)
	od
}

/* a tick: every rank's tly_worker_poll(): retransmit INFLIGHT hops, then
 * deferred ones with credit no ready chunk wants */
inline tick()
{
	rr = 0;
	do
	:: rr < N ->
		cc = 0;
		do
		:: cc < C ->
			if
			:: cst[RC(rr, cc)] == C_INFLIGHT -> send_hop(rr, cc)
			:: else -> skip
			fi;
			cc++
		:: else -> break
		od;
		cc = 0;
		do
		:: cc < C ->
			if
			:: cst[RC(rr, cc)] == C_DEFER && inflight[rr] < WINDOW ->
				launch(rr, cc); SEEN(W_DEFER_SENT)
			:: else -> skip
			fi;
			cc++
		:: else -> break
		od;
		rr++
	:: else -> break
	od;
	skip
}

#define ALLFIN	(finished[0] && finished[1] && finished[2])

inline check_final()
{
	rr = 0;
	do
	:: rr < N * C -> assert(dst[rr] == TRUE(0)); rr++
	:: else -> break
	od;
	skip
}

active proctype clock()
{
end:
	do
	:: d_step { timeout && !ALLFIN -> tick() }
	:: d_step { timeout && ALLFIN -> check_final(); fin = 1 }
	:: fin -> break
	od
}

init
{
	atomic {
		run rank(0);
		run rank(1);
		run rank(2)
	}
}

/* every rank finishes the tensor with every chunk's sum */
ltl terminates { <> fin }
