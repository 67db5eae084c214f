/* SPDX-License-Identifier: MIT */
/*
 * npuctl dispatch: the command table, the usage texts and npuctl_main().
 * `npuctl`, `npuctl help`, `-h` and `--help` print the usage of every command;
 * `npuctl help CMD` and `npuctl CMD --help` print one. An unknown command prints the usage
 * and exits 2.
 */
#include "npuctl.h"

#include <stdio.h>
#include <string.h>

struct npuctl_command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *usage;
};

#define RUN_OPTIONS                                                                          \
    "  --chip NAME|PATH      chip config: models/chips/NAME.toml, or a file (default "    \
    NPUCTL_DEFAULT_CHIP ")\n"                                                                \
    "  --mesh RxC            override the config's mesh, e.g. 4x4 (1..32 each)\n"            \
    "  --threads single|multi|auto  TCG threading (default multi; serve: auto, which is\n"     \
    "                        single on a host of at most 2 CPUs)\n"                              \
    "  --mode functional|performance  engine mode of the machine (default functional):\n"    \
    "                        performance keeps the timing and never touches the data\n"     \
    "  --watchdog-ms N       machine watchdog: a hart running N ms without waiting fails\n" \
    "  --quiet-guest-errors  do not pass -d guest_errors to QEMU\n"                          \
    "  --print-cmd           print the QEMU command line instead of running it\n"

