/* The recipe's schema: one table row per key, giving its type, default, range and meaning.
 * Loading, validation, `trainrun check` and the man page test all read this one table. */
#ifndef TR_SCHEMA_H
#define TR_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>

enum tr_type {
    TR_T_STR,       /* any scalar, kept as text */
    TR_T_INT,       /* whole number in [min, max] */
    TR_T_FLOAT,     /* number in [min, max], ends open per flags */
    TR_T_BOOL,      /* true/false (yes/no, on/off) */
    TR_T_ENUM,      /* one of names */
    TR_T_SIZE,      /* memory size: 14GiB, 512MiB, 14GB, 1.5e9 */
    TR_T_DURATION,  /* 90m, 2h, 45s, 1h30m */
    TR_T_INTS,      /* list of whole numbers in [min, max] */
    TR_T_FLOATS,    /* list of numbers in [min, max] */
    TR_T_ENUMS,     /* list of distinct names */
    TR_T_CHOICE,    /* one of names, or a whole number in [min, max] */
    TR_T_WARMUP,    /* a fraction in [0, 1) or a whole number of steps */
    TR_T_SHA256,    /* 64 hexadecimal digits */
    TR_T_ENV_NAMES, /* list of distinct environment variable names: [A-Za-z_][A-Za-z0-9_]* */
};

enum {
    TR_NULLABLE  = 1u << 0,   /* null is a valid value (documented meaning in doc) */
    TR_SHORTHAND = 1u << 1,   /* a scalar given for the key's section sets this key */
    TR_MIN_OPEN  = 1u << 2,   /* min itself is excluded */
    TR_MAX_OPEN  = 1u << 3,   /* max itself is excluded */
};

struct tr_key {
    const char *path;          /* "train.optimizer.lr" */
    enum tr_type type;
    size_t offset;             /* of the field in struct tr_recipe */
    const char *def;           /* the default, as YAML text */
    double min, max;           /* numbers: range; lists: range of each element */
    const char *const *names;  /* enums and choices */
    unsigned flags;
    int list_min, list_max;    /* lists: allowed lengths */
    const char *doc;           /* one line: what it means */
};

extern const struct tr_key tr_keys[];
extern const int tr_nkeys;

int tr_key_find(const char *path);              /* index, or -1 */
int tr_key_find_n(const char *path, size_t n);  /* the same for a prefix of path */
bool tr_section_exists(const char *path);       /* "train.optimizer" yes; "" is the root */
/* The sentence "a whole number from 1 to 64" that names what a key accepts. */
char *tr_key_expected(const struct tr_key *k);  /* caller frees */
/* "did you mean": the nearest valid key or section to an unknown path, or NULL. */
char *tr_key_suggest(const char *path);
/* The names directly under a section ("" for the top), comma-separated. Caller frees. */
char *tr_section_children(const char *section);

#endif
