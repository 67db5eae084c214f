/* SPDX-License-Identifier: MIT */
/*
 * The layer-program interpreter of the model image (docs/images.md, "Execution"): one
 * iteration is a set of row runs (a run is one request's new tokens at consecutive
 * positions: a whole prompt, a chunk of one, or one decode token). For each op of its
 * program, a core works through the iteration's rows in tiles of plan.tile_rows, each op a
 * chain of engine descriptors on this core, every descriptor waiting for the one before.
 *
 * Modelled: RMSNorm, QKV, q/k RMSNorm, RoPE, the KV cache (a request's positions in its SRAM
 * pool blocks, then in its segment of the ring, in SRAM or HBM as the plan says), attention
 * over blocks of the cache with an online softmax (bounded SRAM for any context), causal
 * and sliding-window masks, output projection, dense SwiGLU, MoE (router, top-k, the rows of
 * each expert gathered, one grouped GEMM chain per expert, weighted combine in top-k order),
 * final norm, LM head, argmax. Weight GEMMs are
 * split over the tensor-parallel group per GEMM as the plan says: MN (output columns, one
 * all-gather per GEMM), K (input columns, one all-reduce) or 2D (blocks of W on the R x C
 * grid of a mesh2d group: an all-reduce along the grid row, then an all-gather along the
 * grid column, the NoC driver's line collectives); an FFN with MN up and K down GEMMs keeps
 * its hidden split (one all-reduce), any other combination, 2D included, completes each GEMM.
 * The experts may instead be EP (whole experts per rank; each rank routes a slice of the rows
 * and dispatches them to the experts' owners over the NoC, model_moe_ep.c).
 * Every other op runs on every rank on replicated activations (so a 2D rank reads its K
 * columns of X as a strided view, it is not sent them). Weights are resident in SRAM or
 * staged one layer at a time from HBM (experts: only those some row of the iteration routes
 * to).
 * Pipeline stages: a stage's ranks run its layers; the residual rows pass to the same rank
 * of the next stage over the NoC (SEND / RECV), and the last stage sends the tokens back to
 * every other stage. Stages run one after another within an iteration: no micro-batches.
 * Not modelled: overlap of pipeline stages across
 * iterations or micro-batches, overlap of weight staging with compute (a chain is
 * sequential), 2-D partition of the activations (Table 2's input/R C: here X is
 * replicated), and the paper's iterated 2-D schedule (Figure 3-c interleaves compute with
 * the row and column steps; here the GEMM runs first, then the two collectives).
 */
#ifndef MODEL_EXEC_H
#define MODEL_EXEC_H

#include <stdbool.h>
#include <stdint.h>

#include "model_config.h"
#include "model_weights.h"
#include "noc/collective.h"
#include "npu/vector.h"
#include "npu_image.h"
#include "npu_layout.h"
#include "npu_limits.h"
#include "npu_memmap.h"

#define EXEC_LAYERS_MAX NPU_MODEL_LAYERS_MAX /* npu_limits.h */
#define EXEC_KINDS (MT_LM_HEAD + 1)
_Static_assert(EXEC_KINDS == NPU_STAGE_KINDS, "the staging map covers every tensor kind");
#define EXEC_RUNS_MAX NPU_IMAGE_RUNS_MAX /* runs per iteration (npu_image.h) */

/* Per-layer accounting of chip time (what the per-layer breakdown prints). */
enum exec_cat {
    EXEC_CAT_ATTN,    /* norm, QKV, RoPE, KV cache, attention, O (compute only) */
    EXEC_CAT_FFN,     /* dense or MoE FFN (compute only) */
    EXEC_CAT_COLL,    /* all-gathers and all-reduces of the weight GEMMs */
    EXEC_CAT_WEIGHTS, /* staging weights from HBM */
    EXEC_CAT_OTHER,   /* embeddings, residual moves, LM head, argmax */
    EXEC_CAT_COUNT,
};

struct exec_stats {
    uint64_t ps[EXEC_CAT_COUNT];
    uint64_t flops[EXEC_CAT_COUNT];
    uint64_t hbm_bytes[EXEC_CAT_COUNT];
    uint64_t noc_byte_hops[EXEC_CAT_COUNT];
    uint64_t descs[EXEC_CAT_COUNT]; /* engine descriptors (the emulator's work, per core) */
    uint64_t expert_bytes;  /* expert weights moved HBM -> SRAM */
};

/* One request's rows in an iteration. */
struct exec_run {
    uint32_t req;           /* request id (the routing model's key) */
    uint32_t pos;           /* position of the first row */
    uint32_t count;         /* rows */
    const uint32_t *tokens; /* [count] token ids */
    bool wants_token;       /* the last row's logits give the next token */
    /* its KV cache: positions [0, nblocks x W) in pool blocks blocks[] (W = npu_kv_stripe),
       the rest at ring row ring_row + the position's local row (npu_layout.h) */
    const uint32_t *blocks;
    uint32_t nblocks;
    uint64_t ring_row;
};

/* One iteration: runs [0, nprefill) run layers [layer0, layer1) (layered prefill: one
   group), the others every layer. Rows: the runs' rows in order, prefill runs first. */
struct exec_batch {
    const struct exec_run *runs;
    uint32_t nruns, nprefill;
    uint32_t layer0, layer1;
    /* A micro-batch (plan.micro_batches) is a part of the iteration's batch: its first row's
       place among the iteration's residual rows, and the tokens wanted before it (where its
       tokens go in the other stages' argmax). 0 for a whole batch. */
    uint32_t row_base, token_base;
};

/* ---- Reuse classes (model_reuse.c, model_reuse_tile.c) */

/* A class of layers: the same ops over rows of the same shape (model_reuse.c, "Keys"). */
#define EXEC_REUSE_OPS 8u
#define EXEC_REUSE_ROWS 16u                /* prefill runs + 1 decode summary per key */
#define EXEC_REUSE_SAMPLES 4u              /* layers a run of decode rows alone records */
#define EXEC_REUSE_DECODES UINT32_MAX      /* exec_reuse_row.req of the decode summary */
#define EXEC_REUSE_ROW_SLACK 2u            /* shape keys with prefill rows: rows a run, or
                                              decode runs, may differ by (mixed_distance) */
#define EXEC_REUSE_DECODE_STRIPES 4u       /* ... and stripes the decode summary's context
                                              ends may differ by */
#define EXEC_REUSE_LAST_MIN 8u             /* a stage's last layer after this many layers
                                              takes a looser key (exec_reuse_class.last) */