static const struct npuctl_command commands[] = {
    { "run", npuctl_cmd_run,
      "npuctl run [NAME | CTRL.elf CORE.elf] [OPTIONS] [-- QEMU ARGS...]\n"
      "  Run a firmware image pair on the emulated chip. NAME (default " NPUCTL_DEFAULT_IMAGE
      ") is the\n  directory $NPU_FIRMWARE_DIR/NAME/ holding ctrl.elf and core.elf (a NAME "
      "with '/' is that\n  directory itself). Exit status: QEMU's (128+N on signal N), 124 on "
      "--timeout, 2 on error.\n" RUN_OPTIONS
      "  --timeout SECONDS     wall-clock limit; then QEMU's process group is killed\n"
      "                        and npuctl exits 124 (default 600, 0 = none)\n" },
    { "selftest", npuctl_cmd_selftest,
      "npuctl selftest [OPTIONS] [-- QEMU ARGS...]\n"
      "  Run the on-target self-tests: the same as `npuctl run " NPUCTL_SELFTEST_IMAGE
      "`, with run's options.\n" },
    { "debug", npuctl_cmd_debug,
      "npuctl debug [NAME | CTRL.elf CORE.elf] [OPTIONS] [-- QEMU ARGS...]\n"
      "  Start QEMU halted at reset with a gdb stub (-gdb tcp:localhost:PORT -S, no timeout)\n"
      "  and print the gdb-multiarch command that attaches. gdb threads are the harts:\n"
      "  thread N+1 is NPU core N, the last thread is the control core.\n"
      "  Takes run's options except --timeout, and:\n"
      "  --port P              gdb stub port (default 1234)\n"
      "  --core K              load the core image's symbols at core K's SRAM (default 0)\n" },
    { "bench", npuctl_cmd_bench,
      "npuctl bench gemm|dma|noc|collectives|host [OPTIONS] [-- QEMU ARGS...]\n"
      "  Run a benchmark image and print its measurements as a table next to the analytical\n"
      "  bound, with one summary line per target (docs/benchmarks.md):\n"
      "    gemm  matrix-engine utilisation of core 0 over a grid of GEMM shapes\n"
      "    dma   HBM <-> SRAM transfers, 1 KiB .. 16 MiB and more, one and several cores\n"
      "    noc   latency per hop, link bandwidth, two and four writes sharing links\n"
      "    collectives  all-gather, reduce-scatter, all-reduce on 4, 16, 64 cores, each\n"
      "          placement, 1 KiB .. 64 MiB, beside the bandwidth and latency bounds\n"
      "    host  host wall-clock time per engine command and per submit, 4x4 and 16x16\n"
      "  gemm, dma, noc and collectives run in performance mode unless --mode says\n"
      "  otherwise; host measures both modes (or the one --mode names), both meshes (or\n"
      "  --mesh) and both TCG threadings (or --threads).\n"
      "  Exit status 0 whether targets are met or not; 2 if a run fails or on bad arguments.\n"
      "  Takes run's options (--mesh and --mode apply to every run), and:\n"
      "  --quick               a reduced variant (the smoke tests use it)\n"
      "  --raw                 also print the chip console of every run\n"
      "  --repeat N            host: runs per point, the median is kept (default 3)\n"
      "  --timeout SECONDS     wall-clock limit per QEMU run (default 600, 0 = none)\n"
      "npuctl bench model --model NAME|PATH [--chip NAME|PATH] [--shapes LIST] [--out DIR]\n"
      "                   [--timeout SECONDS] [--engine-log all|CORE] [PLAN OPTIONS]\n"
      "  Named step shapes in performance mode, one iteration each: prefill-512,\n"
      "  prefill-512-ctx8k, prefill-2048, decode-b8-ctx4k, decode-b64-ctx1k. Prints chip\n"
      "  time, the whole-chip lower bound (model and chip configs only: matrix FLOPs at\n"
      "  peak, least HBM bytes beyond the chip's SRAM), their ratio, each engine kind's\n"
      "  busy share, HBM bytes against the least, and rank 0's categories. PLAN OPTIONS\n"
      "  are plan's (the shape sets --max-batch, --max-tokens, --max-seq). --out keeps\n"
      "  the images, consoles and stats files (default: a temp dir, removed).\n"
      "  --engine-log all|CORE  also write DIR/SHAPE.engines.json (needs --out): every\n"
      "                        descriptor the engines ran (of every core, or of CORE), a\n"
      "                        Perfetto / chrome://tracing trace (docs/benchmarks.md)\n" },
    { "plan", npuctl_cmd_plan,
      "npuctl plan --model NAME|PATH [--chip NAME|PATH] [PLAN OPTIONS]\n"
      "  Plan a model on a chip and print the plan: ranks, partition per GEMM, SRAM per core\n"
      "  (tile buffers, residual, KV cache, weights resident or staged), HBM. A plan that\n"
      "  does not divide the model or fit the chip is refused with the numbers (exit 2).\n"
      "  What the options leave unset the planner chooses from the model and the chip,\n"
      "  and prints as \"chosen by the planner\" (docs/images.md, \"Automatic plan\").\n"
      "  --tp N                ranks of the tensor-parallel group (default: every core)\n"
      "  --stages S            pipeline stages: S groups of tp cores, L/S layers each\n"
      "  --instances I         I copies of the plan in bands of cols/I columns, each with\n"
      "                        its own KV cache (serving with --sched pd-disagg)\n"
      "  --placement linear|interleaved|ring|mesh2d  (default mesh2d where a GEMM is\n"
      "                        2-D, else ring)\n"
      "  --partition P         mn|k|2d|auto for every GEMM, or GEMM=P,... with GEMM one of\n"
      "                        qkv, o, ffn_up, ffn_down, expert_up, expert_down, lm_head\n"
      "                        (auto: qkv and o 2d on a grid of 2 x 2 or more, experts\n"
      "                        ep with at least as many experts as ranks; else k below the\n"
      "                        hidden\n"
      "                        size per iteration, mn from it; 2d: the R x C grid of\n"
      "                        --placement mesh2d, docs/images.md)\n"
      "  --mode functional|performance   (default functional)\n"
      "  --dtype fp32|bf16     (default fp32 functional, bf16 performance)\n"
      "  --max-batch B --max-tokens T --max-seq S --tile-rows R --kv-block K\n"
      "                        iteration shape (defaults 8, 512, min(4096, max_position),\n"
      "                        the matrix array's rows but at least 64, 128 with split\n"
      "                        attention else 256)\n"
      "  --moe-rows G          rows of one MoE group under expert parallelism: the\n"
      "                        experts run over every row of a group routed to them\n"
      "                        (default: max-tokens, halved until it fits)\n"
      "  --moe-spill-rows N    EP with the residual in HBM and several MoE groups: rows\n"
      "                        of the HBM spill the MoE over the layer keeps its groups'\n"
      "                        rows in; fewer serve a layer in waves (default: the\n"
      "                        iteration's worst case, halved while HBM is short)\n"
      "  --moe-units-rows N    EP: a MoE op of at most N rows runs by units, every\n"
      "                        touched expert's units dealt over all ranks (0: never;\n"
      "                        default: max-batch, capped at a tile)\n"
      "  --expert-slots N      EP: staged experts stream through N buffers of one\n"
      "                        expert matrix each, loaded ahead of their GEMMs (default:\n"
      "                        the busiest rank's expert matrices if they fit, else 3)\n"
      "  --expert-placement contiguous|balanced\n"
      "                        EP: whole experts in order (contiguous), or slices of the\n"
      "                        experts the routing model makes popular spread so that\n"
      "                        every rank serves about the mean (balanced; the default\n"
      "                        in performance mode under skewed routing)\n"
      "  --attn-block A        positions per attention step, a multiple of the KV block\n"
      "                        (default: 3 blocks with split attention and the default\n"
      "                        KV block, else one); larger\n"
      "                        steps mean fewer, larger\n"
      "                        GEMMs and vector ops over long contexts\n"
      "  --comm-segment BYTES  pipelining segment of the collectives (default 64 KiB on\n"
      "                        cores of 16 MiB SRAM or more, else 16 KiB)\n"
      "  --kv-split off|on     on: the KV cache and attention are split over the tp ranks\n"
      "                        (cache block b of request q on rank (b + s_q) mod tp, s_q\n"
      "                        the ids in bit-reversed order, docs/images.md; the\n"
      "                        ranks combine their softmax states), so each rank holds\n"
      "                        1/tp of the cache (default: on over more than one rank)\n"
      "  --kv-window N         split attention: every rank keeps the keys and values of\n"
      "                        the last N rows of a step and runs attention over them\n"
      "                        query-parallel (a multiple of --tile-rows; default: the\n"
      "                        step's rows, at most 1 MiB of K and V, widened up to\n"
      "                        4 MiB where SRAM is left once the plan fits)\n"
      "  --routing uniform|skewed:ALPHA --routing-seed N   performance-mode expert choice\n"
      "  --weights auto|stream  auto: resident in SRAM when they fit; stream: staged from\n"
      "                        HBM layer by layer even so\n"
      "  --stage-buffers 1|2   staged weights: 2 loads the next layer's non-expert shares\n"
      "                        while a layer runs, where SRAM holds the copy and layer\n"
      "                        reuse is off (default 2)\n" },
    { "build-image", npuctl_cmd_build_image,
      "npuctl build-image --model NAME|PATH [--chip NAME|PATH] [PLAN OPTIONS] -o FILE\n"
      "  Plan (as npuctl plan) and write the image: header with format version and\n"
      "  checksum, model config, tensor table, per-core SRAM map and layer program, and in\n"
      "  functional mode the weights (docs/images.md).\n" },
    { "flash", npuctl_cmd_flash,
      "npuctl flash IMAGE [RUN OPTIONS] [-- QEMU ARGS...]\n"
      "  Run the model firmware with IMAGE at the base of HBM: the control core checks the\n"
      "  image (version, checksum, tables, built for this chip and mode) before any core\n"
      "  loads from it, and refuses a bad one (exit 1). --chip and --mode default to the\n"
      "  image's. Requests come as bootargs: -- -append \"prompt=1,2,3 new=8\"\n"
      "  (docs/images.md). Takes run's options.\n" },
    { "serve", npuctl_cmd_serve,
      "npuctl serve [--chip C] [--model M] [--sched S] [SCHED OPTIONS] [--trace T] [--out DIR]\n"
      "  Serve a request trace on the emulated chip (docs/serving.md): see npuctl serve --help.\n" },
    { "trace", npuctl_cmd_trace,
      "npuctl trace gen|import|show ...\n"
      "  Generate, import or summarise request traces (docs/traces.md): see npuctl trace --help.\n" },
    { "compare", npuctl_cmd_compare,
      "npuctl compare DIR...\n"
      "  Print the summaries of serving runs side by side.\n" },
    { "plot", npuctl_cmd_plot,
      "npuctl plot DIR... [-o OUT]\n"
      "  Draw SLO attainment against request rate and TTFT/TBT CDFs with gnuplot.\n" },
    { "test", npuctl_cmd_test,
      "npuctl test [CTEST ARGS...]\n"
      "  Run the test suite: ctest --test-dir $NPU_BUILD_DIR --output-on-failure ARGS\n"
      "  (e.g. npuctl test -L host). Exit status: ctest's.\n" },
    { "chips", npuctl_cmd_chips,
      "npuctl chips\n"
      "  List the chip presets (models/chips/*.toml): mesh, cores, clock, SRAM per core.\n"
      "  Exit status 1 if a preset does not parse (it is listed with its error).\n" },
    { "help", npuctl_cmd_help,
      "npuctl help [COMMAND]\n"
      "  This text, or one command's usage (also: npuctl COMMAND --help).\n" },
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static const struct npuctl_command *find_command(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

static void print_environment(FILE *f)
{
    static const enum npuctl_dir which[] = { NPUCTL_DIR_SOURCE, NPUCTL_DIR_BUILD,
                                             NPUCTL_DIR_FIRMWARE, NPUCTL_PATH_QEMU };
    fprintf(f, "\nenvironment (current value):\n");
    for (size_t i = 0; i < sizeof(which) / sizeof(which[0]); i++)
        fprintf(f, "  %-17s %s\n", npuctl_dir_env_name(which[i]), npuctl_get_dir(which[i]));
}

void npuctl_print_usage(FILE *f, const char *name)
{
    const struct npuctl_command *c = name ? find_command(name) : NULL;
    if (c) {
        fprintf(f, "usage: %s", c->usage);
        return;
    }
    fprintf(f, "usage: npuctl COMMAND [ARGS...]\n"
               "The front door of the npu-mesh project: runs firmware on the emulated chip.\n"
               "Errors print 'npuctl: ...' and exit 2.\n\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(f, "%s%s", i ? "\n" : "", commands[i].usage);
    print_environment(f);
}

int npuctl_cmd_help(int argc, char **argv)
{
    if (argc > 0 && !find_command(argv[0])) {
        npuctl_print_error("help: unknown command '%s'", argv[0]);
        npuctl_print_usage(stderr, NULL);
        return NPUCTL_EXIT_USAGE;
    }
    npuctl_print_usage(stdout, argc > 0 ? argv[0] : NULL);
    return 0;
}

int npuctl_main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        npuctl_print_usage(stdout, NULL);
        return 0;
    }
    const struct npuctl_command *c = find_command(argv[1]);
    if (!c) {
        npuctl_print_error("unknown command '%s'", argv[1]);
        npuctl_print_usage(stderr, NULL);
        return NPUCTL_EXIT_USAGE;
    }
    return c->fn(argc - 2, argv + 2);
}
