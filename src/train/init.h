/* A run's first weights (DESIGN.md §9, model.init), before the trainer's first step: drawn as
 * the model builder says (seeded and counter-based), or read from a safetensors file — a
 * trainrun checkpoint, or a Hugging Face one as save_pretrained writes it or as the Hub holds
 * it (a base model without the task head, old gamma/beta names, 16-bit weights, buffers). */
#ifndef TR_INIT_H
#define TR_INIT_H

#include <stddef.h>
#include <stdint.h>

#include "backend/exec.h"
#include "core/error.h"

/* The model being initialised: the parameters and state of g, held where x says. */
struct tr_init_target {
    const struct tr_graph *g;
    struct tr_exec *x;          /* written through its host view (tr_exec_host), then pushed */
    uint64_t seed;              /* the recipe's: what drawn values come from */
    int64_t vocab;              /* text models: the tokenizer's vocabulary size; else 0 */
    const char *vocab_file;     /* the tokenizer's vocabulary file (named when the sizes differ), or NULL */
    int64_t max_len;            /* text models: model.max_len; else 0 */
};

/* What tr_init_load did, for the run's log (tr_init_summary) and for tests. */
struct tr_init_info {
    int loaded;                 /* parameters and state read from the file */
    int converted;              /* of those, stored as F16, BF16 or F64 and converted to f32 */
    int unprefixed;             /* of those, named without the base prefix (a BertModel's checkpoint) */
    int aliased;                /* of those, named gamma/beta for weight/bias (old LayerNorm names) */
    int ignored;                /* tensors of the file the model has no use for */
    char ignored_names[3][96];  /* the first of them, for the log */
    int fresh;                  /* task-head parameters the file lacks, drawn as without model.init */
    char fresh_head[96];        /* the head's prefix ("classifier.") */
    char base[96];              /* the base model's prefix ("bert.", "transformer."), or "" */
};

/* Draws every parameter and state value as its builder asked (zero, one, uniform, normal):
 * element i of value v from the counter-based generator keyed by (seed, v, i), the same
 * weights whatever the thread count. 0, or a code with the sentence in d when copying them to
 * the device failed. */
int tr_init_random(const struct tr_init_target *t, struct tr_diag *d);

/* Reads the file at path into every parameter and state value, by name:
 * - a name is found as it is, else without the base model's prefix (the first component all
 *   parameters share but the task head's: a BertModel or GPT2Model checkpoint saved without
 *   "bert." or "transformer."), and ".weight"/".bias" also as ".gamma"/".beta" (old LayerNorm
 *   names);
 * - F16, BF16 and F64 tensors are converted to f32;
 * - tensors the model has no use for are counted and ignored (attn.bias and position_ids
 *   buffers, pretraining heads such as cls.*), except lm_head.weight, which must equal the
 *   token embedding that trainrun's GPT ties its head to;
 * - when the only tensors missing are the whole task head (the parameters outside the base
 *   prefix: BERT's classifier.*), those are drawn as tr_init_random would;
 * any other missing tensor, a shape that differs (the vocabulary or position table named as
 * such) or a dtype that cannot be converted is an error naming the tensor and the file.
 * Returns 0, or TR_EIO / TR_EINVAL / TR_ENOMEM with the sentence in d; on error the values
 * may be partly written. */
int tr_init_load(const struct tr_init_target *t, const char *path, struct tr_init_info *info,
                 struct tr_diag *d);

/* One or two lines for people: what was loaded, converted and ignored, and the fresh head. */
void tr_init_summary(const struct tr_init_info *info, const char *path, char *out, size_t size);

#endif
