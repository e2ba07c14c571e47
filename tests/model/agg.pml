/*
 * agg.pml - SPIN model of tally's aggregation protocol (docs/protocol.md,
 * sections 3 and 4; the code is dataplane/engine/agg.c and worker.c).
 *
 * Three workers all-reduce two tensors through one aggregator whose pool
 * has fewer entries than there are chunks:
 *   chunk 0  the exponent group of float tensor A (combined by max)
 *   chunk 1  tensor A's data chunk: waits for chunk 0's RESULT (C_WAIT)
 *   chunk 2  the chunk of int32 tensor B (no exponent round)
 * Every chunk hashes to primary slot 0 (NS = 1) and to fallback entry 0
 * (NF = 1), so chunks of both tensors reuse the same entries.
 *
 * The network is a bag per direction: any message in flight may be
 * delivered at any time (reordering, unbounded delay until the next timer
 * tick), lost (at most LOSS times in all), or delivered while a copy stays
 * in flight (duplication, at most DUP times).  Identical messages in
 * flight merge (a bag of sets): a second copy is what DUP provides.
 *
 * Time is abstract.  Timers fire at a tick, which the clock takes only
 * when nothing else can move (SPIN's timeout: every packet in flight has
 * been delivered or lost), so a tick fires every due timer of every
 * worker and the aggregator's probes at once; EARLY lets a worker fire a
 * retransmission timer before its packet was answered (a premature
 * timeout), at most EARLY times.  An AGG entry may be evicted once it has
 * seen no new contribution for EVICT_TICKS ticks (evict_ns).
 *
 * Values: worker w contributes VAL(w, c) to chunk c; the expected result
 * is TRUE(c) (sum, or max for the exponent group).  The values are chosen
 * so that a missing, doubled or foreign contribution changes the result.
 *
 * Planted bugs (the runner checks that SPIN rejects each):
 *   BUG_NO_BITMAP   the aggregator adds a contribution whose bit is set
 *   BUG_EARLY_FREE  a DONE entry is freed on the first receipt
 *   BUG_NO_KEYCHECK the primary slot takes any chunk's contribution
 *   BUG_ACK_NO_CREDIT  ACK does not free the window's credit
 */

#define N	3		/* workers */
#define C	3		/* chunk keys */
#ifndef NS
#define NS	1		/* primary slots */
#endif
#ifndef NF
#define NF	1		/* fallback entries */
#endif
#define E	(NS + NF)
#ifndef WINDOW
#define WINDOW	1		/* packets in flight per worker */
#endif
/* fault budgets; the defaults are the runner's "loss" search */
#ifndef LOSS
#define LOSS	1		/* packets lost, in all */
#endif
#ifndef DUP
#define DUP	0		/* packets duplicated, in all */
#endif
#ifndef EARLY
#define EARLY	0		/* premature retransmission timeouts */
#endif
#ifndef EVICT_TICKS
#define EVICT_TICKS	0	/* evict_ns in ticks; 0: never evict */
#endif

#define EXPC	0		/* the exponent group's chunk key */

/* contributions and the results they must give */
#define VAL(w, c) \
	((c) == 0 -> ((w) == 0 -> 2 : ((w) == 1 -> 0 : 1)) : \
	 ((c) == 1 -> (1 << (w)) : ((w) == 0 -> 3 : ((w) == 1 -> 5 : 6))))
#define TRUE(c)	((c) == 0 -> 2 : ((c) == 1 -> 7 : 14))
#define VMAX	30		/* sums saturate here (only a bug gets there) */

/* hashing: primary slot and fallback base of a chunk */
#define PRIM(c)	((c) % NS)
#define FBB(c)	((c) % NF)
#define FBI(c, i)	(NS + (FBB(c) + (i)) % NF)

/* worker chunk states (worker_internal.h) */
#define C_WAIT		0
#define C_READY		1
#define C_INFLIGHT	2
#define C_ACKED		3
#define C_DEFER		4
#define C_DONE		5

/* aggregator entry states (agg.c) */
#define S_FREE	0
#define S_AGG	1
#define S_DONE	2

#define WC(w, c)	((w) * C + (c))
#define ALL	((1 << N) - 1)

/* ---- the network ---- */

/* worker -> aggregator: DATA (r = 1: RETX + ACK_REQ) and CONFIRM */
#define B_DATA(w, c, r)	(1 << (WC(w, c) * 2 + (r)))
#define B_CONF(w, c)	(1 << (2 * N * C + WC(w, c)))
int toagg;
/* aggregator -> worker w: ACK(c) bit c, BUSY(c) bit 4 + c */
byte toworker[N];
/* aggregator -> worker w: RESULT of chunk c with value v: bit v */
int resbag[N * C];

