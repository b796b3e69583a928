/* The chosen program in DOT (graph_dot.h). */
#include "report/graph_dot.h"

#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/atomic.h"
#include "core/error.h"
#include "graph/ops.h"

static const char *const phase_names[] = {"forward", "backward", "recompute", "optimizer"};
enum { ALL_BLOCKS = -2 };   /* --full: no block collapsed */

/* Whether node n is drawn inside its block's box, not on its own. */
static bool collapsed(const struct tr_node *n, int shown)
{
    return n->block >= 0 && shown != ALL_BLOCKS && n->block != shown;
}
static const char *const phase_fill[] = {"#cfe2ff", "#ffd8c2", "#fff3b0", "#e0e0e0"};

/* A DOT identifier for what stands for node i: itself, or its collapsed block's box. */
static void box_id(const struct tr_graph *g, const int *shown_block, int node, char out[48])
{
    const struct tr_node *n = &g->nodes[node];
    if (collapsed(n, *shown_block))
        snprintf(out, 48, "b%d_%d", n->block, n->phase);
    else
        snprintf(out, 48, "n%d", node);
}

/* "bf16 [32, 64, 256] 1.00 MiB" */
static void value_words(const struct tr_graph *g, const struct tr_memplan *mp, int v, char *out, size_t size)
{
    const struct tr_value *val = &g->values[v];
    size_t used = (size_t)snprintf(out, size, "%s [", tr_dtype_name(val->dtype));
    for (int d = 0; d < val->shape.rank && used < size; d++)
        used += (size_t)snprintf(out + used, size - used, "%s%lld", d ? ", " : "",
                                 (long long)tr_dim_eval(val->shape.dim[d], mp->B, mp->S));
    char bytes[32];
    tr_format_bytes(mp->bytes[v], bytes);
    if (used < size)
        snprintf(out + used, size - used, "] %s", bytes);
}

/* The first block of the graph (the one drawn in full), or −1 when none. */
static int first_block(const struct tr_graph *g, const int *schedule, int n)
{
    for (int i = 0; i < n; i++)
        if (g->nodes[schedule[i]].block >= 0)
            return g->nodes[schedule[i]].block;
    return -1;
}

/* Whether the arrow from → to is new, remembered in seen (NUL-separated keys). */
static bool first_time(char **seen, size_t *n, size_t *cap, const char *from, const char *to)
{
    char key[100];
    snprintf(key, sizeof key, "%s>%s", from, to);
    for (size_t s = 0; s < *n; s += strlen(*seen + s) + 1)
        if (!strcmp(*seen + s, key))
            return false;
    size_t len = strlen(key) + 1;
    if (*n + len > *cap) {
        *cap = (*n + len) * 2;
        *seen = tr_xrealloc(*seen, *cap);
    }
    memcpy(*seen + *n, key, len);
    *n += len;
    return true;
}

