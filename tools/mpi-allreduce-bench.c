// SPDX-License-Identifier: BSD-3-Clause
/*
 * mpi-allreduce-bench - the peer of tally-bench: MPI_Allreduce (float32,
 * sum, out of place) over the same sizes and iteration counts, timed the
 * same way (slowest rank's average), printed as the same CSV.
 *
 *   mpirun -np 4 mpi-allreduce-bench [-b min] [-e max] [-f factor] [-w n]
 *                                    [-I]    (-I: MPI_IN_PLACE)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static size_t parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	if (*end == 'K' || *end == 'k')
		v *= 1024;
	else if (*end == 'M' || *end == 'm')
		v *= 1024 * 1024;
	return (size_t)v;
}

/* Same rule as tally-bench: ~256 MiB of traffic per size, 5..2000. */
static int iters_for(size_t bytes)
{
	size_t n = (256u << 20) / bytes;

	return n < 5 ? 5 : n > 2000 ? 2000 : (int)n;
}

int main(int argc, char **argv)
{
	size_t min = 4096, max = 64u << 20;
	int factor = 4, warmup = 5, inplace = 0, rank, size, c;
	float *send, *recv;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	while ((c = getopt(argc, argv, "b:e:f:w:I")) != -1) {
		switch (c) {
		case 'I': inplace = 1; break;
		case 'b': min = parse_size(optarg); break;
		case 'e': max = parse_size(optarg); break;
		case 'f': factor = atoi(optarg); break;
		case 'w': warmup = atoi(optarg); break;
		default: MPI_Abort(MPI_COMM_WORLD, 2);
		}
	}
	send = malloc(max);
	recv = malloc(max);
	if (!send || !recv || factor < 2)
		MPI_Abort(MPI_COMM_WORLD, 1);
	for (size_t i = 0; i < max / sizeof(float); i++)
		send[i] = (float)((i * 7 + (size_t)rank * 13) % 17) - 8;
	if (rank == 0)
		printf("size,count,type,op,time_us,algbw_gbps,busbw_gbps,"
		       "errors\n");
	for (size_t bytes = min; bytes <= max; bytes *= (size_t)factor) {
		int count = (int)(bytes / sizeof(float));
		int iters = iters_for(bytes);
		double t0 = 0, mine, slowest;
		long bad = 0;

		for (int i = -warmup; i < iters; i++) {
			if (i == 0) {
				MPI_Barrier(MPI_COMM_WORLD);
				t0 = MPI_Wtime();
			}
			MPI_Allreduce(inplace ? MPI_IN_PLACE : send,
				      inplace ? send : recv, count, MPI_FLOAT,
				      MPI_SUM, MPI_COMM_WORLD);
		}
		mine = (MPI_Wtime() - t0) / iters * 1e6;
		MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0,
			   MPI_COMM_WORLD);
		if (inplace) {	/* check one fresh in-place call */
			for (int i = 0; i < count; i++)
				send[i] = (float)(((size_t)i * 7 +
						   (size_t)rank * 13) % 17) - 8;
			MPI_Allreduce(MPI_IN_PLACE, send, count, MPI_FLOAT,
				      MPI_SUM, MPI_COMM_WORLD);
			memcpy(recv, send, bytes);
		}
		for (int i = 0; i < count; i++) {
			float want = 0;

			for (int r = 0; r < size; r++)
				want += (float)(((size_t)i * 7 +
						 (size_t)r * 13) % 17) - 8;
			bad += recv[i] != want;
		}
		if (rank == 0) {
			double alg = (double)bytes / slowest / 1e3;

			printf("%zu,%d,float,sum,%.2f,%.3f,%.3f,%ld\n", bytes,
			       count, slowest, alg,
			       alg * 2.0 * (size - 1) / size, bad);
		}
	}
	free(send);
	free(recv);
	MPI_Finalize();
	return 0;
}