struct exec_reuse_row {
    uint32_t req;                          /* prefill run: its request (shapes: 0);
                                              EXEC_REUSE_DECODES: the decode runs */
    uint32_t count;                        /* prefill: rows; decodes: runs */
    uint32_t pos;                          /* prefill: the position of its first row
                                              (shapes: where its context ends); decodes:
                                              the sum of the stripes their contexts end in
                                              (shapes: of where they end) */
    uint32_t nblocks;                      /* KV pool blocks (decodes: their sum) */
};
struct exec_reuse_class {
    uint16_t kinds[EXEC_REUSE_OPS], flags[EXEC_REUSE_OPS]; /* one layer's ops */
    uint32_t nops;
    bool all;                              /* the prefill runs take part too */
    bool prefill;                          /* some run of its rows is a prefill run */
    bool ahead;                            /* a next layer on this core's stage: the layer
                                              loads its shares and first steps ahead */
    bool head;                             /* the model's last layer in a pass that runs
                                              the LM head (head_due) */
    bool last;                             /* shape keys: the stage's last layer alone,
                                              one of many in the iteration */
    uint32_t sample;                       /* decode rows alone: which of the run's
                                              EXEC_REUSE_SAMPLES recorded layers (layer
                                              l0 + j replays sample j mod that) */
    uint32_t nrows;
    struct exec_reuse_row rows[EXEC_REUSE_ROWS];
    uint64_t span_ps;                      /* chip time of its recorded layer on this core */
    struct exec_stats delta;               /* what that layer added to its stats */
    bool head_loaded, head_half;           /* the recorded layer loaded the LM head's
                                              first piece, into that half (w.head_ahead,
                                              w.stream_half): a replay stands for it */
    uint32_t iteration;                    /* when recorded (m->acct.iterations) */
    uint32_t last_used;                    /* the last iteration that used it (+1; 0: free) */
};

/* The replay slots: layer classes first, then tile classes (model_reuse_tile.c). */
#define EXEC_REUSE_LAYER_SLOTS 64u
#define EXEC_REUSE_SIG_BUCKETS 16u
#define EXEC_REUSE_TILE_SLOTS (NPU_REPLAY_SLOTS - EXEC_REUSE_LAYER_SLOTS)
#define EXEC_REUSE_TILE_OP_MIN 8 /* tile reuse keys an op's tiles past this many of them */
_Static_assert(NPU_REPLAY_SLOTS > EXEC_REUSE_LAYER_SLOTS, "slots are left for tile classes");

/* A class of tiles: one op over rows of the same shape (model_reuse_tile.c, "Keys"). */
#define EXEC_TILE_SEGS 4u
#define EXEC_TILE_LOAD_TOL 32u /* the MoE over the layer's unit loads match within 1/32 */
#define EXEC_SIDES_GROUP 6u /* exec_reuse_tile_sides' bits every rank has alike */
struct exec_tile_seg {
    uint32_t count;                        /* rows */
    uint32_t end;                          /* where the context of its last row ends */
    uint32_t nblocks;                      /* its run's KV pool blocks */
    uint32_t window;                       /* split attention: its positions in the window
                                              (exec_attn_window) */
};
struct exec_tile_class {
    uint16_t kind, flags;                  /* the op */
    uint32_t n;                            /* tile rows */
    uint32_t load;                         /* MoE: the routed pairs of the busiest rank
                                              (expert parallelism) or the experts routed to */
    uint32_t pre_bytes;                    /* EXEC_OP_PREFETCH: the next tile's rows'
                                              bytes (a partial last tile loads fewer) */
    uint32_t nsegs;                        /* attention: its segments; other ops: 0 */
    struct exec_tile_seg segs[EXEC_TILE_SEGS];
    uint32_t xn, xload;                    /* a MoE group's attention: the rows and load
                                              of the group before's exchange it runs
                                              (exec_moe_wide_exchange_key; 0: none) */
    uint8_t sides;                         /* the side copies its recording issued
                                              (exec_reuse_tile_sides); keyed for a MoE
                                              group's attention and combine */
    uint64_t span_ps;                      /* chip time of its recorded tile on this core */
    struct exec_stats delta;               /* what that tile added to its layer's stats */
    uint32_t last_used;                    /* m->treuse.uses when last used (0: free) */
    uint32_t pins;                         /* MoE over the layer: groups whose combine will
                                              replay it (not replaced meanwhile) */
    bool staged_next;                      /* a combine: its recording staged the next
                                              group's outputs */
};

/* ---- The interpreter's state: one per NPU core, in its struct model_core (model_setup.h) */

/* Indices of the reuse counters (exec_layer_reuse.counts, exec_tile_reuse.counts). */
enum exec_reuse_count {
    EXEC_REUSE_RECORDED, /* run in full, recorded in a replay slot */
    EXEC_REUSE_REPLAYED, /* replayed */
    EXEC_REUSE_FULL,     /* run in full, not recorded (layers: for want of a slot; tiles:
                            not keyed, or routed to experts the group had not staged) */
    EXEC_REUSE_COUNTS,
};

/* Pipeline stages: this core's stage, and the cores of its rank in the neighbouring stages
   (prev: RECV's sender; next: SEND's receiver) (model_pipe.c). */
struct exec_pipe {
    uint32_t stage, stages;
    uint16_t core[EXEC_LAYERS_MAX];        /* [stage]: the core of this rank (stages <= layers) */
    uint32_t recvs, token_recvs;           /* residual and token messages received so far */
    uint64_t prev_x;                       /* HBM residual rows: the previous stage's copy */
};

/* Buffers: the activations' element type, this core's SRAM, its tile buffers, residual rows
   and KV cache. */
struct exec_bufs {
    uint32_t eb;                           /* activation / weight element bytes */
    enum npu_dtype dt;
    uint64_t sram;                         /* this core's SRAM base */
    struct npu_act_layout a;               /* global addresses (arena base added) */
    uint64_t x_all;                        /* residual rows (SRAM or HBM) */
    uint64_t kv_pool, kv_ring;             /* KV block pool (SRAM), ring (SRAM or HBM) */
    bool x_in_sram;
};

/* Weights: this rank's tensor shares, and what is staged of them (non-resident plans). */
struct exec_weights {
    uint64_t stage, stage_bytes;           /* staging buffer (non-resident plans) */
    uint64_t stage_b;                      /* plan.stage_double: odd layers' non-expert
                                              shares (the buffer's last bytes) */
    uint32_t staged_next;                  /* l + 1: layer l's shares were loaded while the
                                              layer before ran (0: none) */
    uint32_t stage_deferred;               /* l + 1: layer l's shares load when the layer
                                              before starts its dense FFN (0: none) */
    uint32_t stage_late;                   /* l + 1: one staging copy; layer l's shares load
                                              once the layer before routed its last MoE
                                              rows (exec_stage_after_route; 0: none) */
    bool stage_own;                        /* the layer loads its own shares as it starts
                                              (not loaded while the layer before ran) */
    bool route_last;                       /* the next MoE route is the layer's last reader
                                              of its shares (set by the op loops) */
    bool stream_half;                      /* the half of the staging buffer the next
                                              streamed piece loads into (share_piece) */
    bool head_ahead;                       /* the streamed LM head's first piece was
                                              loaded during the last layer, into the half
                                              stream_half names (exec_head_ahead) */
    const struct npu_image_tensor *t[EXEC_LAYERS_MAX][EXEC_KINDS]; /* this rank's shares */
    const struct npu_image_tensor *embed, *final_norm, *lm_head;
    struct npu_stage_map map;              /* the staged layer's layout in the buffer (the
                                              planner sized the buffer with the same map) */
    uint8_t expert_staged[256];
    /* The expert ring (npu_plan.expert_slots, EP with staged experts): each expert matrix a
       GEMM reads is loaded into the next slot by a DMA outside the chain's count, which
       waits by its data only for the slot's previous readers; the GEMM waits for the load
       by its data (model_hazard.h; docs/images.md, "Expert ring"). */
    struct {
        uint32_t next;                     /* the slot the next load takes */
        struct {                           /* what a slot holds: a matrix still there is */
            const struct npu_image_tensor *t; /* not loaded again (NULL: nothing) */
            uint32_t block, part;
        } held[NPU_EXPERT_SLOTS_MAX];
        bool backward;                     /* the next MoE group serves its experts from
                                              the last: what the ring holds from the group
                                              before comes first */
    } ring;
};