int tr_graph_dot(FILE *out, const struct tr_graph *g, const int *schedule, int n, const struct tr_memplan *mp,
                 bool full, const char *title)
{
    int shown = full ? ALL_BLOCKS : first_block(g, schedule, n), peak = -1;
    size_t most = 0;
    for (int i = 0; i < n && mp->live; i++)
        if (mp->live[i] > most)
            most = mp->live[i], peak = schedule[i];
    char *placed = tr_xcalloc((size_t)g->nnodes, 1);   /* scheduled: drawn (or inside a block's box) */
    for (int i = 0; i < n; i++)
        placed[schedule[i]] = 1;
    fprintf(out, "digraph program {\n  graph [rankdir=TB, fontname=\"DejaVu Sans\", fontsize=11, label=\"");
    for (const char *c = title ? title : ""; *c; c++)
        fprintf(out, *c == '"' || *c == '\\' ? "\\%c" : "%c", *c);
    fprintf(out, "\", labelloc=t];\n  node [shape=box, style=\"rounded,filled\", fontname=\"DejaVu Sans\", "
                 "fontsize=9];\n  edge [arrowsize=0.5, color=\"#555555\"];\n");
    /* the collapsed blocks' boxes, each with its nodes counted */
    int nblocks = 0;
    for (int i = 0; i < g->nnodes; i++)
        nblocks = g->nodes[i].block + 1 > nblocks ? g->nodes[i].block + 1 : nblocks;
    int *count = tr_xcalloc((size_t)(nblocks ? nblocks : 1) * 4, sizeof *count);
    for (int i = 0; i < n; i++) {
        const struct tr_node *nd = &g->nodes[schedule[i]];
        if (collapsed(nd, shown) && nd->phase < 4)
            count[nd->block * 4 + nd->phase]++;
    }
    const struct tr_node *top = peak >= 0 ? &g->nodes[peak] : NULL;
    for (int b = 0; b < nblocks; b++)
        for (int ph = 0; ph < 4; ph++)
            if (count[b * 4 + ph]) {
                bool has_peak = top && collapsed(top, shown) && top->block == b && top->phase == ph;
                fprintf(out, "  b%d_%d [label=\"block %d, %s\\n%d nodes%s\", fillcolor=\"%s\", style=\"%s\"%s];\n", b, ph,
                        b, phase_names[ph], count[b * 4 + ph], has_peak ? "\\npeak of the arena" : "", phase_fill[ph],
                        ph == TR_RECOMPUTE ? "rounded,filled,dashed" : "rounded,filled",
                        has_peak ? ", penwidth=3, color=\"#c00000\"" : "");
            }
    /* the nodes drawn one by one */
    for (int i = 0; i < n; i++) {
        int id = schedule[i];
        const struct tr_node *nd = &g->nodes[id];
        if (collapsed(nd, shown))
            continue;
        char what[160] = "";
        if (nd->nout)
            value_words(g, mp, nd->out[0], what, sizeof what);
        fprintf(out, "  n%d [label=\"%s\\n%s%s\", fillcolor=\"%s\"%s%s];\n", id, tr_op_name(nd->op), what,
                id == peak ? "\\npeak of the arena" : "", phase_fill[nd->phase < 4 ? nd->phase : 0],
                nd->phase == TR_RECOMPUTE ? ", style=\"rounded,filled,dashed\"" : "",
                id == peak ? ", penwidth=3, color=\"#c00000\"" : "");
    }
    /* the inputs (data) as ellipses */
    for (int v = 0; v < g->nvalues; v++)
        if (g->values[v].kind == TR_INPUT) {
            char what[160];
            value_words(g, mp, v, what, sizeof what);
            fprintf(out, "  v%d [shape=ellipse, label=\"%s\\n%s\", fillcolor=\"#e8f5e9\"];\n", v, g->values[v].name, what);
        }
    /* an arrow per value from its producer (or input) to each reader; to or from a block's box once */
    char *seen = NULL;
    size_t nseen = 0, capseen = 0;
    for (int i = 0; i < n; i++) {
        int id = schedule[i];
        const struct tr_node *nd = &g->nodes[id];
        char to[48];
        box_id(g, &shown, id, to);
        for (int k = 0; k < nd->nin; k++) {
            int v = nd->in[k], root = g->values[v].view_of >= 0 ? g->values[v].view_of : v;
            int from_node = g->values[v].producer;
            char from[48];
            if (g->values[root].kind == TR_INPUT)
                snprintf(from, sizeof from, "v%d", root);
            else if (from_node >= 0 && placed[from_node])
                box_id(g, &shown, from_node, from);
            else
                continue;   /* parameters, state, gradients: not drawn */
            if (!strcmp(from, to))
                continue;
            if ((from[0] == 'b' || to[0] == 'b') && !first_time(&seen, &nseen, &capseen, from, to))
                continue;   /* to or from a block's box: once */
            bool saved = from_node >= 0 && g->nodes[from_node].phase == TR_FORWARD && nd->phase == TR_BACKWARD;
            fprintf(out, "  %s -> %s%s;\n", from, to, saved ? " [color=\"#c00000\", penwidth=1.6]" : "");
        }
    }
    fprintf(out, "  legend [shape=plaintext, style=\"\", label=\"blue: forward, orange: backward, yellow dashed: "
                 "recomputed; red arrows: saved for the backward; red outline: the arena's peak\"];\n}\n");
    free(seen), free(count), free(placed);
    return ferror(out) ? -1 : 0;
}

extern char **environ;

int tr_graph_dot_file(const char *path, const struct tr_graph *g, const int *schedule, int n,
                      const struct tr_memplan *mp, bool full, const char *title, struct tr_diag *d)
{
    struct tr_atomic a;
    if (tr_atomic_open(&a, path, d))
        return TR_EIO;
    if (tr_graph_dot(a.f, g, schedule, n, mp, full, title)) {
        tr_atomic_abort(&a);
        return tr_fail(d, TR_EIO, "%s: write error", path);
    }
    return tr_atomic_commit(&a, d) ? TR_EIO : 0;
}

int tr_graph_svg(const char *dot_path, const char *svg_path, struct tr_diag *d)
{
    char *partial = svg_path ? tr_strdup_printf("%s.partial", svg_path) : NULL;
    char *argv[] = {"dot", "-Tsvg", (char *)dot_path, partial ? "-o" : NULL, partial, NULL};
    pid_t pid;
    posix_spawnattr_t attr;   /* trainrun's threads block the stop signals (core/stop.h); dot does not */
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_init(&attr);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    int err = posix_spawnp(&pid, "dot", NULL, &attr, argv, environ), status = 0, rc = 0;
    posix_spawnattr_destroy(&attr);
    if (err == ENOENT)
        rc = tr_fail(d, TR_EIO, "Graphviz's dot is not on PATH (Debian: apt-get install graphviz)");
    else if (err)
        rc = tr_fail(d, TR_EIO, "dot: %s", strerror(err));
    else {
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
        if (!WIFEXITED(status) || WEXITSTATUS(status))
            rc = tr_fail(d, TR_EIO, "dot -Tsvg %s failed (status %d)", dot_path, status);
        else if (partial && rename(partial, svg_path))
            rc = tr_fail(d, TR_EIO, "cannot rename %s to %s: %s", partial, svg_path, strerror(errno));
    }
    if (rc && partial)
        unlink(partial);
    free(partial);
    return rc;
}
