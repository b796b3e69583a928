#!/bin/sh
# The manual pages against the program: each page lints clean with mandoc, every recipe key
# the binary knows is documented in trainrun-recipe(5) and present in etc/trainrun.conf,
# and trainrun(1)'s EXIT STATUS lists exactly the values of src/core/exit.h.
# Environment: TRAINRUN (the binary), srcdir (the source tree), MANDOC (empty: skip, 77).
set -u
: "${TRAINRUN:?set TRAINRUN to the trainrun binary}" "${srcdir:?set srcdir}"
if [ -z "${MANDOC:-}" ]; then
  echo "SKIP: mandoc not found by configure"
  exit 77
fi
command -v python3 >/dev/null || { echo "FAIL: python3 is needed to read check --json"; exit 1; }

scratch=$(mktemp -d "${TMPDIR:-/tmp}/trainrun-man.XXXXXX") || exit 1
trap 'rm -rf "$scratch"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

pages="man/trainrun.1 man/trainrun-recipe.5 man/trainrun-dataset.5 man/trainrun.conf.5 man/trainrun-report.5"
recipe_page=$srcdir/man/trainrun-recipe.5
command_page=$srcdir/man/trainrun.1
conf=$srcdir/etc/trainrun.conf

# 1. Lint: mandoc prints nothing for a clean page; -W warning leaves out STYLE notes (such
#    as cross-references to pages not installed yet).
for page in $pages; do
  lint=$("$MANDOC" -T lint -W warning "$srcdir/$page" 2>&1)
  status=$?
  if [ "$status" != 0 ] || [ -n "$lint" ]; then
    fail "$page: mandoc -T lint -W warning (status $status): $lint"
  fi
done
echo "linted: $pages"

# 2. Every key, by its full dotted path, from the binary itself: check --json lists them all
#    under "origins". TRAINRUN_CONF= and TRAINRUN_SYSTEM_CONF= keep local conf files out.
printf 'model: {arch: mlp}\ndata: {dataset: digits}\n' >"$scratch/keys.yaml"
TRAINRUN_CONF='' TRAINRUN_SYSTEM_CONF='' "$TRAINRUN" check "$scratch/keys.yaml" --json \
  >"$scratch/keys.json" 2>"$scratch/keys.err"
status=$?
if [ "$status" != 0 ]; then
  fail "trainrun check --json on a minimal recipe: status $status: $(cat "$scratch/keys.err")"
  echo "$failures failed"
  exit 1
fi
python3 -c '
import json, sys
for path in json.load(open(sys.argv[1]))["origins"]:
    print(path)
' "$scratch/keys.json" >"$scratch/keys" || { fail "check --json: no \"origins\" object"; exit 1; }
nkeys=$(wc -l <"$scratch/keys" | tr -d ' ')
[ "$nkeys" -gt 0 ] || fail "check --json listed no keys"

while read -r path; do
  # The recipe page names each key by its full dotted path, as a word of its own.
  grep -Eq "(^|[^a-z_.])$(echo "$path" | sed 's/\./\\./g')([^a-z_]|\\.([^a-z_]|$)|$)" \
    "$recipe_page" || fail "key $path is not documented in man/trainrun-recipe.5"
  # The conf file holds each key's last name followed by ':' (commented out or not).
  leaf=${path##*.}
  grep -Eq "^#? *$leaf:" "$conf" || fail "key $path ($leaf:) is missing from etc/trainrun.conf"
done <"$scratch/keys"
echo "keys: $nkeys checked in man/trainrun-recipe.5 and etc/trainrun.conf"

# 3. trainrun(1)'s EXIT STATUS list is exactly the values of src/core/exit.h's enum tr_exit,
#    both ways: a code the program can return is documented, a documented code exists.
values=$(sed -n '/^enum tr_exit *{/,/^};/s/^ *TR_EXIT_[A-Z_]* *= *\([0-9][0-9]*\).*/\1/p' \
  "$srcdir/src/core/exit.h" | sort -n | tr '\n' ' ')
[ -n "$values" ] || fail "no exit statuses found in src/core/exit.h"
sed -n '/^\.Sh EXIT STATUS/,/^\.Sh /p' "$command_page" >"$scratch/exit-status"
documented=$(sed -n 's/^\.It \([0-9][0-9]*\)$/\1/p' "$scratch/exit-status" | sort -n | tr '\n' ' ')
for value in $values; do
  case " $documented " in *" $value "*) ;;
    *) fail "exit status $value (src/core/exit.h) is not under EXIT STATUS in man/trainrun.1" ;;
  esac
done
for value in $documented; do
  case " $values " in *" $value "*) ;;
    *) fail "exit status $value under EXIT STATUS in man/trainrun.1 is not in src/core/exit.h" ;;
  esac
done
# Prose must not list a subset of them: "exits with 0, 1, ..." went stale once already.
if grep -n 'exits with [0-9][0-9]*, [0-9]' "$command_page"; then
  fail "man/trainrun.1 lists exit statuses in prose; the EXIT STATUS list is the one place"
fi
echo "exit statuses: src/core/exit.h: $values; trainrun(1): $documented"

echo "$failures failed"
[ "$failures" = 0 ]
