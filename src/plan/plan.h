/* The planner (DESIGN.md §4), between the data and the program: for each candidate — precision
 * × checkpointing × micro-batch per length bucket, accumulation filling the recipe's batch — it
 * builds the program, reads its exact regions from the memory plan, models the footprint
 * around them and the step's time, and picks the fastest candidate that fits the budget.
 * The trainer runs what it picked; plan.json keeps it. */
#ifndef TR_PLAN_H
#define TR_PLAN_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/alloc.h"
#include "core/error.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "graph/program.h"
#include "graph/stages.h"
#include "models/models.h"
#include "plan/device.h"
#include "plan/shard.h"
#include "recipe/recipe.h"

#define TR_PLAN_MAX_BUCKETS 32   /* dynamic batching's length buckets */
#define TR_PLAN_BN_MIN_MICRO 8    /* batch norm's statistics: rows a micro-batch keeps at least */

enum tr_plan_precision { TR_PREC_FP32, TR_PREC_BF16, TR_PREC_FP16 };

/* One candidate's knobs: everything the trainer needs to build and run it. */
struct tr_knobs {
    int precision;            /* enum tr_plan_precision */
    int remat_mode;           /* enum tr_remat_mode */
    int remat_blocks;         /* blocks checkpointed, from the first (mode ≠ none) */
    bool dynamic;             /* dynamic batching: one micro-batch size per length bucket */
    int nbuckets;             /* fixed batching: one bucket, {seq, micro} */
    struct tr_length_bucket buckets[TR_PLAN_MAX_BUCKETS];
    int64_t micro;            /* fixed batching: rows a micro-batch (the last may hold fewer) */
    int64_t accumulation;     /* fixed batching: micro-batches a step, ⌈batch / micro⌉ */
    int64_t eval_batch;       /* rows an evaluation batch takes */
    int shard;                /* across ranks, ZeRO's stage: 1, each rank keeps and updates its
                               * shard of the optimizer's state (plan/shard.h); 2, of the summed
                               * gradients too, each micro-batch's gradients in the arena and
                               * summed into the shards after its backward; 3, of the
                               * parameters too, each read through copies gathered whole
                               * (graph.h: the gather pass); 0: every rank all */
    int pipeline;             /* stages the model's blocks are dealt to (graph/stages.h): 1, none */
    int first_block[TR_MAX_STAGES + 1];   /* stage s runs blocks first_block[s] … first_block[s + 1] − 1 */
    int tensor;               /* tensor parallelism: the ranks each block's layers are split over
                               * (graph.h; 0 or 1: none) */
    bool sequence;            /* and sequence parallelism beside it (graph.h): every micro-batch's
                               * length a multiple of tensor */
    int offload;              /* what lives in the host's memory: TR_OFFLOAD_* bits (0: nothing) */
    int saved_blocks;         /* TR_OFFLOAD_SAVED: the activations made before this block's forward
                               * (the embeddings' and the first blocks'); 0, or the model's blocks or
                               * more: every block's */
    int saved_largest;        /* TR_OFFLOAD_SAVED: only the largest of them, until they make this
                               * percent of their bytes (graph.h: tr_offload_grain); 0: all */
};

/* The host's memory as extra room (optimize.offload): the optimizer's state, its update and a
 * host copy of the parameters (train/optim.h: tr_optim_offload); saved activations between
 * their forward and backward (graph.h: the offload pass). */
enum { TR_OFFLOAD_STATE = 1, TR_OFFLOAD_SAVED = 2 };

/* The multiple every micro-batch's length is padded to under k: sequence parallelism's ranks. */
static inline int64_t tr_knobs_seq_multiple(const struct tr_knobs *k)
{
    return k->sequence && k->tensor > 1 ? k->tensor : 1;
}

/* Whether every optimizer step under knobs k is one micro-batch, one run of the schedule: then
 * the gradients are planned in the arena (memplan.h), since nothing adds up across runs. */
static inline bool tr_knobs_grads_in_arena(const struct tr_knobs *k)
{
    return k->pipeline < 2 && ((!k->dynamic && k->nbuckets == 1 && k->accumulation == 1 && !k->shard) || k->shard >= 2);
}

