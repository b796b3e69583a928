#!/bin/sh
# The include graph is one-way (DESIGN.md §2). Between folders: a file of src/ includes headers
# of its own folder, of src/core/, and of earlier stages only, in the order below. Between files:
# no circle — file A uses a function or variable that file B defines while B, directly or
# through others, uses one of A's (what two headers naming each other's functions hide). Files
# are read as built: nm over every object of src/ gives who defines and who uses each symbol.
. "$srcdir/tests/lib.sh"
: "${top_builddir:?set top_builddir}"

# The stages, earliest first: a folder may include the headers of those before it.
stages="core recipe data graph models backend plan dist report train cli"

rank_of() {
  i=0
  for s in $stages; do
    [ "$s" = "$1" ] && { echo $i; return; }
    i=$((i + 1))
  done
  echo -1
}

# Folders: every #include "folder/..." of every source file, against the stage order.
upward=$(cd "$srcdir" && find src -name '*.[ch]' -o -name '*.cu' -o -name '*.inc' | sort | while read -r f; do
  from=$(echo "$f" | cut -d/ -f2)
  grep -o '^#include "[a-z]*/[^"]*"' "$f" | sed 's/#include "//; s/"$//' | while read -r h; do
    to=${h%%/*}
    [ "$to" = "$from" ] || [ "$to" = core ] && continue
    [ "$(rank_of "$to")" -lt "$(rank_of "$from")" ] || echo "$f includes $h"
  done
done)
checks=$((checks + 1))
[ -z "$upward" ] || fail "includes against the stage order ($stages):
$upward"

# Files: one edge "definer user" for each symbol an object uses from another object.
objects=$(cd "$top_builddir" && find src -name '*.o' ! -name '*_san_a-*' | sort)
checks=$((checks + 1))
[ -n "$objects" ] || fail "no objects under $top_builddir/src: build first"
(cd "$top_builddir" && for o in $objects; do
  nm -g --defined-only "$o" | awk -v o="$o" 'NF == 3 && $2 ~ /^[TDBRCG]$/ { print "D", $3, o }'
  nm -u "$o" | awk -v o="$o" '{ print "U", $NF, o }'
done) >"$scratch/symbols"
awk '$1 == "D" { by[$2] = $3 } $1 == "U" { use[++n] = $2 " " $3 }
     END { for (i = 1; i <= n; i++) { split(use[i], u, " "); if ((u[1] in by) && by[u[1]] != u[2]) print by[u[1]], u[2] } }' \
  "$scratch/symbols" | sort -u >"$scratch/edges"
checks=$((checks + 1))
if ! tsort "$scratch/edges" >/dev/null 2>"$scratch/loops"; then
  fail "files in a circle (each uses the next one's symbols):
$(sed 's/^tsort: //' "$scratch/loops")"
fi
finish
