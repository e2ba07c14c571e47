// SPDX-License-Identifier: BSD-3-Clause
/*
 * tally-sim - predict iteration time, samples/s and scaling efficiency of
 * the study's seven methods on H hosts x G GPUs (docs/simulator.md).
 *
 *   tally-sim [--models M,..] [--methods M,..] [--nets N,..]
 *             [--gpus 1,2,4,..] [--gpus-per-host G] [--ps-aggregators A]
 *             [--ps-colocated] [--threads T] [--iterations N]
 *             [--csv FILE] [--png DIR] [--table] [--figures] [--quiet]
 *   tally-sim --calibrate MEASURED.csv [--tune] [--figures]
 *   tally-sim --latency-sweep [--csv FILE] [--png DIR]
 *
 * GPU counts up to G run on one host; above, on count / G hosts of G.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sim/sim.h"

#ifndef SIM_MODELS_DIR
#define SIM_MODELS_DIR "tools/models"
#endif
#ifndef SIM_PLOT_SCRIPT
#define SIM_PLOT_SCRIPT "sim/plot.py"
#endif

struct model {
	const char *name;
	uint32_t batch;
};

/* tools/experiment's MODELS: batch per GPU */
static const struct model models[] = {
	{ "resnet50", 64 }, { "bert_base", 64 }, { "bert_large", 8 },
};

struct opts {
	char models[256], methods[256], nets[64], gpus[256];
	const char *dir, *csv, *png, *calibrate;
	uint32_t gph, n_agg, threads;
	int iterations;
	bool colocated, table, figures, quiet, tune, latency;
};

static int split(char *s, char **out, int max)
{
	int n = 0;

	for (char *t = strtok(s, ","); t && n < max; t = strtok(NULL, ","))
		out[n++] = t;
	return n;
}

static const struct model *model_find(const char *name)
{
	for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++)
		if (!strcmp(models[i].name, name))
			return &models[i];
	return NULL;
}

static int load(const struct opts *o, const char *name, struct sim_profile *p)
{
	char path[1024];
	int ret;

	snprintf(path, sizeof(path), "%s/%s.csv", o->dir, name);
	ret = sim_profile_load(path, p);
	if (ret)
		fprintf(stderr, "tally-sim: %s: %s\n", path, strerror(-ret));
	return ret;
}

/* the study's setup for gpus GPUs on the network preset */
static int setup(const struct opts *o, struct sim_cfg *c,
		 const struct sim_profile *p, const struct model *m,
		 const struct sim_method *meth, const char *net, uint32_t gpus)
{
	sim_cfg_default(c);
	c->prof = p;
	c->method = *meth;
	c->batch = m->batch;
	if (sim_net_preset(net, &c->net))
		return -EINVAL;
	c->gpus = gpus < o->gph ? gpus : o->gph;
	c->hosts = gpus / c->gpus;
	c->net.n_agg = o->n_agg;
	c->net.host_pkt_ns /= o->threads;
	c->net.agg_pkt_ns /= o->threads;
	if (o->colocated && meth->algo != SIM_RING)
		c->method.algo = SIM_AGG_COLOCATED;
	c->iterations = o->iterations;
	return 0;
}

static void progress(const struct opts *o, int i, int n, const char *what)
{
	if (o->quiet)
		return;
	if (!isatty(2)) {	/* a log: a line now and then */
		if (i == n || i % 100 == 0)
			fprintf(stderr, "[%d/%d] %s\n", i, n, what);
		return;
	}
	fprintf(stderr, "\r[%d/%d] %-60s", i, n, what);
	if (i == n)
		fputc('\n', stderr);
	fflush(stderr);
}

static void plot(const struct opts *o, const char *csv, const char *kind)
{
	char cmd[2048];

	if (!o->png)
		return;
	fflush(stdout);
	snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s %s %s %s", SIM_PLOT_SCRIPT,
		 kind, csv, o->png);
	if (system(cmd))
		fprintf(stderr, "tally-sim: no plots (%s failed)\n", cmd);
}