/* Accounting: where chip time is charged (layer, category), the statistics, the counts of
   the run. */
struct exec_acct {
    uint32_t layer;                        /* the layer being run, for accounting */
    struct exec_stats *stats;              /* [num_layers + 1]: the last is outside layers */
    enum exec_cat cat;
    uint64_t cat_t0, cat_flops0, cat_hbm0, cat_noc0, cat_descs0;
    uint64_t *expert_tokens;               /* [layers][E] tokens routed, over the run */
    uint32_t iterations;                   /* exec_iteration calls so far */
};

/* Layer reuse (model_reuse.c): its bootargs, the classes in their replay slots, counts. */
struct exec_layer_reuse {
    bool enabled;                          /* bootarg layer_reuse */
    bool shapes;                           /* bootarg reuse_shapes: keys by shape, reused
                                              across iterations (model_reuse.c, "Keys") */
    uint32_t tol;                          /* shape keys: context ends within this many
                                              positions per run match (half a stripe;
                                              key_distance caps it at a quarter of the
                                              context) */
    struct exec_reuse_class classes[EXEC_REUSE_LAYER_SLOTS]; /* class i in replay slot i */
    uint64_t sig[EXEC_REUSE_LAYER_SLOTS];  /* class i's hash of what key_distance compares
                                              exactly (apart from the classes: the search
                                              tests these words, not 64 classes) */
    uint64_t bucket[EXEC_REUSE_SIG_BUCKETS]; /* bit i: slot i's sig is in bucket b
                                              (sig_bucket), so a search tests the few
                                              slots of its key's bucket */
    uint64_t counts[EXEC_REUSE_COUNTS];    /* layers recorded, replayed, run in full for
                                              want of a slot (reported by report_run) */
    uint64_t heads[EXEC_REUSE_COUNTS];     /* LM heads recorded, replayed, run in full for
                                              want of a slot (exec_reuse_head) */
    bool kv_steady;                        /* the layer being recorded takes its attention's
                                              first steps as loaded by the layer before
                                              (exec_attention_begin clears it) */
    uint32_t kv_next;                      /* l + 1: layer l's first steps were loaded by
                                              the layer before, or a replay stood for it */
};

/* Tile reuse (model_reuse_tile.c): its bootarg, the classes in their replay slots, the
   replays queued, the experts the group staged, counts. */
struct exec_tile_reuse {
    bool enabled;                          /* bootarg reuse_tiles */
    bool on;                               /* the op now running keys its tiles (enabled,
                                              over more than EXEC_REUSE_TILE_OP_MIN tiles) */
    uint32_t uses;                         /* tiles keyed so far (the classes' LRU clock) */
    struct exec_tile_class classes[EXEC_REUSE_TILE_SLOTS]; /* class i in replay slot
                                              EXEC_REUSE_LAYER_SLOTS + i */
    /* replays waiting to be repeated at once: `pending` of class pending_class */
    struct exec_tile_class *pending_class;
    uint32_t pending;
    uint8_t group_staged[256];             /* experts some rank of the group staged this
                                              layer */
    uint32_t group_staged_n;               /* how many */
    uint64_t counts[EXEC_REUSE_COUNTS];    /* tiles recorded, replayed, run in full */
};

struct exec_model {
    const struct model_config *cfg;
    const struct npu_plan *plan;
    const uint8_t *image;                  /* at the base of HBM */
    uint32_t rank, tp;
    /* split attention: npu_kv_rank_shift of request ids 0..tp-1 (it repeats every tp ids;
       computed once, at O(P) a call) */
    uint16_t kv_shift[NPU_MESH_DIM_MAX * NPU_MESH_DIM_MAX];
    uint32_t kv_step_at;                   /* the next attention step's first row in kblk
                                              and vblk, a ring of attn_block rows
                                              (model_attn.c, attn_step_rows) */
    bool attn_next;                        /* the op being run is a MoE or FFN op whose
                                              next op is the next layer's attention over
                                              the same rows (model_iter.c, run_ops) */
    bool head_due;                         /* this pass runs the LM head on some rows
                                              (run_ops), so the last layer may load its
                                              first piece (exec_head_ahead) */
    struct noc_comm *comm;                 /* NULL when tp == 1 */
    /* Attention/expert disaggregation (plan.disagg, model_disagg.c): the pair group of
       every replica's ranks and the expert instance's, over which the MoE dispatches
       (NULL: comm); whether this core serves the experts; this core's replica (attention
       cores) and the replicas' count. */
    struct noc_comm *moe_comm;
    bool serves_experts;
    uint32_t replica, replicas;
    struct exec_pipe pipe;
    struct exec_bufs buf;
    struct exec_weights w;
    struct exec_acct acct;
    struct exec_layer_reuse lreuse;
    struct exec_tile_reuse treuse;
};

/* ---- model_kv_pull.c: PD disaggregation */

/* A request's KV cache on some core: that core's block pool and ring (global addresses),
   its blocks and ring segment. */
struct exec_kv_cache {
    uint64_t sram;                         /* the SRAM base of the core holding it */
    uint64_t pool, ring;
    const uint32_t *blocks;
    uint32_t nblocks;
    uint64_t ring_row;
};

struct exec_kv_pull {
    struct exec_kv_cache src, dst;         /* src: another core's; dst: this core's */
    uint32_t req;                          /* the request (split: its blocks' ranks) */
    uint32_t count;                        /* positions [0, count) */
    uint64_t bounce, bounce_bytes;         /* this core's SRAM, free during the pull */
};

/* Copies K and V of positions [0, count) of this core's stage's layers from src into dst
   and waits until they landed. 0, or the engine's refusal (printed). */
int exec_kv_pull(struct exec_model *m, const struct exec_kv_pull *p);

/* ---- model_pipe.c: pipeline stages */

/* Residual rows [row0, row0 + rows) to the same rows of this rank in the next stage; waits
   until they landed (rows in SRAM), or tells it they are ready (rows in HBM). */
int exec_pipe_send(struct exec_model *m, uint32_t row0, uint32_t rows);
/* Waits for those rows of the previous stage (in HBM: then copies them from its rows). */
int exec_pipe_recv(struct exec_model *m, uint32_t row0, uint32_t rows);
/* Last stage: the argmax of its nw token rows to this rank of every other stage, at entry
   w0 of theirs (a micro-batch's tokens after the earlier ones'). */
int exec_pipe_send_tokens(struct exec_model *m, uint32_t nw, uint32_t w0);
/* Other stages: waits for those tokens (then in a.argmax). */
int exec_pipe_recv_tokens(struct exec_model *m);

/* ---- model_head.c: the final norm, the LM head and the next tokens */

/* The runs' next tokens (greedy) and their logits: out[i], logit[i] for each run that wants
   a token (the last stage of a pipeline). */
