"""Reads a trainrun checkpoint with Hugging Face's safetensors package (its Rust parser is the
one behind safetensors.torch.load_file; the numpy front end spares CI an install of PyTorch)
and checks every tensor against the file's bytes as the format defines them (8-byte header
length, JSON header, data), and the metadata trainrun promises.
    checkpoint_check.py CHECKPOINT"""
import json
import struct
import sys

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file

path = sys.argv[1]
tensors = load_file(path)
raw = open(path, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
names = [k for k in header if k != "__metadata__"]
assert sorted(tensors) == sorted(names), (sorted(tensors), sorted(names))
for name in names:
    info, t = header[name], tensors[name]
    a, b = info["data_offsets"]
    want = np.frombuffer(raw[8 + n + a:8 + n + b], dtype={"F32": "<f4", "I64": "<i8"}.get(info["dtype"], "u1"))
    assert list(t.shape) == info["shape"], (name, t.shape, info["shape"])
    assert t.tobytes() == want.tobytes(), name
with safe_open(path, framework="numpy") as f:
    meta = f.metadata()
for key in ("format", "trainrun.format_version", "trainrun.step", "trainrun.sha256"):
    assert key in meta, f"metadata has no {key}: {sorted(meta)}"
assert meta["format"] == "pt", meta["format"]   # what safetensors.torch expects
weights = [k for k in names if not k.startswith("optimizer.")]
moments = [k for k in names if k.startswith("optimizer.")]
assert weights and moments, (weights, moments)
print(f"{path}: {len(weights)} weights, {len(moments)} optimizer tensors, step {meta['trainrun.step']}, read by safetensors")