static int sweep(struct opts *o)
{
	char *mod[8], *meth[8], *net[4], *gp[32];
	int nm = split(o->models, mod, 8), nme = split(o->methods, meth, 8);
	int nn = split(o->nets, net, 4), ng = split(o->gpus, gp, 32);
	int total = nm * nme * nn * ng, done = 0, ret = 0;
	struct timespec t0, t1;
	FILE *f = NULL;
	double *tab;

	tab = calloc((size_t)total, sizeof(*tab));
	if (!tab)
		return 1;
	if (o->csv) {
		f = fopen(o->csv, "w");
		if (!f) {
			perror(o->csv);
			free(tab);
			return 1;
		}
		fprintf(f, "model,net,method,gpus,hosts,gpus_per_host,"
			"iteration_ms,samples_per_s,scaling_efficiency,units,"
			"groups\n");
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int a = 0; a < nm && !ret; a++) {
		const struct model *m = model_find(mod[a]);
		struct sim_profile p;

		if (!m || load(o, mod[a], &p)) {
			fprintf(stderr, "tally-sim: unknown model %s\n", mod[a]);
			ret = 1;
			break;
		}
		for (int b = 0; b < nme && !ret; b++)
			for (int n = 0; n < nn && !ret; n++)
				for (int g = 0; g < ng && !ret; g++) {
			const struct sim_method *me = sim_method_find(meth[b]);
			uint32_t gpus = (uint32_t)atoi(gp[g]);
			struct sim_result r;
			struct sim_cfg c;
			char what[128];
			int idx = ((a * nme + b) * nn + n) * ng + g;

			snprintf(what, sizeof(what), "%s %s %s %u GPUs",
				 mod[a], meth[b], net[n], gpus);
			progress(o, ++done, total, what);
			if (!me || gpus == 0 || setup(o, &c, &p, m, me, net[n],
						      gpus) ||
			    sim_run(&c, &r)) {
				fprintf(stderr, "\ntally-sim: %s failed\n", what);
				ret = 1;
				break;
			}
			tab[idx] = r.samples_per_s;
			if (f)
				fprintf(f, "%s,%s,%s,%u,%u,%u,%.4f,%.2f,%.4f,"
					"%lu,%u\n", mod[a], net[n], meth[b],
					gpus, c.hosts, c.gpus,
					r.iteration_ns / 1e6, r.samples_per_s,
					r.efficiency, r.st.units, r.groups);
			if (o->figures && gpus == 32)
				printf("figure sim_%s_%s_%s_32gpu_samples_per_s "
				       "%.1f samples/s\n", mod[a], meth[b],
				       net[n], r.samples_per_s);
		}
		sim_profile_free(&p);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (f)
		fclose(f);
	if (!ret && !o->quiet)
		fprintf(stderr, "tally-sim: %d simulations in %.1f s\n", total,
			(double)(t1.tv_sec - t0.tv_sec) +
			(double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	if (!ret && o->table) {
		for (int a = 0; a < nm; a++) {
			printf("\n# %s: samples/s, %u GPUs per host\n%-28s",
			       mod[a], o->gph, "method / net");
			for (int g = 0; g < ng; g++)
				printf("%9s", gp[g]);
			putchar('\n');
			for (int b = 0; b < nme; b++)
				for (int n = 0; n < nn; n++) {
					char lab[64];

					snprintf(lab, sizeof(lab), "%s %s",
						 meth[b], net[n]);
					printf("%-28s", lab);
					for (int g = 0; g < ng; g++)
						printf("%9.1f", tab[((a * nme + b) *
						       nn + n) * ng + g]);
					putchar('\n');
				}
		}
	}
	free(tab);
	if (!ret && o->csv)
		plot(o, o->csv, "sweep");
	return ret;
}

/* ---- calibration against tools/experiment's measured replays -------- */

struct meas {
	char model[32], net[16], method[32], set[16];
	uint32_t hosts;
	int iterations;
	double dilation, samples;
	double plan_a_ns, plan_b;	/* the replay's measured cost model */
	double pred;
	uint32_t groups;		/* MG-WFBP's plan: merge groups */
};

/*
 * This machine: kernel UDP over the loopback, 2 cores shared by 4-5
 * daemons and 4 replays, the link emulator.  Five costs, tuned by --tune
 * (docs/simulator.md, section 4): a worker's and the aggregator's CPU per
 * packet, the per-unit cost, and the latency a traversal adds on this
 * loaded machine beyond the configured d: lat_scale x d plus lat_add_ns,
 * not dilated (the emulator adds d itself since issue 16; under the
 * replays' load its frames leave about 0.2 ms late and the daemons wake
 * late, which the fit puts at 0.5 ms).
 */
struct machine {
	double host_pkt_ns, agg_pkt_ns, unit_ns, lat_scale, lat_add_ns;
};

/* tally-sim --calibrate sim/calibration.csv --tune, 2026-12-01 (the
 * measurements of that evening, docs/simulator.md section 4) */
static const struct machine tuned = { 250, 8000, 3000000, 1, 500000 };

/*
 * The measured runs: a CSV with a header naming at least model, net,
 * method, hosts, dilation and samples_per_s (tools/experiment's own CSV
 * qualifies), optionally iterations (default 2) and set ("tune" or
 * "check", default check).  Rows whose samples_per_s is not a number
 * (FAILED) are skipped.
 */
enum { C_MODEL, C_NET, C_METHOD, C_HOSTS, C_DIL, C_SAMPLES, C_ITER, C_SET,
       C_A, C_B, C_N };

static int read_meas(const char *path, struct meas **out)
{
	static const char *const names[C_N] = {
		"model", "net", "method", "hosts", "dilation", "samples_per_s",
		"iterations", "set", "a_us", "b_ns_per_byte",
	};
	FILE *f = fopen(path, "r");
	int col[C_N], n = 0;
	char line[1024];
	struct meas *v = NULL;
	bool header = false;

	if (!f) {
		perror(path);
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		char *fld[32], *end;
		struct meas m = { .iterations = 2 };
		struct meas *nv;
		int nf = 0;

		line[strcspn(line, "\r\n")] = 0;
		if (line[0] == '#' || !line[0])
			continue;
		/* strsep: an empty field (a_us of an older row) is a field */
		for (char *t, *rest = line;
		     nf < 32 && (t = strsep(&rest, ",")) != NULL;)
			fld[nf++] = t;
		if (!header) {
			for (int c = 0; c < C_N; c++) {
				col[c] = -1;
				for (int i = 0; i < nf; i++)
					if (!strcmp(fld[i], names[c]))
						col[c] = i;
			}
			for (int c = 0; c < C_ITER; c++)
				if (col[c] < 0 || col[c] >= 32) {
					fprintf(stderr, "%s: no column %s\n",
						path, names[c]);
					fclose(f);
					return -1;
				}
			header = true;
			continue;
		}
		if (nf <= col[C_SAMPLES] || nf <= col[C_DIL] ||
		    nf <= col[C_HOSTS] || nf <= col[C_MODEL] ||
		    nf <= col[C_NET] || nf <= col[C_METHOD])
			continue;
		m.samples = strtod(fld[col[C_SAMPLES]], &end);
		if (*end || m.samples <= 0)
			continue;		/* FAILED */
		snprintf(m.model, sizeof(m.model), "%s", fld[col[C_MODEL]]);
		snprintf(m.net, sizeof(m.net), "%s", fld[col[C_NET]]);
		snprintf(m.method, sizeof(m.method), "%s", fld[col[C_METHOD]]);
		m.hosts = (uint32_t)atoi(fld[col[C_HOSTS]]);
		m.dilation = atof(fld[col[C_DIL]]);
		if (col[C_ITER] >= 0 && col[C_ITER] < nf)
			m.iterations = atoi(fld[col[C_ITER]]);
		snprintf(m.set, sizeof(m.set), "%s",
			 col[C_SET] >= 0 && col[C_SET] < nf ?
			 fld[col[C_SET]] : "check");
		if (col[C_A] >= 0 && col[C_A] < nf &&
		    col[C_B] >= 0 && col[C_B] < nf) {
			m.plan_a_ns = 1000 * atof(fld[col[C_A]]);
			m.plan_b = atof(fld[col[C_B]]);
		}
		if (m.hosts == 0 || m.dilation <= 0 || m.iterations < 1)
			continue;
		nv = realloc(v, (size_t)(n + 1) * sizeof(*v));
		if (!nv)
			break;
		v = nv;
		v[n++] = m;
	}
	fclose(f);
	*out = v;
	return n;
}

static int predict(const struct opts *o, struct meas *m,
		   const struct machine *mc)
{
	const struct model *md = model_find(m->model);
	const struct sim_method *me = sim_method_find(m->method);
	struct sim_profile p;
	struct sim_result r;
	struct sim_cfg c;
	int ret;

	if (!md || !me || load(o, m->model, &p))
		return -EINVAL;
	sim_cfg_default(&c);
	c.prof = &p;
	c.method = *me;
	c.batch = md->batch;
	sim_net_preset(m->net, &c.net);
	/* tools/experiment: kernel UDP (Ethernet framing, K = 256) on
	 * every emulated port, one dedicated aggregator, no GPU */
	c.net.hdr_bytes = 20 + 42 + 24;
	c.net.n_agg = 1;
	c.net.pcie_Bps = 0;
	c.net.host_pkt_ns = mc->host_pkt_ns;
	c.net.agg_pkt_ns = mc->agg_pkt_ns;
	c.net.unit_ns = mc->unit_ns;
	/* after dilation: d x D x lat_scale + lat_add_ns */
	c.net.lat_ns = c.net.lat_ns * mc->lat_scale +
		       mc->lat_add_ns / m->dilation;
	c.hosts = m->hosts;
	c.gpus = 1;
	c.dilation = m->dilation;
	c.iterations = m->iterations;	/* as the replay measured */
	/* MG-WFBP plans with the cost model the replays measured through
	 * tally, when the row has it: the plan decides what is merged */
	c.plan_a_ns = m->plan_a_ns;
	c.plan_b_ns_per_byte = m->plan_b;
	c.replay_timing = true;
	ret = sim_run(&c, &r);
	sim_profile_free(&p);
	m->pred = r.samples_per_s;
	m->groups = r.groups;
	return ret;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* median |pred - meas| / meas over the rows of set (NULL: all) */
static double median_err(struct meas *v, int n, const char *set)
{
	double e[512];
	int k = 0;

	for (int i = 0; i < n && k < 512; i++)
		if (!set || !strcmp(v[i].set, set))
			e[k++] = fabs(v[i].pred - v[i].samples) / v[i].samples;
	if (!k)
		return NAN;
	qsort(e, (size_t)k, sizeof(*e), cmp_d);
	return k % 2 ? e[k / 2] : 0.5 * (e[k / 2 - 1] + e[k / 2]);
}

/* mean |pred - meas| / meas over the rows of set: what --tune fits
 * (the median would let half the rows go) */
static double mean_err(struct meas *v, int n, const char *set)
{
	double e = 0;
	int k = 0;

	for (int i = 0; i < n; i++)
		if (!strcmp(v[i].set, set)) {
			e += fabs(v[i].pred - v[i].samples) / v[i].samples;
			k++;
		}
	return k ? e / k : NAN;
}

static int predict_all(const struct opts *o, struct meas *v, int n,
		       const struct machine *mc)
{
	for (int i = 0; i < n; i++)
		if (predict(o, &v[i], mc)) {
			fprintf(stderr, "tally-sim: cannot simulate %s %s %s\n",
				v[i].model, v[i].net, v[i].method);
			return -1;
		}
	return 0;
}

static int calibrate(const struct opts *o)
{
	struct meas *v = NULL;
	struct machine best = tuned;
	int n = read_meas(o->calibrate, &v);

	if (n <= 0) {
		fprintf(stderr, "tally-sim: no measurements in %s\n",
			o->calibrate);
		return 1;
	}
	if (o->tune) {
		/* grid search on the rows of set "tune" */
		static const double hp[] = { 250, 500, 1000, 2000, 4000,
					     8000 };
		static const double ap[] = { 1000, 2000, 4000, 8000, 16000,
					     32000 };
		static const double up[] = { 0, 100000, 300000, 1000000,
					     3000000 };
		static const double ls[] = { 1, 1.5, 2, 3 };
		static const double la[] = { 0, 250000, 500000, 1000000 };
		double be = INFINITY;
		int tot = 6 * 6 * 5 * 4 * 4, k = 0;

		for (int i = 0; i < 6; i++)
			for (int j = 0; j < 6; j++)
				for (int u = 0; u < 5; u++)
				for (int x = 0; x < 4; x++)
				for (int y = 0; y < 4; y++) {
					struct machine mc = { hp[i], ap[j],
							      up[u], ls[x],
							      la[y] };
					double e;

					progress(o, ++k, tot, "tuning");
					if (predict_all(o, v, n, &mc))
						return 1;
					e = mean_err(v, n, "tune");
					if (e < be) {
						be = e;
						best = mc;
					}
				}
		printf("tuned: host_pkt_ns=%.0f agg_pkt_ns=%.0f unit_ns=%.0f "
		       "lat_scale=%.1f lat_add_ns=%.0f (mean abs err on the "
		       "tuning set %.3f)\n", best.host_pkt_ns,
		       best.agg_pkt_ns, best.unit_ns, best.lat_scale,
		       best.lat_add_ns, be);
	}
	if (predict_all(o, v, n, &best))
		return 1;
	printf("%-12s %-5s %-18s %-6s %10s %10s %8s  %s\n", "model", "net",
	       "method", "set", "measured", "sim", "error", "groups");
	for (int i = 0; i < n; i++) {
		printf("%-12s %-5s %-18s %-6s %10.1f %10.1f %+7.1f%%",
		       v[i].model, v[i].net, v[i].method, v[i].set,
		       v[i].samples, v[i].pred,
		       100 * (v[i].pred - v[i].samples) / v[i].samples);
		if (v[i].groups)
			printf("  %u", v[i].groups);
		printf("\n");
	}
	printf("median abs err: all %.3f, tune %.3f, check %.3f\n",
	       median_err(v, n, NULL), median_err(v, n, "tune"),
	       median_err(v, n, "check"));
	if (o->figures)
		printf("figure sim_calibration_median_abs_err %.3f frac\n",
		       median_err(v, n, NULL));
	free(v);
	return 0;
}

/* ---- the latency and bandwidth sweep -------------------------------- */

static int latency_sweep(struct opts *o)
{
	static const double lat_us[] = { 1, 2, 5, 10, 20, 50, 100, 200, 500,
					 1000 };
	static const double gbps[] = { 1, 2, 5, 10, 25, 40, 100 };
	static const uint32_t gpus[] = { 32, 256 };
	const char *path = o->csv ? o->csv : "sim-latency.csv";
	int total = 3 * 7 * 2 * (10 + 7), k = 0;
	FILE *f = fopen(path, "w");

	if (!f) {
		perror(path);
		return 1;
	}
	fprintf(f, "model,method,gpus,sweep,latency_us,gbps,samples_per_s,"
		"scaling_efficiency\n");
	for (size_t a = 0; a < 3; a++) {
		struct sim_profile p;

		if (load(o, models[a].name, &p)) {
			fclose(f);
			return 1;
		}
		for (int b = 0; b < 7; b++)
			for (int g = 0; g < 2; g++)
				for (int s = 0; s < 17; s++) {
			struct sim_result r;
			struct sim_cfg c;
			bool lat = s < 10;
			char what[96];

			setup(o, &c, &p, &models[a], &sim_methods[b], "10g",
			      gpus[g]);
			/* fixed: 10 Gb/s when latency varies, 25 us when
			 * bandwidth does (the 10g network's other half) */
			if (lat)
				c.net.lat_ns = lat_us[s] * 1e3;
			else
				c.net.rate_bps = gbps[s - 10] * 1e9;
			snprintf(what, sizeof(what), "%s %s %u", models[a].name,
				 sim_methods[b].name, gpus[g]);
			progress(o, ++k, total, what);
			if (sim_run(&c, &r)) {
				fclose(f);
				sim_profile_free(&p);
				return 1;
			}
			fprintf(f, "%s,%s,%u,%s,%.0f,%.0f,%.2f,%.4f\n",
				models[a].name, sim_methods[b].name, gpus[g],
				lat ? "latency" : "bandwidth",
				c.net.lat_ns / 1e3, c.net.rate_bps / 1e9,
				r.samples_per_s, r.efficiency);
		}
		sim_profile_free(&p);
	}
	fclose(f);
	plot(o, path, "latency");
	return 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: tally-sim [--models M,..] [--methods M,..] [--nets N,..]\n"
		"                 [--gpus 1,2,..] [--gpus-per-host G]\n"
		"                 [--ps-aggregators A] [--ps-colocated]\n"
		"                 [--threads T] [--iterations N] [--models-dir D]\n"
		"                 [--csv FILE] [--png DIR] [--table] [--figures]\n"
		"                 [--quiet]\n"
		"       tally-sim --calibrate MEASURED.csv [--tune] [--figures]\n"
		"       tally-sim --latency-sweep [--csv FILE] [--png DIR]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "models", required_argument, NULL, 'm' },
		{ "methods", required_argument, NULL, 'M' },
		{ "nets", required_argument, NULL, 'n' },
		{ "gpus", required_argument, NULL, 'g' },
		{ "gpus-per-host", required_argument, NULL, 'G' },
		{ "ps-aggregators", required_argument, NULL, 'A' },
		{ "ps-colocated", no_argument, NULL, 'C' },
		{ "threads", required_argument, NULL, 'T' },
		{ "iterations", required_argument, NULL, 'i' },
		{ "models-dir", required_argument, NULL, 'd' },
		{ "csv", required_argument, NULL, 'c' },
		{ "png", required_argument, NULL, 'p' },
		{ "table", no_argument, NULL, 't' },
		{ "figures", no_argument, NULL, 'f' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "calibrate", required_argument, NULL, 'k' },
		{ "tune", no_argument, NULL, 'u' },
		{ "latency-sweep", no_argument, NULL, 'l' },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = { .dir = SIM_MODELS_DIR, .gph = 4, .threads = 1,
			  .iterations = 3 };
	int ch;

	snprintf(o.models, sizeof(o.models), "resnet50,bert_base,bert_large");
	snprintf(o.methods, sizeof(o.methods), "bsp-a2a,wfbp-a2a,mgwfbp,"
		 "bytescheduler-a2a,bsp-ps,wfbp-ps,bytescheduler-ps");
	snprintf(o.nets, sizeof(o.nets), "10g,100g");
	snprintf(o.gpus, sizeof(o.gpus), "1,2,4,8,16,32,64,128,256,512");
	while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (ch) {
		case 'm': snprintf(o.models, sizeof(o.models), "%s", optarg); break;
		case 'M': snprintf(o.methods, sizeof(o.methods), "%s", optarg); break;
		case 'n': snprintf(o.nets, sizeof(o.nets), "%s", optarg); break;
		case 'g': snprintf(o.gpus, sizeof(o.gpus), "%s", optarg); break;
		case 'G': o.gph = (uint32_t)atoi(optarg); break;
		case 'A': o.n_agg = (uint32_t)atoi(optarg); break;
		case 'C': o.colocated = true; break;
		case 'T': o.threads = (uint32_t)atoi(optarg); break;
		case 'i': o.iterations = atoi(optarg); break;
		case 'd': o.dir = optarg; break;
		case 'c': o.csv = optarg; break;
		case 'p': o.png = optarg; break;
		case 't': o.table = true; break;
		case 'f': o.figures = true; break;
		case 'q': o.quiet = true; break;
		case 'k': o.calibrate = optarg; break;
		case 'u': o.tune = true; break;
		case 'l': o.latency = true; break;
		default: usage();
		}
	}
	if (optind != argc || o.gph == 0 || o.threads == 0 ||
	    o.iterations < 1)
		usage();
	if (o.calibrate)
		return calibrate(&o);
	if (o.latency)
		return latency_sweep(&o);
	return sweep(&o);
}