byte loss = LOSS, dup = DUP, early = EARLY;

/* a sent packet is in flight (the net process may lose it there) */
#define put(bag, bits)	bag = bag | (bits)

/* ---- worker state ---- */
byte cst[N * C];		/* chunk state */
byte res[N * C];		/* the result placed */
byte inflight[N];

/* ---- aggregator state ---- */
byte st[E];			/* S_FREE / S_AGG / S_DONE */
byte key[E];			/* the chunk held */
byte contrib[E];		/* bitmap of contributors */
byte conf[E];			/* DONE: bitmap of receipts */
byte sum[E];
byte cnt[E];			/* contributions added (count) */
byte idle[E];			/* AGG: ticks without a new contribution */
byte tomb[E];			/* last chunk completed and freed, plus 1 */

bit fin;			/* every result placed and checked */

/* scratch of one step, not part of the state */
hidden byte idx, i, j, rep, v, ww, cc;

/*
 * -DWITNESS: a check that the model is not vacuous.  Each path below is
 * marked when the search takes it (seen is hidden: not part of the state,
 * so it accumulates over the whole search); once every one has been taken
 * the assertion fails, which the runner requires.  A search that ends
 * without that error left some path unreached.
 */
#ifdef WITNESS
hidden int seen;
#define W_BUSY_SENT	0	/* BUSY */
#define W_FB_CLAIM	1	/* a fallback entry claimed */
#define W_STALE		2	/* a stray dropped by a tombstone */
#define W_REUSE		3	/* an entry reused by the other tensor */
#define W_EVICT		4	/* an idle partial evicted */
#define W_DEFER_SENT	5	/* a refused chunk sent again */
#define W_PROBE		6	/* RESULT again to an unconfirmed worker */
#define W_RECONFIRM	7	/* a worker confirms a RESULT it has */
#define W_ACK_SENT	8	/* ACK */
#define W_RESULT_AGAIN	9	/* DATA of a DONE entry gets the RESULT */
#define SEEN_ALL	((1 << 10) - 1)
#define SEEN(k)		seen = seen | (1 << (k)); assert(seen != SEEN_ALL)
#else
#define SEEN(k)		skip
#endif

#define WDONE(w)	(cst[WC(w, 0)] == C_DONE && cst[WC(w, 1)] == C_DONE && \
			 cst[WC(w, 2)] == C_DONE)
#define ALLDONE		(WDONE(0) && WDONE(1) && WDONE(2))
#define NO_DONE_SLOT	(st[0] != S_DONE && st[(E > 1 -> 1 : 0)] != S_DONE && \
			 st[E - 1] != S_DONE)	/* E <= 3 */
#define FRESH(w)	(cst[WC(w, 0)] == C_READY || cst[WC(w, 1)] == C_READY || \
			 cst[WC(w, 2)] == C_READY)

/* ---- the aggregator (agg.c) ---- */

/* the entry holding chunk c: primary slot, then the fallback store */
inline find(c, idx)
{
	idx = E;
	if
	:: st[PRIM(c)] != S_FREE && key[PRIM(c)] == c -> idx = PRIM(c)
	:: else ->
		i = 0;
		do
		:: i < NF && st[FBI(c, i)] != S_FREE && key[FBI(c, i)] == c ->
			idx = FBI(c, i); break
		:: i < NF && !(st[FBI(c, i)] != S_FREE && key[FBI(c, i)] == c) ->
			i++
		:: i >= NF -> break
		od
	fi
}

#if EVICT_TICKS > 0
#define EVICTABLE(j)	(st[j] == S_FREE || (st[j] == S_AGG && idle[j] >= EVICT_TICKS))
#else
#define EVICTABLE(j)	(st[j] == S_FREE)	/* evict_ns infinite */
#endif

/* slot_release() of a confirmed entry; the fields are cleared so that a
 * free entry is one state whatever it held */
inline release(j)
{
	st[j] = S_FREE; key[j] = 0; contrib[j] = 0; conf[j] = 0; sum[j] = 0;
	cnt[j] = 0; idle[j] = 0
}

#define TENSOR(c)	((c) == 2 -> 1 : 0)