/* A program built for a set of knobs: the training one (differentiated, checkpointed) or the
 * evaluation one (forward only). */
struct tr_built {
    struct tr_graph g;
    struct tr_model m;
    struct tr_program p;
    int loss_scale;           /* training: autodiff's loss-scale input; else −1 */
    int remat_nodes;          /* recompute nodes the remat pass added */
    struct tr_stages stages;  /* pipelined: the split; p is job->stage's program */
    bool pipelined;
    int offloaded;            /* training: the activations the offload pass sends to the host */
};


/* A ceiling on the footprint below the recipe's budget, from this host (ceiling.c): a memory
 * cgroup's memory.max or memory.high, or an address-space limit (RLIMIT_AS, RLIMIT_DATA),
 * which counts what threads and OpenBLAS reserve beyond what they touch. */
enum tr_ceiling_kind { TR_CEILING_NONE, TR_CEILING_CGROUP, TR_CEILING_SPACE };
struct tr_ceiling {
    int kind;                 /* enum tr_ceiling_kind */
    uint64_t bytes;           /* the footprint must stay within it */
    uint64_t limit;           /* the limit itself: memory.max (or .high), or the rlimit */
    int64_t overhead;         /* SPACE: address space the run reserves beyond its footprint (so a
                               * footprint F needs a limit of F + overhead) */
    char name[32];            /* "memory.max", "memory.high", "RLIMIT_AS", "RLIMIT_DATA" */
    char said[1024];          /* the sentence `trainrun plan` prints: which, how much, why */
};

/* What the planner knows of the job: the recipe, the loaded data and the device. */
struct tr_plan_job {
    const struct tr_recipe *r;
    const struct tr_data *data;
    const struct tr_device *dev;
    int64_t seq;              /* text: the longest sequence of any split; else 1 */
    uint64_t budget;          /* bytes the footprint must stay within */
    uint64_t host_budget;     /* bytes of the host's memory offloading may take beside it */
    uint64_t base_bytes;      /* CPU host: the process's resident set at planning (binary,
                               * libraries, the loaded data); 0 for a profile */
    uint64_t prior_peak;      /* CPU host: its peak so far (loading held more for a while): no
                               * footprint is below it */
    struct tr_ceiling ceiling;   /* CPU host: the tightest of the host's ceilings, when below the
                                  * budget (the budget then is its bytes) */
    int world, rank;          /* the ranks the batch is shared by (1 alone) and whose regions are
                               * planned: with sharding they differ by rank (pipelined: the data
                               * ranks of one stage) */
    int stages, stage;        /* pipelined: the layout's stages (1: none) and this rank's */
    int tensors, tensor;      /* tensor parallel: the ranks a block is split over (1: none) and
                               * this rank's place among them */
    double bus_rate;          /* across ranks: the bus bytes a second the ranks sum at, measured
                               * (tr_comm_bus_rate); 0: unknown, their communication not forecast */
    double bus_latency;       /* and the seconds a small sum takes (0: unknown) */
    bool gather_ahead;        /* across ranks: ZeRO 3's copies gathered a block ahead, on a thread
                               * of their own (distributed.overlap as tr_plan_overlap resolves it) */
};

/* Tensor parallel (job->tensors > 1): the longest sequence planned for rounded up to a multiple
 * of the tensor ranks, which sequence parallelism pads every micro-batch to. */
static inline void tr_plan_job_round_seq(struct tr_plan_job *job)
{
    if (job->tensors > 1)
        job->seq = (job->seq + job->tensors - 1) / job->tensors * job->tensors;
}


/* Bytes a candidate takes outside the regions, by cause: modelled, never measured here. */
enum tr_outside {
    TR_OUT_BASE,              /* the process before its regions (CPU) or the CUDA context */
    TR_OUT_THREADS,           /* BLAS and OpenMP threads' buffers and stacks (calibrated) */
    TR_OUT_LOADER,            /* the loader's ring and its workers' scratch (computed) */
    TR_OUT_EVAL,              /* evaluation's batch buffers (computed) */
    TR_OUT_LIBRARY,           /* library workspaces the engine does not plan (profile) */
    TR_OUT_RANKS,             /* across ranks: the host buffers the collectives travel through,
                               * MPI's (or NCCL's) own, and on rank 0 of a sharded plan what a
                               * checkpoint gathers whole (computed) */
    TR_OUT_RESERVE,           /* the stated reserve: 2 % of the rest, at least 16 MiB */
    TR_NOUTSIDE
};

