/* Checks that span keys (heads divide hidden, steps or epochs, a tokenizer for text models…),
 * run once every layer is applied. Each problem is placed at the value the user wrote. */
#ifndef TR_VALIDATE_H
#define TR_VALIDATE_H

#include "recipe/recipe.h"

void tr_recipe_validate(const struct tr_recipe *r, struct tr_diag *diag);

#endif