int exec_head(struct exec_model *m, const struct exec_batch *b, uint32_t *out, float *logit);
/* Another stage: waits for the last stage's `messages` token messages (one per micro-batch
   that wants tokens), then the runs' tokens (their logits stay there: logit 0). */
int exec_head_tokens_from_last_stage(struct exec_model *m, const struct exec_run *runs,
                                     uint32_t nruns, uint32_t messages, uint32_t *out,
                                     float *logit);

/* ---- model_exec.c: chains, GEMMs, staging, embeddings */

/* Initialises m's buffers from the image's core entry; 0 or a negative npu_status. */
int exec_init(struct exec_model *m, const struct npu_image_core *core);
/* Loads resident weights (DMA HBM -> SRAM); called once before the first iteration. */
int exec_load_resident(struct exec_model *m);
/* Runs the program ops for one iteration; out[i] receives run i's next token (argmax of
   its last row) when runs[i].wants_token. */
int exec_iteration(struct exec_model *m, const struct npu_prog_op *ops, uint32_t nops,
                   const struct exec_batch *b, uint32_t *out, float *logit);

/* Part i of `parts` of batch b (R rows): its rows [i R / parts, (i + 1) R / parts), a run
   cut where a boundary falls inside it (only a run's last piece wants its token); runs[]
   receives the part's runs, orig[j] the batch's index of runs[j]. */
struct exec_batch exec_batch_part(const struct exec_batch *b, uint32_t R, uint32_t i,
                                  uint32_t parts, struct exec_run *runs, uint32_t *orig);

/* A pass over an iteration's ops starts with the expert ring and the staging state
   forgotten, and ends charging to outside the layers, one iteration counted. */
void exec_pass_start(struct exec_model *m);
void exec_pass_end(struct exec_model *m);

/* ---- model_disagg.c: attention/expert disaggregation (plan.disagg) */

/* A replica's iteration (b may hold no runs: the replica still takes part in every
   dispatch round, with no rows): its rows in plan.micro_batches parts that ping-pong with
   the expert instance layer by layer (part i + 1's attention runs while the experts serve
   part i). out/logit as exec_iteration. */
int exec_iteration_disagg(struct exec_model *m, const struct npu_prog_op *ops, uint32_t nops,
                          const struct exec_batch *b, uint32_t *out, float *logit);
/* The expert instance's part of one iteration: every MoE op of the program, once per
   micro-batch, served for every replica at once. */
int exec_iteration_experts(struct exec_model *m, const struct npu_prog_op *ops, uint32_t nops);

/* One op of an iteration's program (the head, a layer op, staging, a stage's send or
   receive); whether it has rows to run at all in batch b. */
int exec_op(struct exec_model *m, const struct npu_prog_op *op, const struct exec_batch *b,
            uint32_t *out, float *logit);
bool exec_op_has_rows(const struct npu_prog_op *op, const struct exec_batch *b);
/* Whether every run (the prefill runs too, not only the decode runs) has rows in op's layer. */
bool exec_op_runs_all(const struct npu_prog_op *op, const struct exec_batch *b);
/* The rows op runs over in batch b: every run's, or (outside the prefill runs' layers) the
   decode runs' alone. */
uint32_t exec_op_rows(const struct npu_prog_op *op, const struct exec_batch *b);
/* Whether layer l + 1 runs in batch b on this core's stage after layer l. */
bool exec_next_on_stage(const struct exec_model *m, uint32_t l, const struct exec_batch *b);
/* Whether layer l loads the next layer's non-expert shares while it runs in batch b (the
   plan's second staging copy, or its one copy after the last MoE route): the next layer
   runs in b on this core's stage, and l's tiles are not keyed by tile reuse. */
bool exec_stage_ahead(const struct exec_model *m, uint32_t l, const struct exec_batch *b);

/* ---- model_reuse.c: layer reuse (performance mode) */

/* From exec_init: reads the bootarg layer_reuse (refused in functional mode). */
int exec_reuse_init(struct exec_model *m);
/* When ops[0] starts a run of layers of one class (docs/images.md, "Layer reuse"): runs
   one of them in full (recorded in a replay slot) unless the class was recorded before,
   and replays the others; *used = the ops covered. *used = 0: not a layer run, the caller
   runs ops[0]. 0 or a negative npu_status. */
int exec_reuse_layers(struct exec_model *m, const struct npu_prog_op *ops, uint32_t nops,
                      const struct exec_batch *b, uint32_t *used);

/* model_reuse.c, for both kinds of classes: recording what this core does between
   exec_record_begin and exec_record_end in replay slot `slot` (the engines idle, the group
   started together: a barrier), its chip time and what it added to layer m->acct.layer's
   statistics (descriptors excepted); and repeating a slot `count` times (the hart sleeps the
   spans; the caller adds the statistics). 0, or the chip's refusal (printed). */
struct exec_recording {
    uint32_t slot;
    uint64_t t0;
    struct exec_stats before;
};
int exec_record_begin(struct exec_model *m, uint32_t slot, struct exec_recording *r);
int exec_record_end(struct exec_model *m, const struct exec_recording *r, uint64_t *span_ps,
                    struct exec_stats *delta);
int exec_replay_slot(struct exec_model *m, uint32_t slot, uint32_t count, uint64_t span_ps);
/* Adds the layer replays' statistics not added yet (model_reuse.c adds them lazily) to the
   per-layer statistics: before these are read. */
void exec_reuse_settle(struct exec_model *m);
/* How far a recorded context end is from `end` (of `runs` runs summed), or UINT64_MAX if
   beyond the tolerance: shape keys, m->lreuse.tol per run and a quarter of the context;
   otherwise none. */
uint64_t exec_reuse_end_gap(const struct exec_model *m, uint32_t recorded, uint32_t end,
                            uint64_t runs);

struct exec_tile;
/* model_reuse_tile.c: from layer_op, one tile of op (rows in tile, residual rows at x):
   replays a recorded tile of its class (consecutive replays of a class are repeated at
   once: exec_reuse_tile_flush ends the op's), or runs it in full, recorded if keyed. 0 or
   a negative npu_status. */
int exec_reuse_tile(struct exec_model *m, const struct npu_prog_op *op, struct exec_tile *tile,
                    uint64_t x);
int exec_reuse_tile_flush(struct exec_model *m);
/* The MoE over the layer's passes under tile reuse (model_moe_wide.c, keyed like a MoE
   tile): the rows per expert's copy of the group's routing ([num_experts][copies],
   moe_copy_index; scratch) and the busiest rank's routed pairs under layer l's map (*load);
   the class of a unit (flags EXEC_OP_WIDE_*) over n rows at that load, or NULL (find:
   marks it used; new: a slot for it in *out, NULL when every class is pinned; 0 or a
   negative npu_status); recording one (exec_record_begin, _end) and replaying one (at
   once). */
const uint32_t *exec_reuse_wide_draw(struct exec_model *m, uint32_t l,
                                     const struct exec_tile *tile, uint32_t *load);
struct exec_tile_class *exec_reuse_unit_find(struct exec_model *m, uint32_t flags, uint32_t n,
                                             uint32_t load, uint8_t sides);