/* TR_OUT_… as plan.json keys it ("base", …) and in words for people. */
const char *tr_outside_key(int i);
const char *tr_outside_words(int i);

struct tr_candidate {
    struct tr_knobs k;
    size_t regions[TR_NREGIONS];   /* exact, from the memory plans: what the allocator will hold */
    uint64_t peak;                 /* Σ regions: the predicted peak of the regions */
    uint64_t outside[TR_NOUTSIDE];
    uint64_t footprint;            /* peak + Σ outside: what the OS or the driver will see */
    double step_seconds;           /* predicted time of one optimizer step (communication included) */
    double comm_seconds;           /* of it, across ranks: summing the gradients (and, sharded,
                                    * gathering the parameters), not overlapped; 0 when not forecast */
    double tensor_seconds;         /* of it, tensor parallel: the blocks' all-reduces (four a block
                                    * a micro-batch, and again in recomputation) at the bus rate */
    double tensor_bytes;           /* the bytes those all-reduces sum a step, a rank's */
    double flops, bytes_moved;     /* per step, recompute and padding included */
    double micro_steps;            /* micro-batches a step, on average */
    double padding;                /* padded slots per real token, on average (text) */
    int remat_nodes;
    bool fits;                     /* footprint ≤ budget (pipelined: every stage's), and host ≤ the
                                    * host budget */
    /* offloaded (k.offload): what the host's memory holds, by region (optimizer: the state;
     * params: their host copy; grads: theirs; arena: the activations' ring), exact from the
     * memory plans, and what crosses the host link a step */
    size_t host[TR_NREGIONS];
    uint64_t host_bytes;           /* Σ host */
    double link_bytes;             /* both ways, a step */
    double link_seconds;           /* their time at the host link's rate */
    double link_exposed;           /* of it, what the step waits for (the rest overlaps kernels) */
    /* pipelined (k's pipeline > 1): regions and footprint above are the job's stage's; per stage: */
    struct tr_stage_forecast {
        uint64_t peak, footprint;  /* its regions, and what it holds with everything outside them */
        double seconds;            /* one micro-batch's forward and backward through its nodes */
        double sent_bytes;         /* what it sends and receives a micro-batch */
    } stage[TR_MAX_STAGES];
    uint64_t worst_footprint;      /* the largest stage footprint: what must fit */
    double bubble;                 /* of the step, the stages' idle share (1F1B: (P − 1) / (m + P − 1) balanced) */
};

struct tr_plan {
    struct tr_device dev;
    uint64_t budget;
    uint64_t host_budget;          /* the host's memory offloading may take (budget.host_memory, or
                                    * what the machine can spare, measured) */
    int64_t batch, seq;
    int blocks;                    /* the model's checkpointable blocks */
    struct tr_candidate *cand;     /* every candidate considered, in search order */
    int ncand;
    int chosen;                    /* index into cand, or −1 when nothing fits */
    int smallest;                  /* the candidate with the smallest footprint (nothing fits: what
                                    * would, at which budget) */
    char reason[1024];             /* the decision in one sentence */
    bool replayed;                 /* from --plan FILE rather than searched */
    struct tr_ceiling ceiling;     /* the job's: what the budget was lowered to, and why */
    size_t *shard_bytes;           /* across ranks: each rank's optimizer state when sharded (world
                                    * entries; NULL alone) */
    int64_t *shard_elements;       /* and the parameters' elements of its shard (stage 2: the
                                    * gradients it keeps; stage 3: and the parameters) */
    bool stateful;                 /* the model keeps running statistics (batch norm): every rank
                                    * holds them whole, so ZeRO 3 is not searched */
    int world;
    double bus_rate;               /* the job's */
    char layout_why[320];          /* across ranks: why the layout (tr_plan_search_layouts), or "" */
};

