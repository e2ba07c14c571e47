// SPDX-License-Identifier: BSD-3-Clause
/*
 * quiet_logs.c - libFuzzer's start-up hook for the targets on tallyd's
 * parsers: their log lines off but errors, so a run shows the fuzzer.
 */
#include "ctrl/log.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	log_set_level(LOG_ERR);
	return 0;
}