inline claim(j, c)
{
	if
	:: st[j] == S_DONE -> tomb[j] = key[j] + 1
	:: st[j] == S_AGG -> SEEN(W_EVICT)
	:: else -> skip
	fi;
	if
	:: j >= NS -> SEEN(W_FB_CLAIM)
	:: else -> skip
	fi;
	if
	:: tomb[j] != 0 && TENSOR(tomb[j] - 1) != TENSOR(c) -> SEEN(W_REUSE)
	:: else -> skip
	fi;
	st[j] = S_AGG; key[j] = c; contrib[j] = 0; conf[j] = 0; sum[j] = 0; cnt[j] = 0;
	idle[j] = 0
}

/*
 * DATA(w, c, r): decides the entry and the replies (rep: 0 none, 1 ACK,
 * 2 BUSY, 3 RESULT to w, 4 RESULT to all).  slot_for_data() + agg_data().
 */
inline agg_data(w, c, r)
{
	find(c, idx);
#ifdef BUG_NO_KEYCHECK
	if
	:: idx == E && st[PRIM(c)] == S_AGG -> idx = PRIM(c)
	:: else -> skip
	fi;
#endif
	if
	:: idx == E ->
		/* chunk_finished(): a tombstone names it: a stray */
		if
		:: tomb[PRIM(c)] == c + 1 -> idx = E + 1
		:: else ->
			i = 0;
			do
			:: i < NF && tomb[FBI(c, i)] == c + 1 -> idx = E + 1; break
			:: i < NF && tomb[FBI(c, i)] != c + 1 -> i++
			:: i >= NF -> break
			od
		fi;
		if
		:: idx == E && EVICTABLE(PRIM(c)) ->
			idx = PRIM(c); claim(idx, c)
		:: idx == E && !EVICTABLE(PRIM(c)) ->
			i = 0;
			do
			:: i < NF && EVICTABLE(FBI(c, i)) ->
				idx = FBI(c, i); claim(idx, c); break
			:: i < NF && !EVICTABLE(FBI(c, i)) -> i++
			:: i >= NF -> break
			od
		:: else -> skip
		fi
	:: else -> skip
	fi;
	rep = 0;
	if
	:: idx == E + 1 ->
		/* stale: a stray, nobody waits for it (tombstones) */
		assert(cst[WC(w, c)] == C_DONE);
		SEEN(W_STALE)
	:: idx == E -> rep = 2; SEEN(W_BUSY_SENT)
	:: idx < E && st[idx] == S_DONE -> rep = 3; SEEN(W_RESULT_AGAIN)
#ifndef BUG_NO_BITMAP
	:: idx < E && st[idx] == S_AGG && (contrib[idx] & (1 << w)) ->
		if
		:: r -> rep = 1; SEEN(W_ACK_SENT)
		:: else -> skip
		fi
#endif
	:: else ->
		/* a claimed entry's sum is 0 and every value is >= 0, so adding
		 * (or max) to it is sum_copy() */
		if
		:: c == EXPC && sum[idx] < VAL(w, c) -> sum[idx] = VAL(w, c)
		:: c != EXPC && sum[idx] + VAL(w, c) > VMAX -> sum[idx] = VMAX
		:: c != EXPC && sum[idx] + VAL(w, c) <= VMAX ->
			sum[idx] = sum[idx] + VAL(w, c)
		:: else -> skip
		fi;
		contrib[idx] = contrib[idx] | (1 << w);
		cnt[idx]++;
		idle[idx] = 0;
		if
		:: cnt[idx] == N ->
			st[idx] = S_DONE; rep = 4
		:: else ->
			if
			:: r -> rep = 1; SEEN(W_ACK_SENT)
			:: else -> skip
			fi
		fi
	fi
}

/* CONFIRM(w, c): agg_confirm_one() */
inline agg_confirm(w, c)
{
	find(c, idx);
	if
	:: idx < E && st[idx] == S_DONE ->
		conf[idx] = conf[idx] | (1 << w);
#ifdef BUG_EARLY_FREE
		if
		:: true ->
#else
		if
		:: conf[idx] == ALL ->
#endif
			tomb[idx] = c + 1; release(idx)
		:: else -> skip
		fi
	:: else -> skip
	fi
}

/* the RESULT of entry j to worker w, or to every worker */
inline result_to(w, j)
{
	put(resbag[WC(w, key[j])], 1 << sum[j])
}

inline replies(w, c)
{
	if
	:: rep == 1 -> put(toworker[w], 1 << c)
	:: rep == 2 -> put(toworker[w], 1 << (4 + c))
	:: rep == 3 -> result_to(w, idx)
	:: rep == 4 ->
		result_to(0, idx); result_to(1, idx); result_to(2, idx)
	:: else -> skip
	fi
}

