/* SPDX-License-Identifier: MIT */
/*
 * What the benchmark images of collectives share (bench_coll.c, bench_m2n.c): two
 * communicators' scratch below the NoC driver's mailboxes, the cases' on slot 0 and the
 * whole mesh's on slot 1, whose barrier separates the cases.
 */
#ifndef BENCH_COMM_H
#define BENCH_COMM_H

#include <stdint.h>

#include "noc/collective.h"

/* The start of the two scratch areas: slot 0's, then slot 1's; the data below it. */
uint64_t bench_comm_scratch(void);

/* The whole mesh as a linear group and its communicator on slot 1. 0, or the driver's error
   (printed as a BENCH error line). */
int bench_comm_mesh(struct noc_group *g, struct noc_comm *c);

#endif
