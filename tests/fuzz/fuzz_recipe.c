/* libFuzzer harness for the recipe stage: YAML recipes and key=value overrides (make fuzz).
 * Input: recipe text, then optionally a NUL byte and newline-separated overrides.
 * Beyond crashes, leaks and undefined behaviour (ASan+UBSan), it checks one property: a
 * recipe that loads writes out (as `trainrun check` does) a recipe that loads to the same text. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recipe/recipe.h"

static char *resolved_yaml(const struct tr_recipe *r, size_t *len)
{
    char *text = NULL;
    FILE *f = open_memstream(&text, len);
    tr_recipe_write_yaml(r, f);
    fclose(f);
    return text;
}

/* Drops the origin comments, which differ between the first load and the second. */
static void strip_comments(char *text)
{
    char *out = text;
    for (char *line = text; *line;) {
        char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        char *hash = memmem(line, n, " # ", 3);
        size_t keep = hash ? (size_t)(hash - line) : n;
        while (keep && line[keep - 1] == ' ')
            keep--;
        memmove(out, line, keep);
        out += keep;
        *out++ = '\n';
        line += n + (end ? 1 : 0);
    }
    *out = '\0';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);   /* libFuzzer's entry point */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *nul = memchr(data, 0, size);
    size_t yaml_len = nul ? (size_t)(nul - (const char *)data) : size;
    char *overrides_text = NULL;
    char *overrides[16];
    int n = 0;
    if (nul) {
        size_t rest = size - yaml_len - 1;
        overrides_text = malloc(rest + 1);
        memcpy(overrides_text, nul + 1, rest);
        overrides_text[rest] = '\0';
        for (char *s = strtok(overrides_text, "\n"); s && n < 16; s = strtok(NULL, "\n"))
            overrides[n++] = s;
    }
    struct tr_recipe r;
    struct tr_diag diag = {0};
    int rc = tr_recipe_load_string(&r, (const char *)data, yaml_len, "fuzz.yaml", overrides, n, &diag);
    for (int i = 0; i < diag.n; i++)
        free(tr_diag_line(&diag, i));
    if (rc == 0) {
        free(tr_recipe_to_json(&r));
        size_t len1, len2;
        char *first = resolved_yaml(&r, &len1);
        struct tr_recipe again;
        struct tr_diag diag2 = {0};
        if (tr_recipe_load_string(&again, first, len1, "fuzz.yaml", NULL, 0, &diag2)) {
            fprintf(stderr, "resolved recipe does not load back:\n%s\n", first);
            tr_diag_print(&diag2, stderr);
            abort();
        }
        char *second = resolved_yaml(&again, &len2);
        strip_comments(first);
        strip_comments(second);
        if (strcmp(first, second)) {
            fprintf(stderr, "round trip changed the recipe:\n%s\n---\n%s\n", first, second);
            abort();
        }
        free(second);
        tr_recipe_free(&again);
        tr_diag_free(&diag2);
        free(first);
    }
    tr_recipe_free(&r);
    tr_diag_free(&diag);
    free(overrides_text);
    return 0;
}