int exec_reuse_unit_new(struct exec_model *m, uint32_t flags, uint32_t n, uint32_t load,
                        uint8_t sides, struct exec_tile_class **out);
int exec_reuse_unit_begin(struct exec_model *m, struct exec_tile_class *c,
                          struct exec_recording *r);
int exec_reuse_unit_end(struct exec_model *m, struct exec_tile_class *c,
                        const struct exec_recording *r);
int exec_reuse_unit_replay(struct exec_model *m, struct exec_tile_class *c);
uint8_t exec_reuse_tile_sides(const struct exec_tile *tile);
int exec_reuse_sides_missing(struct exec_model *m, const struct exec_tile_class *c,
                             const struct exec_tile *tile);
/* The LM head under layer reuse (model_reuse_tile.c): replays the recorded head of these
   rows (nw wanting tokens) and first-piece state, else records run(m, arg) (or runs it
   when no slot is free). */
int exec_reuse_head(struct exec_model *m, uint32_t nw,
                    int (*run)(struct exec_model *m, const void *arg), const void *arg);
/* A MoE layer's combines that wait for the next layer's first pass (model_layer_ops.c,
   layer_op_fused): run them now (before any op but the next layer's over the same rows);
   whether some wait. */
int exec_layer_settle(struct exec_model *m);
bool exec_layer_pending(void);
/* Whether op may run while a layer's combines wait: the next layer's staging, or a fused
   MoE layer's ops (its attention takes them or runs them first, its MoE op is empty). */
bool exec_op_keeps_combines(const struct exec_model *m, const struct npu_prog_op *op);
/* after a failed pass: its combines, rows, FFN end, the MoE over the layer's waiting
   exchange, spill and combine pins */
void exec_layer_forget(struct exec_model *m);
/* What a layer's last op left to the next layer's attention (its MoE rows, model_moe_rows.c;
   a dense layer's last FFN tile's all-reduce and add, model_layer_ops.c ffn_later): run it
   now (before any other op); whether some waits. */
int exec_layer_rows_settle(struct exec_model *m);
bool exec_layer_rows_pending(void);
/* The MoE's outputs into the residual rows tile by tile (model_moe_rows.c): whether the
   MoE op over tile (its only one) leaves them to the next layer's attention; start:
   the first tile's rows gathered and added, the rest waiting (slice: each rank's rows of
   them); take: those up to op row `upto` where layer l's attention over the rows at x
   reads them, else all (any other reader); settle: all; 0 or a negative npu_status. */
bool exec_moe_rows_defers(const struct exec_model *m, const struct exec_tile *tile);
int exec_moe_rows_start(struct exec_model *m, uint32_t l, const struct exec_tile *tile,
                        uint32_t slice);
int exec_moe_rows_take(struct exec_model *m, uint32_t l, uint64_t x, uint32_t upto);
int exec_moe_rows_settle(struct exec_model *m);
bool exec_moe_rows_pending(void);
void exec_moe_rows_forget(void); /* after a failed pass (exec_layer_forget) */
/* Called by moe_route once the router's GEMM is issued, before its softmax: runs what
   layer_op_fused left to run beside that GEMM (the previous layer's combine of the next
   group), or nothing. 0 or a negative npu_status. */
int exec_layer_beside_route(struct exec_model *m);
/* Runs one layer op over every tile of the runs' rows, which start at residual row row0;
   the residual rows move in and out unless in SRAM. A tile may replay a recorded one of its
   shape instead (tile reuse, model_reuse_tile.c). The op loops: model_layer_ops.c. */
int exec_layer_op(struct exec_model *m, const struct npu_prog_op *op,
                  const struct exec_run *runs, uint32_t nruns, uint32_t row0, uint32_t rows);
/* EXEC_OP_PREFETCH's copies on the second DMA queue: tile->back (if any), then tile->pre
   (if any). */
void exec_tile_side_copies(struct exec_model *m, const struct exec_tile *tile);
/* One tile of op in full: its residual rows in (unless in SRAM), the op, out. */
int exec_tile_full(struct exec_model *m, const struct npu_prog_op *op, struct exec_tile *tile,
                   uint64_t x);
/* Forgets which experts the group staged (a new layer's staging). */
void exec_reuse_tile_new_layer(struct exec_model *m);

/* Internal API shared by the op files. */
struct npu_desc;
int exec_flush(struct exec_model *m);
/* Puts the chain on the engines and waits only for its descriptors that touch [addr, addr +
   bytes) (exec_flush waits for all): what else is queued runs on. */
int exec_wait_for(struct exec_model *m, uint64_t addr, uint64_t bytes);
/* exec_wait_for before a collective on [addr, addr + bytes): also until the vector queue
   holds no more than the agreement accepts (NOC_COMM_QUEUED_MAX). */
int exec_wait_for_collective(struct exec_model *m, uint64_t addr, uint64_t bytes);
/* The category the hart's time goes to from now (no flush: the engines may still run what
   an earlier category queued). */
void exec_set_cat(struct exec_model *m, enum exec_cat cat);
/* Runs what is queued and charges it to the current category and layer. */
void exec_charge(struct exec_model *m);
/* Charges the hart's time and counters so far to the current category and layer, without
   waiting for the engines (exec_set_cat to the same category charges nothing). */
void exec_charge_now(struct exec_model *m);
/* Charges what ran and what is queued to the current layer, then moves on to `layer`
   (num_layers: outside the layers). */
void exec_set_layer(struct exec_model *m, uint32_t layer);
/* to += s, to += n x s (n replays of one recording), to -= s: every counter of the
   statistics. */
void exec_stats_add(struct exec_stats *to, const struct exec_stats *s);
void exec_stats_add_times(struct exec_stats *to, const struct exec_stats *s, uint32_t n);
void exec_stats_sub(struct exec_stats *to, const struct exec_stats *s);
/* Restarts the category accounting from the counters as they are now, charging nothing
   (what a replay adds is charged by the replay). */
void exec_rebase_cat(struct exec_model *m);
void exec_vec(struct exec_model *m, struct vector_op_args v);
/* v with fp32 operands (statistics, scores), or with the activations' type. */
static inline struct vector_op_args exec_vec_f32(struct vector_op_args v)
{
    v.x_type = v.y_type = v.out_type = NPU_DTYPE_FP32;
    return v;
}
static inline struct vector_op_args exec_vec_act(const struct exec_model *m,
                                                 struct vector_op_args v)
{
    v.x_type = v.y_type = v.out_type = m->buf.dt;
    return v;
}
void exec_copy(struct exec_model *m, uint64_t dst, uint64_t src, uint64_t rows,
               uint64_t row_bytes, uint64_t src_stride, uint64_t dst_stride);
/* A gather (exec_gather): rows rows of row_bytes into dst (contiguous), row r being row
   index[r] of a table whose rows are table_stride bytes apart (0: row_bytes). */
struct exec_gather_args {
    uint64_t dst, table;
    const uint32_t *index; /* rows entries */
    uint32_t rows;
    uint64_t row_bytes, table_stride;
    uint32_t table_rows; /* every index is below it (0: unknown; the list is scanned) */
};
/* One DMA descriptor per NPU_GATHER_ROWS_MAX rows. HAZARD: the engine reads index when
   the gather completes (functional mode), so it must not change until then: the serving
   mailbox's tokens change once the iteration is answered, and exec_pass_end waits for
   every gather issued (exec_wait_gathers); a list the firmware rewrites waits for its
   gather first (exec_wait_for on the list). */