/* This host's ceilings (ceiling.c). The tightest on a job's footprint, for a CPU host's job
 * whose base is measured; kind TR_CEILING_NONE when none is below budget. */
void tr_plan_ceiling(const struct tr_plan_job *job, uint64_t budget, struct tr_ceiling *out);
/* Why nothing fits under a ceiling: the limit a footprint needs, as a sentence, into out. */
void tr_plan_ceiling_refusal(const struct tr_ceiling *c, uint64_t footprint, char *out, size_t size);
/* The address space this process has yet to reserve before its first step: OpenBLAS's load
 * unless loaded, the threads' first region unless one ran (dev's calibration). */
struct tr_space tr_plan_space_pending(const struct tr_device *dev);
/* The tightest finite address-space limit (name "RLIMIT_AS" or "RLIMIT_DATA", bytes), or
 * bytes 0 when neither is set. */
struct tr_limit {
    const char *name;
    uint64_t bytes;
};
struct tr_limit tr_plan_space_limits(void);
/* Whether this process, with pending and extra more reserved, goes over an address-space
 * limit: 1 with the sentence naming the limit that would do into why, else 0. */
int tr_plan_space_refusal(struct tr_space pending, struct tr_space extra, char *why, size_t size);

/* The device: the named profile (from $TRAINRUN_DEVICES, else etc/devices.yaml in a checkout,
 * else the installed devices.yaml), or with profile NULL this host, calibrated once and cached
 * (unless TRAINRUN_NO_CACHE; recalibrate: measured again). 0 or TR_E… with the sentence in diag. */
int tr_plan_device(struct tr_device *d, const char *profile, bool recalibrate, struct tr_diag *diag);
/* The device a recipe's `device` names to train on: cpu (this host, as tr_plan_device), cuda or
 * cuda:N (that GPU, measured: tr_device_cuda), auto (the first GPU when one is seen, else
 * this host). 0 or TR_E… with the sentence in diag. */
int tr_plan_device_named(struct tr_device *d, const char *device, struct tr_diag *diag);
/* The bus rate (tr_plan_job's bus_rate) and *latency (its bus_latency) the last run of world ranks
 * on this host measured, 0 when none did, from the calibration cache; a multi-rank run's rank 0
 * saves what it measured. */
double tr_plan_bus_rate_cached(int world, double *latency);
void tr_plan_bus_rate_save(int world, double rate, double latency);
/* The kind of backend that sizes a device's kernels' workspaces (its kind's), or NULL when this
 * build has none for it (planning a GPU profile without CUDA: no workspace counted). */
const struct tr_backend_ops *tr_plan_backend(const struct tr_device *dev);
/* Its workspace_bytes, NULL without one. */
tr_workspace_fn tr_plan_workspace(const struct tr_device *dev);
/* The job of r on data and dev: refuses (TR_EINVAL, diag) a model that cannot read the data;
 * the longest sequence of any split; the budget, capped at the device's memory; the
 * process's peak resident set so far as the footprint's base (CPU). */
int tr_plan_job_init(struct tr_plan_job *job, const struct tr_recipe *r, const struct tr_data *data,
                     const struct tr_device *dev, struct tr_diag *diag);

/* distributed.overlap resolved for local_world ranks on this host of `threads` each: on, off, or
 * (auto) where the communication gets a core of its own — the host has more than its ranks'
 * threads. Without one it takes the trainer's: on 2 vCPUs and 2 ranks of 1 thread, bert-small's
 * step went from 0.134 to 0.151 s with 2 MiB buckets (bench/ranks-2026-12-06-overlap-epyc.txt).
 * The gradients' buckets and ZeRO 3's copies travel on threads of their own where it is on. */
bool tr_plan_overlap(const struct tr_recipe *r, int local_world, int threads);

/* Searches every candidate the recipe's knobs allow; fills p (free with tr_plan_free). 0 when
 * one fits (p->chosen); none fitting (TR_ENOFIT for the caller) is p->chosen < 0 with a 0
 * return; a negative TR_E… when the job cannot be planned at all (diag says why). */