/*
 * Delivery of a packet in flight: it leaves the bag, or (at most DUP times
 * in all) a copy stays in flight: duplication.  Each delivery and its
 * handling is one step.
 */
#define RX(bag, bits, body) \
	:: d_step { (bag) & (bits) -> bag = (bag) & ~(bits); body } \
	:: d_step { dup > 0 && ((bag) & (bits)) -> dup--; body }

#define AGG_RX(w, c) \
	RX(toagg, B_DATA(w, c, 0), agg_data(w, c, 0); replies(w, c)) \
	RX(toagg, B_DATA(w, c, 1), agg_data(w, c, 1); replies(w, c)) \
	RX(toagg, B_CONF(w, c), agg_confirm(w, c))
#define AGG_RX_W(w)	AGG_RX(w, 0) AGG_RX(w, 1) AGG_RX(w, 2)

active proctype agg()
{
end:
	do
	AGG_RX_W(0)
	AGG_RX_W(1)
	AGG_RX_W(2)
	od
}

/* ---- the workers (worker.c) ---- */

inline send_data(w, c, r)
{
	put(toagg, B_DATA(w, c, r))
}

/* first transmission (chunk_launch): takes a credit */
inline launch(w, c)
{
	cst[WC(w, c)] = C_INFLIGHT;
	inflight[w]++;
	send_data(w, c, 0)
}

/* agg_rx_result(): v is the RESULT's value */
inline rx_result(w, c, v)
{
	if
	:: cst[WC(w, c)] == C_DONE ->
		put(toagg, B_CONF(w, c));	/* receipt again */
		SEEN(W_RECONFIRM)
	:: cst[WC(w, c)] == C_WAIT -> skip	/* mismatch: no shift yet */
	:: cst[WC(w, c)] != C_DONE && cst[WC(w, c)] != C_WAIT &&
	   c == EXPC && v < VAL(w, c) -> skip	/* max below ours */
	:: else ->
		if
		:: cst[WC(w, c)] == C_INFLIGHT -> inflight[w]--
		:: else -> skip
		fi;
		cst[WC(w, c)] = C_DONE;
		res[WC(w, c)] = v;
		assert(v == TRUE(c));
		if
		:: c == EXPC && cst[WC(w, 1)] == C_WAIT -> cst[WC(w, 1)] = C_READY
		:: else -> skip
		fi;
		put(toagg, B_CONF(w, c))
	fi
}

/* agg_rx_ack(): ACK */
inline rx_ack(w, c)
{
	if
	:: cst[WC(w, c)] == C_INFLIGHT ->
#ifndef BUG_ACK_NO_CREDIT
		inflight[w]--;
#endif
		cst[WC(w, c)] = C_ACKED
	:: else -> skip
	fi
}

/* agg_rx_ack(): BUSY */
inline rx_busy(w, c)
{
	if
	:: cst[WC(w, c)] == C_INFLIGHT || cst[WC(w, c)] == C_ACKED ->
		if
		:: cst[WC(w, c)] == C_INFLIGHT -> inflight[w]--
		:: else -> skip
		fi;
		cst[WC(w, c)] = C_DEFER
	:: else -> skip
	fi
}

/* the lowest value among the RESULTs in flight (only a broken
 * aggregator puts two values in flight) */
inline pick_value(bits, v)
{
	v = 0;
	do
	:: (bits >> v) & 1 -> break
	:: else -> v++
	od
}

#ifdef ANY_ORDER
#define TURN(w, c)	true
#else
/* worker 0 sends tensor B first, the others tensor A first (priorities) */
#define NOT_READY(w, c)	(cst[WC(w, c)] != C_READY)
#define TURN(w, c) \
	((w) == 0 -> ((c) == 2 || NOT_READY(w, 2)) : \
		     ((c) == 0 || ((c) == 1 && NOT_READY(w, 0)) || \
		      ((c) == 2 && NOT_READY(w, 0) && NOT_READY(w, 1))))
#endif
#define W_LAUNCH(c) \
	:: d_step { inflight[w] < WINDOW && cst[WC(w, c)] == C_READY && \
		    TURN(w, c) -> launch(w, c) }
#define W_RESULT(c) \
	:: d_step { resbag[WC(w, c)] != 0 -> \
		pick_value(resbag[WC(w, c)], v); \
		resbag[WC(w, c)] = resbag[WC(w, c)] & ~(1 << v); \
		rx_result(w, c, v) } \
	:: d_step { dup > 0 && resbag[WC(w, c)] != 0 -> dup--; \
		pick_value(resbag[WC(w, c)], v); rx_result(w, c, v) }