void exec_gather(struct exec_model *m, const struct exec_gather_args *g);
/* Waits until the gathers issued since the last call are complete (only those: their index
   lists' range); 0 or the wait's error. */
int exec_wait_gathers(struct exec_model *m);
void exec_gemm(struct exec_model *m, uint64_t c, uint64_t a, uint64_t b, uint32_t rows,
               uint32_t n, uint32_t k, uint32_t lda, uint32_t ldb, uint32_t ldc, bool trans_b,
               bool f32_out, bool accumulate);
/* exec_flush, then waits for the side loads as well (the second DMA queue): the engines
   idle. */
int exec_drain(struct exec_model *m);
/* Connects the chain to the hazard tracker (hz_set_submit); exec_init calls it. */
void exec_chain_init(const struct exec_model *m);
/* exec_gemm's operands as named fields, and a batch: batch > 1 GEMMs of one shape in one
   command (npu/matrix.h), the i-th on a + i * stride_a, b + i * stride_b, c + i * stride_c
   (bytes; 0 shares an operand). The array pays one weight load and one drain for all. */
struct exec_gemm_args {
    uint64_t c, a, b;
    uint32_t rows, n, k, lda, ldb, ldc;
    bool trans_b, f32_out, accumulate;
    uint32_t batch;
    uint64_t stride_a, stride_b, stride_c;
};
void exec_gemm_many(struct exec_model *m, const struct exec_gemm_args *g);
/* bytes from src to dst whose values matter in performance mode too (state the firmware
   reads back, such as a dispatch's plan words): DMA copies that move their bytes in every
   mode (KEEP_DATA, in pieces of NPU_KEEP_DATA_MAX), on the chain's queue or the second. */
void exec_copy_kept(struct exec_model *m, uint64_t dst, uint64_t src, uint64_t bytes, bool side);
/* Copies bytes from HBM in pieces the DMA takes (model_exec.c). */
void exec_load_rows(struct exec_model *m, uint64_t dst, uint64_t src, uint64_t bytes);
/* bytes from src to dst on the second DMA queue: beside the chain (exec_flush does not
   wait for it; a later reader or writer of either range waits by its data, exec_drain for
   all). HAZARD: a peer's NoC write into src is not a chain descriptor: before a collective
   that may write src, drain, or wait for src's range (exec_wait_for_collective, which reads
   the loads table); exec_flush alone does not order it. */
void exec_copy_side(struct exec_model *m, uint64_t dst, uint64_t src, uint64_t bytes);
/* Whether the second DMA queue has finished all it was given (its loads then hold up
   nothing queued behind them). */
bool exec_side_idle(struct exec_model *m);
/* Where block `block` (an expert's id) of this rank's share of (layer, kind) is in SRAM, or
   0 if it must be streamed from HBM (the LM head of a non-resident plan). */
uint64_t exec_share_addr(struct exec_model *m, const struct npu_image_tensor *t,
                         uint32_t layer, enum model_tensor_kind kind, uint32_t block);
/* EP: where block `block` (0-based in this rank's share) of expert tensor (layer, kind) is,
   loading its first `bytes` (the expert slice it holds) through the ring if staged. */
uint64_t exec_expert_slice_addr(struct exec_model *m, uint32_t layer, enum model_tensor_kind kind,
                                uint32_t block, uint64_t bytes);
/* An expert ring slot of at least `bytes` as scratch while no expert GEMM will read the
   ring before the next loads into it (the MoE over the layer's first pass, whose
   dispatches do not prefetch): the slot the ring fills last, no longer holding a matrix;
   0 without a ring or where a slot is smaller. The loads into it wait for its readers and
   writers by their data (model_hazard.h). */
uint64_t exec_ring_scratch(struct exec_model *m, uint64_t bytes);
/* The ring's slots that [lo, hi) overlaps hold no matrix any more (something else loads
   there). */
void exec_ring_forget(struct exec_model *m, uint64_t lo, uint64_t hi);
/* A piece of an expert tensor for the ring: rows of row_bytes at src (global HBM address),
   src_stride apart, named (t, block, part) in the ring (part 0: a whole slice of t's block
   `block`, block0-based as the map numbers it; others a piece of it). */
struct exec_ring_src {
    const struct npu_image_tensor *t;
    uint32_t block, part;
    uint64_t src;
    uint64_t rows, row_bytes, src_stride;
};
/* Loads r through the expert ring (packed: rows x row_bytes) unless a slot holds it; its
   address in SRAM (model_exec.c). */
uint64_t exec_ring_load(struct exec_model *m, uint32_t l, const struct exec_ring_src *r);

/* The global address of image offset off (HBM). */
uint64_t exec_hbm_addr(const struct exec_model *m, uint64_t off);
/* Y[T][N] = X[T][K] W^T with this rank's share of tensor (layer, kind), block `block`;
   afterwards every rank holds all of Y (model_wgemm.c). */
int exec_wgemm(struct exec_model *m, enum npu_gemm g, uint64_t y, uint64_t x, uint32_t rows,
               uint32_t layer, enum model_tensor_kind kind, uint32_t block, uint32_t n,
               uint32_t k);
/* This rank's share of the GEMM without the collective (model_exec.c), and an all-reduce
   of a partial result: a column-parallel GEMM followed by a row-parallel one needs no
   collective between them (Megatron-LM's pairing) and one all-reduce after. */
void exec_wgemm_local(struct exec_model *m, enum npu_gemm g, uint64_t y, uint64_t x,
                      uint32_t rows, uint32_t layer, enum model_tensor_kind kind, uint32_t block,
                      uint32_t n, uint32_t ldx);
/* q[T][qd], k[T][kvd], v[T][kvd] = X[T][K] (Wq | Wk | Wv)^T of layer `layer`: as three
   exec_wgemm, but under MN or 2D with one GEMM and one collective for the three. */
int exec_wgemm_qkv(struct exec_model *m, uint64_t q, uint64_t k, uint64_t v, uint64_t x,
                   uint32_t rows, uint32_t layer);
/* The columns [*c0, *c1) of X that this rank's share of `kind` in layer `layer` multiplies
   (its K range: all of X but under 2-D and K partitions). */
void exec_wgemm_cols(const struct exec_model *m, uint32_t layer, enum model_tensor_kind kind,
                     uint32_t *c0, uint32_t *c1);
/* exec_wgemm_qkv in two parts, so that other work may go between: start issues the fused
   GEMM into yqkv (false: the shares do not fuse, nothing issued), finish runs the
   collectives (or, not started, the three exec_wgemm). */
bool exec_wgemm_qkv_start(struct exec_model *m, uint64_t x, uint32_t rows, uint32_t layer);
/* The exchange of the QKV chunks' pieces each rank reads (model_attn_xchg.c): its blocks,
   and the columns [cols[i][0], cols[i][1]) of q, k and v this rank reads (only those are
   unchunked). */
struct exec_qkv_xchg {
    struct noc_exchange_args xg;
    uint32_t cols[3][2];
};
/* xg (2D, started; else NULL): instead of the all-gather along the grid's columns, this
   exchange of the pieces each rank reads. */