int tr_plan_search(struct tr_plan *p, const struct tr_plan_job *job, struct tr_diag *diag);
/* The one candidate k (read from a saved plan), evaluated again for this job (a fixed micro-batch
 * counted again for its batch: a plan saved at another batch or rank count): p->chosen is 0
 * when it fits, −1 with the reason when it no longer does. */
/* The search across ranks' layouts (DESIGN.md §10, the decision tree's last step): ranks = data ×
 * pipeline, each layout's plan searched for its per-data-rank share of whole's batch (into
 * *share, which job->r then names) and stage 0's regions (every stage's footprint must fit);
 * optimize.parallel pins the stages (pipeline) or keeps the model whole (data); auto takes the
 * layout with the fewest stages that fits, so a model is spread only when no plan fits one rank
 * with the whole model. job's world, rank, stages and stage are set to the
 * layout chosen. 0 (p->chosen −1: nothing fits in any layout, p's reason naming the smallest
 * footprint, of the layout closest to fitting), or TR_EINVAL. */
int tr_plan_search_layouts(struct tr_plan *p, struct tr_plan_job *job, struct tr_recipe *share,
                           const struct tr_recipe *whole, int ranks, struct tr_diag *diag);
int tr_plan_replay(struct tr_plan *p, const struct tr_plan_job *job, const struct tr_knobs *k,
                   struct tr_diag *diag);
void tr_plan_free(struct tr_plan *p);
/* Pipelined (k's pipeline > 1): the micro-batches job's stage keeps between their forward and
 * backward under 1F1B — min(stages − stage, its micro-batches a step). */
int tr_plan_slots(const struct tr_plan_job *job, const struct tr_knobs *k);

/* Builds the program for knobs k: the model, the amp pass, autodiff and the remat pass for
 * training, and one memory plan per bucket (training) or at k->eval_batch (evaluation).
 * working_copies: 16-bit copies of the weights (what 16-bit GEMM hardware reads). 0, or
 * TR_EINVAL with the model's complaint in d. */
int tr_build(struct tr_built *b, const struct tr_plan_job *job, const struct tr_knobs *k, bool training,
             struct tr_diag *d);
void tr_built_free(struct tr_built *b);

/* The f32 master parameters of g, in bytes. */
size_t tr_plan_param_bytes(const struct tr_graph *g);
/* The optimizer's state for the parameters of g: each state tensor its descriptor keeps for
 * the recipe (recipe/optimizers.h), one per parameter. */
size_t tr_plan_optimizer_bytes(const struct tr_recipe *r, const struct tr_graph *g);
/* The same for the parameters a plan holds (a pipeline stage's: memplan.h; NULL: all). */
size_t tr_plan_param_bytes_held(const struct tr_graph *g, const struct tr_memplan *held);
size_t tr_plan_optimizer_bytes_held(const struct tr_recipe *r, const struct tr_graph *g, const struct tr_memplan *held);
/* The same for rank's shard of them among world ranks (plan/shard.h). */
size_t tr_plan_optimizer_shard_bytes(const struct tr_recipe *r, const struct tr_graph *g, int world, int rank);
/* The parameters' elements rank's shard holds among world ranks. */
int64_t tr_plan_shard_elements(const struct tr_graph *g, int world, int rank);

/* The predicted time of one pass of g at (B, S) on dev (cost.c), and the FLOPs and bytes
 * behind it (either pointer may be NULL). */
double tr_plan_step_seconds(const struct tr_graph *g, int64_t B, int64_t S, const struct tr_device *dev,
                            double *flops, double *bytes);
/* The bytes g's collectives (tensor parallelism's all-reduces, sequence parallelism's
 * all-gathers and reduce-scatters) sum or gather in one pass at (B, S), each the whole tensor's,
 * and their count in *count; *moved: what a ring moves of them, in units of (T − 1)/T of a
 * tensor — an all-reduce 2 of its bytes, a gather or scatter 1 (a slice moves nothing and is
 * not counted). */
double tr_plan_collective_bytes(const struct tr_graph *g, int64_t B, int64_t S, int *count, double *moved);
/* tr_plan_step_seconds for nodes[0 … count − 1] alone (NULL: the first count in creation order),
 * the collectives left out: their time is the bus's (tr_plan_collective_bytes). */