#define W_ACK(c)	RX(toworker[w], 1 << (c), rx_ack(w, c))
#define W_BUSY(c)	RX(toworker[w], 1 << (4 + (c)), rx_busy(w, c))
#define W_EARLY(c) \
	:: d_step { early > 0 && (cst[WC(w, c)] == C_INFLIGHT || \
				  cst[WC(w, c)] == C_ACKED) -> \
		early--; send_data(w, c, 1) }
#define W_ALL(c)	W_LAUNCH(c) W_RESULT(c) W_ACK(c) W_BUSY(c) W_EARLY(c)

proctype worker(byte w)
{
end:
	do
	W_ALL(0)
	W_ALL(1)
	W_ALL(2)
	od
}

/* ---- the network's losses ---- */

#define LOSE(bag, bits) \
	:: d_step { loss > 0 && ((bag) & (bits)) -> bag = (bag) & ~(bits); loss-- }
#define LOSE_TOAGG(w, c) \
	LOSE(toagg, B_DATA(w, c, 0)) LOSE(toagg, B_DATA(w, c, 1)) \
	LOSE(toagg, B_CONF(w, c))
#define LOSE_TOW(w, c) \
	LOSE(toworker[w], 1 << (c)) LOSE(toworker[w], 1 << (4 + (c))) \
	:: d_step { loss > 0 && resbag[WC(w, c)] != 0 -> \
		pick_value(resbag[WC(w, c)], v); \
		resbag[WC(w, c)] = resbag[WC(w, c)] & ~(1 << v); loss-- }
#define LOSE_W(w) \
	LOSE_TOAGG(w, 0) LOSE_TOAGG(w, 1) LOSE_TOAGG(w, 2) \
	LOSE_TOW(w, 0) LOSE_TOW(w, 1) LOSE_TOW(w, 2)

active proctype net()
{
end:
	do
	LOSE_W(0)
	LOSE_W(1)
	LOSE_W(2)
	od
}

/* ---- time ---- */

/*
 * One tick of every timer: tly_worker_poll() of each worker (timers, then
 * fresh chunks (its own steps), then deferred ones with credit no fresh
 * chunk wants) and tly_agg_poll() (RESULT again to every worker that has
 * not confirmed a DONE entry).
 */
inline tick()
{
	ww = 0;
	do
	:: ww < N ->
		cc = 0;
		do
		:: cc < C ->
			if
			:: cst[WC(ww, cc)] == C_INFLIGHT || cst[WC(ww, cc)] == C_ACKED ->
				send_data(ww, cc, 1)
			:: else -> skip
			fi;
			cc++
		:: else -> break
		od;
		cc = 0;
		do
		:: cc < C ->
			if
			:: cst[WC(ww, cc)] == C_DEFER && inflight[ww] < WINDOW &&
			   !FRESH(ww) ->
				launch(ww, cc); SEEN(W_DEFER_SENT)
			:: else -> skip
			fi;
			cc++
		:: else -> break
		od;
		ww++
	:: else -> break
	od;
	j = 0;
	do
	:: j < E ->
		if
		:: st[j] == S_DONE ->
			ww = 0;
			do
			:: ww < N ->
				if
				:: !(conf[j] & (1 << ww)) -> result_to(ww, j);
					SEEN(W_PROBE)
				:: else -> skip
				fi;
				ww++
			:: else -> break
			od
		:: st[j] == S_AGG && idle[j] < EVICT_TICKS -> idle[j]++
		:: else -> skip
		fi;
		j++
	:: else -> break
	od;
	skip	/* a d_step may not end in a loop's break */
}

inline check_final()
{
	ww = 0;
	do
	:: ww < N ->
		cc = 0;
		do
		:: cc < C -> assert(res[WC(ww, cc)] == TRUE(cc)); cc++
		:: else -> break
		od;
		ww++
	:: else -> break
	od;
	skip
}

active proctype clock()
{
end:
	do
	:: d_step { timeout && !(ALLDONE && NO_DONE_SLOT) -> tick() }
	:: d_step { timeout && ALLDONE && NO_DONE_SLOT -> check_final(); fin = 1 }
	:: fin -> break
	od
}

init
{
	atomic {
		ww = 0;
		do
		:: ww < N ->
			cst[WC(ww, 0)] = C_READY;	/* exponent group */
			cst[WC(ww, 1)] = C_WAIT;	/* A's data: needs E */
			cst[WC(ww, 2)] = C_READY;	/* int32 tensor B */
			run worker(ww);
			ww++
		:: else -> break
		od
	}
}

/* every worker gets every result and every entry is released */
ltl terminates { <> fin }