int exec_wgemm_qkv_finish(struct exec_model *m, uint64_t q, uint64_t k, uint64_t v, uint64_t x,
                          uint32_t rows, uint32_t layer, bool started, bool after,
                          const struct exec_qkv_xchg *xg);
/* The fused QKV GEMM's chunks under the 2D partition (false: not 2D, or the shares do not
   fuse): chunk i (grid row i's) at base + i x rows x width elements, [rows][width], its q
   share's q columns first, then k's, then v's; bytes: all parts' chunks. */
struct exec_qkv_chunks {
    uint64_t base, bytes;
    uint32_t parts, width, q, k, v;
};
bool exec_wgemm_qkv_chunks(struct exec_model *m, uint32_t layer, uint32_t rows,
                           struct exec_qkv_chunks *out);
/* exec_wgemm in two parts: start issues the share GEMMs, finish completes Y by the
   collective once the queue is done (after: once the queued work on the collective's
   buffer is; the rest runs beside it). */
void exec_wgemm_start(struct exec_model *m, enum npu_gemm g, uint64_t y, uint64_t x,
                      uint32_t rows, uint32_t layer, enum model_tensor_kind kind,
                      uint32_t block, uint32_t n, uint32_t k);
int exec_wgemm_finish(struct exec_model *m, enum npu_gemm g, uint64_t y, uint32_t rows,
                      uint32_t layer, enum model_tensor_kind kind, uint32_t n, bool after);
int exec_allreduce(struct exec_model *m, uint64_t y, uint64_t count, enum npu_dtype dt);
/* The same once the queued work on y is done (exec_wait_for): the rest of the chain runs
   beside the collective. */
int exec_allreduce_after(struct exec_model *m, uint64_t y, uint64_t count, enum npu_dtype dt);
/* This rank's share of (layer, kind) alone, y[rows][share rows] (MN: its output columns),
   weights resident, staged or streamed; no collective (the vocab-parallel LM head). */
void exec_wgemm_own(struct exec_model *m, uint64_t y, uint64_t x, uint32_t rows,
                    uint32_t layer, enum model_tensor_kind kind, uint32_t k);
/* The exchange of named blocks a (noc_exchange_blocks), when exec_collective would run. */
int exec_exchange(struct exec_model *m, const struct noc_exchange_args *a, bool after);
/* In place: rank r's chunk of y (count elements) to every rank. */
int exec_allgather(struct exec_model *m, uint64_t y, uint64_t count, enum npu_dtype dt);
/* An all-reduce of y with `op` (or, gather, an all-gather) over the ranks, once the queued
   work is done or (after) once the queued work on y is: the rest runs beside it. The ones
   above are its common cases. */
int exec_collective(struct exec_model *m, bool gather, enum noc_reduce_op op, uint64_t y,
                    uint64_t count, enum npu_dtype dt, bool after);
/* In place, summing: rank r's chunk of y (count elements, the NoC driver's chunks) then
   holds the sum over the ranks; when, as exec_collective's. */
int exec_reduce_scatter(struct exec_model *m, uint64_t y, uint64_t count, enum npu_dtype dt,
                        bool after);
/* Whether the FFN's up GEMMs are MN and its down GEMM K over several ranks (expert: the
   experts' GEMMs): then its hidden activations stay split and only the output is reduced. */
bool exec_ffn_paired(const struct exec_model *m, bool expert);
/* Address of a replicated tensor (norms, router) of this layer, in SRAM. */
uint64_t exec_weight_addr(struct exec_model *m, uint32_t layer, enum model_tensor_kind kind);
/* Stages layer l's shares but the experts (non-resident plans), unless they were loaded
   while the layer before ran; with `next` (layer l + 1 runs after it in this iteration) and
   a double buffer (plan.stage_double), loads layer l + 1's beside them on the second DMA
   queue. */
void exec_stage_layer(struct exec_model *m, uint32_t l, bool next);
/* Under a dense FFN, that load of layer l + 1's shares waits for layer l's FFN: called as
   it starts (its attention's KV loads done), it issues them then; otherwise nothing. */
void exec_stage_next(struct exec_model *m, uint32_t l);
/* Layer reuse's steady state of staging (model_reuse.c): layer l's shares count as loaded
   (before: by the layer before, or a replay standing for it; load: loaded now, outside any
   recording, where no layer before loads them), so that a recording of l holds only the
   next layer's loads ahead, as each replay stands for. */
void exec_stage_steady(struct exec_model *m, uint32_t l, bool before, bool load);
/* With one staging copy, layer l + 1's shares load into it once layer l's last router
   GEMM (route_last: the last reader of layer l's shares) is issued, on the second DMA
   queue behind those readers, beside the experts' GEMMs; otherwise nothing. */
void exec_stage_after_route(struct exec_model *m, uint32_t l);
/* One staging copy: the next layer's shares load once a dense layer's last tile has issued
   its FFN GEMMs (where exec_layer_dense_overlapped runs the layer, and the layer loads the
   next one's: exec_stage_ahead). */
void exec_stage_after_ffn(struct exec_model *m, uint32_t l);
/* Whether a dense layer's attention op runs its tiles overlapped with their FFN
   (layer_op_dense_overlapped), where tile reuse does not key its tiles. */
bool exec_layer_dense_overlapped(const struct exec_model *m);
/* Stages expert e of layer l (non-resident plans); counts its bytes. */
void exec_stage_expert(struct exec_model *m, uint32_t layer, uint32_t e);
/* Layer l's staged non-expert shares: [*lo, *hi) (empty where resident). */
void exec_stage_copy(const struct exec_model *m, uint32_t l, uint64_t *lo, uint64_t *hi);
/* In the model's last layer (head_due), once the layer has queued its last load into the
   staging buffer: the first piece of an LM head that streams through it (model_wgemm.c,
   share_piece) loads now on the second DMA queue, into the half whose readers were issued
   earliest, so that the head's first GEMM need not wait for it after the layer's combine.
   `read`: every reader of the layer's own staged shares is issued (a MoE layer after its
   experts); else (a dense FFN as it starts) a half holding them is not used, and nothing
   loads if both do. */
void exec_head_ahead(struct exec_model *m, uint32_t l, bool read);
uint64_t exec_act(const struct exec_model *m, uint64_t buf, uint64_t row, uint64_t width);

/* ---- model_attn.c: the KV cache of this core */

/* Address of K (v false) or V at local row `row` (npu_layout.h) of cache k in layer l, and
   how many rows from it on are contiguous (the rest of its pool block and of the blocks with
   the following ids after it, which the pool keeps next to each other; a ring segment is
   contiguous). */
uint64_t exec_kv_addr(const struct exec_model *m, const struct exec_kv_cache *k, uint32_t l,
                      bool v, uint32_t row, uint32_t *span);
/* Local rows this rank holds of positions [0, count). */
uint32_t exec_kv_local_count(const struct exec_model *m, uint32_t req, uint32_t count);