double tr_plan_nodes_seconds(const struct tr_graph *g, const int *nodes, int count, int64_t B, int64_t S,
                             const struct tr_device *dev, double *flops, double *bytes);
/* The blocks of g (differentiated) dealt to stages by the time model at (B, S): each block's
 * nodes' time, the embeddings' with the first stage and the head's with the last (stages.h). */
void tr_plan_balance(const struct tr_graph *g, int stages, int64_t B, int64_t S, const struct tr_device *dev,
                     int *first_block);
/* The same by memory: each block's parameters with their gradients and nstate optimizer tensors
 * (the embeddings' with the first stage, the head's with the last). */
void tr_plan_balance_memory(const struct tr_graph *g, int stages, int nstate, int *first_block);

/* The time model's view of one node bound at its sizes (cost.c): its kernel class (device.h:
 * TR_COST_CLASSES) with the work its curve is read at, and the precision it computes in. */
int tr_cost_class(const struct tr_node *n, const struct tr_tensor *in, const struct tr_tensor *out, double *work);
int tr_cost_precision(const struct tr_tensor *in, int nin);
/* The optimizer's part of a step on dev: zeroing the gradients, their norm, the update with
 * nstate state tensors a parameter. */
double tr_plan_optimizer_seconds(const struct tr_device *dev, int nstate, double param_bytes, double grad_bytes,
                                 double state_bytes);

/* Words for people: "fp32", "bf16", "fp16"; the checkpointing ("none", "selective", "full 3/12"). */
const char *tr_precision_name(int precision);
void tr_knobs_remat_words(const struct tr_knobs *k, int blocks, char *out, size_t size);
/* What k offloads, in words ("optimizer state and the first 3 of 12 blocks' activations"; brief:
 * "optimizer + activations 3/12", "activations largest 50%"), for a model of `blocks`; "" for
 * nothing. Saved some: the activations of some blocks alone, or the largest alone, not all. */
void tr_knobs_offload_words(const struct tr_knobs *k, int blocks, bool brief, char *out, size_t size);
bool tr_knobs_saved_some(const struct tr_knobs *k, int blocks);

/* plan.json (plan_json.c): the decision, its candidates and, after a run, the measurements. */
char *tr_plan_to_json(const struct tr_plan *p, bool all_candidates, const char *recipe_hash);
/* The chosen knobs of a saved plan.json; 0 or TR_EINVAL / TR_EIO with the sentence in diag. */
int tr_plan_read_knobs(const char *path, struct tr_knobs *k, struct tr_diag *diag);

/* One micro-step of built program b's largest plan, for the report: {"B", "S", "nodes",
 * "backward_from" (the first node not forward), "peak_node", "peak_bytes", "peak_op",
 * "live_bytes": the activations live, at most `columns` points (each the most of its nodes),
 * "largest": the tensors live at the peak, largest first: {bytes, dtype, shape, op, phase,
 * block, first_node, last_node}}. */
json_t *tr_plan_timeline_json(const struct tr_built *b, int columns);

/* The table of candidates and the decision (trainrun plan); explain: the memory timeline of
 * one step of the chosen plan and the largest tensors live at its peak. */
void tr_plan_print(const struct tr_plan *p, const struct tr_plan_job *job, bool explain, FILE *out);
/* A run's plan for people: in markdown for TensorBoard's text (the decision, then each region
 * and what lives outside them; caller frees; remat_nodes: the recompute nodes the training
 * program got), and in the lines its log opens with (planner, memory, batching with the
 * activation arena). */
char *tr_plan_markdown(const struct tr_plan *p, const struct tr_plan_job *job, int remat_nodes);
void tr_plan_print_run(const struct tr_plan *p, const struct tr_plan_job *job, size_t arena_bytes, FILE *out);
/* Across ranks, the communication a candidate's step was forecast to take, a line (nothing when
 * not forecast; the run's lines end with it). */
void tr_plan_print_comm(const struct tr_plan *p, const struct tr_candidate *c, FILE *out);

#endif
