#!/bin/sh
# Stands in for the unit tests when configure found no Check library: a hard error, so a
# missing dependency never passes as a green suite.
echo "the Check unit-test library was not found: install it (scripts/setup) and re-run configure" >&2
exit 99