/* ---- model_layer.c, model_attn.c: the ops of one layer on one tile of rows */
struct exec_seg {            /* one request's rows inside a tile */
    const struct exec_run *run;
    uint32_t req, pos;       /* request, position of the first row */
    uint32_t row, count;     /* rows [row, row + count) of the tile */
};
/* A copy on the second DMA queue (bytes 0: none). */
struct exec_side_copy {
    uint64_t dst, src, bytes;
};

struct exec_tile {
    uint32_t t0, n;          /* rows [t0, t0 + n) of the iteration */
    struct exec_seg segs[EXEC_RUNS_MAX];
    uint32_t nsegs;
    uint64_t xt;             /* [n][d]: the tile's residual rows */
    bool in_xt;              /* the rows are in xt already and stay there (a fused layer's
                                group, model_layer_ops.c): no copies from and to HBM */
    /* EXEC_OP_PREFETCH: the group before's received rows going to the spill and its rows
       going back (MoE over the layer under tile reuse), then the next tile's rows loading,
       on the second DMA queue at its start */
    struct exec_side_copy spill, back, pre;
    bool whole;              /* every row of its runs: the op's only tile */
};
/* Interpreter-only op flags (the image's are NPU_OP_*, below these): a dense layer's
   attention op carrying its FFN over the same tile, whose rows come in ahead (in xt) and
   go back after it (model_layer_ops.c, layer_op_dense_fused); and loading the next tile's rows
   (tile->pre_*) at its start, so that a recorded tile holds that load too. */
#define EXEC_OP_WITH_FFN 0x100u
#define EXEC_OP_PREFETCH 0x200u
#define EXEC_OP_LAST 0x400u /* the layer's last tile: its FFN starts the next layer's load */
#define EXEC_OP_GROUP 0x800u /* attention over a MoE group's tiles in xt, overlapped: the
                                unit tile reuse records (model_layer_ops.c, group_attention) */
/* The MoE over the layer's units tile reuse records (model_moe_wide.c): a group's route,
   dispatch and spill (first pass), its combine (third pass). */
#define EXEC_OP_WIDE_DISPATCH 0x1000u
#define EXEC_OP_WIDE_COMBINE 0x2000u
/* tile = the first n rows of the runs (segments per run; xt and the rest unset). */
void exec_make_tile(const struct exec_run *runs, uint32_t nruns, uint32_t n,
                    struct exec_tile *tile);
void exec_rmsnorm(struct exec_model *m, uint64_t out, uint64_t x, uint64_t w, uint32_t n,
                  uint32_t d);
void exec_add_rows(struct exec_model *m, uint64_t xt, uint64_t y, uint32_t n, uint32_t d);
/* out[n][d] = SwiGLU FFN of x (expert e, or the dense FFN). With a paired split and
   `partial`, out is this rank's partial sum and the caller all-reduces it. */
int exec_swiglu(struct exec_model *m, uint32_t l, uint64_t out, uint64_t x, uint32_t n,
                bool expert, uint32_t e, uint32_t ff, bool partial);
/* Split attention: segment g's positions in the window, run query-parallel (model_attn.c,
   "The window"); 0 unsplit. */
uint32_t exec_attn_window(const struct exec_model *m, const struct exec_tile *tile,
                          const struct exec_seg *g);
int exec_attention(struct exec_model *m, uint32_t layer, bool sliding,
                   const struct exec_tile *tile);
/* exec_attention in three parts, so that tile i + 1's norm and QKV GEMM (begin; false:
   its shares do not fuse, nothing issued) may run while tile i's O collective does (end
   with `after`, model_layer_ops.c): mid runs the QKV collectives through the O GEMM's
   issue (overlapped: the end will wait only for the O GEMM, so the cache stores may go
   last). */
bool exec_attention_begin(struct exec_model *m, uint32_t layer, const struct exec_tile *tile);
/* The first steps of layer `layer`'s attention over `tile` (the whole op's rows), loaded now
   (side: on the second DMA queue, behind what it still has to load) instead of when that
   attention begins (model_attn.c, attn_prefetch). Only where nothing but that attention
   comes before them: run_ops's attn_next (model_iter.c). */
void exec_attention_prefetch_next(struct exec_model *m, uint32_t layer,
                                  const struct exec_tile *tile, bool side);
/* Forgets the steps exec_attention_prefetch_next loaded that no attention took (layer
   reuse: a recording's load for the next layer, which a replay stands in for). */
void exec_attention_prefetch_drop(void);
/* The attention steps kept in the step ring for the op's later tiles (model_attn.c,
   attn_kept): forgets those whose rows a descriptor with accesses h writes; those with
   bytes in [lo, hi) (a peer's writes there); all. */
struct hz_access;
void exec_attention_kept_written(const struct hz_access *h);
void exec_attention_kept_drop_range(uint64_t lo, uint64_t hi);
void exec_attention_kept_drop(void);
/* Layer reuse: the first steps of attention op's layer over its rows in batch b loaded now,
   outside any recording (the stage's first layer's, which no layer before it loaded). */
void exec_attention_preload(struct exec_model *m, const struct npu_prog_op *op,
                            const struct exec_batch *b);
/* Whether layer op (a MoE or dense FFN op over `rows` rows) loads the next layer's first
   attention steps as it runs, given run_ops's attn_next (model_layer_ops.c). */
bool exec_op_prefetches_attention(const struct exec_model *m, const struct npu_prog_op *op,
                                  uint32_t rows);
int exec_attention_mid(struct exec_model *m, uint32_t layer, bool sliding,
                       const struct exec_tile *tile, bool started, bool overlapped);
int exec_attention_end(struct exec_model *m, uint32_t layer, const struct exec_tile *tile,
                       bool after);
/* mid in three parts, so that two tiles may be in flight (model_layer_ops.c, with the O
   and QKV chunks outside attention's scratch, npu_layout.h's yo): qkv runs the QKV
   collectives (after: once the queued work on their buffers is done), steps issues the
   norms, RoPE and the softmax steps, out runs the combine or gather (after: likewise) and
   issues the O GEMM. */
int exec_attention_qkv(struct exec_model *m, uint32_t layer, bool sliding,
                       const struct exec_tile *tile, bool started, bool after);
int exec_attention_steps(struct exec_model *m, uint32_t layer, bool sliding,
                         const struct exec_tile *tile, bool overlapped);
int exec_attention_out(struct exec_model *m, uint32_t layer, bool sliding,
                       const struct exec_tile *tile, bool overlapped, bool after);
int exec_ffn(struct exec_model *m, uint32_t layer, const struct exec_tile *tile);
/* A paired dense FFN over consecutive tiles in three parts, so that tile i's all-reduce
   runs while tile i + 1's gate and up GEMM does (model_layer_ops.c): begin (norm, gate and up),
   middle (SwiGLU, down GEMM), end (the all-reduce once the down GEMM is done, the
   residual add). Begin of tile i + 1 goes between middle and end of tile i. */
bool exec_ffn_pipelined(const struct exec_model *m);
void exec_ffn_begin(struct exec_model *m, uint32_t layer, const struct exec_tile *tile);
void exec_ffn_middle(struct exec_model *m, uint32_t layer, const struct exec_tile *tile);
int exec_ffn_end(struct exec_model *m, uint32_t layer, const struct exec_tile *tile);
int exec_moe(struct exec_model *m, uint32_t layer, const struct exec_tile *tile);

#endif
