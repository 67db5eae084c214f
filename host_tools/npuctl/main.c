/* SPDX-License-Identifier: MIT */
/*
 * npuctl entry point. Everything else lives in the npuctl_core library (see npuctl.h) so the
 * host unit tests can link it.
 */
#include "npuctl.h"

int main(int argc, char **argv)
{
    return npuctl_main(argc, argv);
}
