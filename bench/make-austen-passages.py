#!/usr/bin/env python3
"""Long texts for the seed's BERT case: Austen's novels cut into passages of WORDS words
(360 words: about 512 WordPiece tokens), each labelled with its novel, as a data set folder
OUT_DIR/austen-passages (dataset.yaml, train/valid/test TSV: every 10th passage valid, the
next test). A classification set whose sequences fill model.max_len, unlike WordNet's glosses
(at most 138 tokens). Usage: make-austen-passages.py DATASETS_DIR OUT_DIR [WORDS]"""
import gzip, os, sys

datasets, out = sys.argv[1], os.path.join(sys.argv[2], "austen-passages")
words_per = int(sys.argv[3]) if len(sys.argv) > 3 else 360
novels = ["sensesensibility", "prideprejudice", "mansfieldpark", "emma", "northangerabbey", "persuasion"]
os.makedirs(out, exist_ok=True)
splits = {name: open(os.path.join(out, name + ".tsv"), "w", encoding="utf-8") for name in ("train", "valid", "test")}
for f in splits.values():
    f.write("text\tlabel\n")
n = 0
for novel in novels:
    with gzip.open(os.path.join(datasets, "austen", novel + ".txt.gz"), "rt", encoding="utf-8") as g:
        words = g.read().split()
    for i in range(0, len(words) - words_per, words_per):
        split = "valid" if n % 10 == 8 else "test" if n % 10 == 9 else "train"
        splits[split].write(" ".join(words[i:i + words_per]).replace("\t", " ") + "\t" + novel + "\n")
        n += 1
for f in splits.values():
    f.close()
with open(os.path.join(out, "dataset.yaml"), "w") as f:
    f.write("""name: austen-passages
description: Austen's six novels in passages of %d words, each labelled with its novel
licence: public domain text
format: tsv
header: names
text: text
label: label
train: {source: train.tsv}
valid: {source: valid.tsv}
test: {source: test.tsv}
num_classes: 6
class_names: [%s]
""" % (words_per, ", ".join(novels)))
