# A/B: one build against another, the recipe's median step (plan.json), interleaved rounds:
#   python3 bench/trace_off_ab.py ROUNDS   (bins: the build before traces in a worktree, and this one)
import json, os, shutil, statistics, subprocess, sys
bins = {"before": "/tmp/old/trainrun", "off": "./trainrun"}
CASES = [("mlp", "recipes/mlp.yaml", 400), ("bert-small", "recipes/bert-small.yaml", 20)]
SHORT = ["train.epochs=null", "train.eval_every=0", "train.eval_samples=8", "train.checkpoint_every=0",
         "report.tensorboard=false", "--quiet"]
got = {}
for r in range(int(sys.argv[1])):
    for name, recipe, steps in CASES:
        for b in (("before", "off") if r % 2 == 0 else ("off", "before")):
            out = "/tmp/abrun"; shutil.rmtree(out, ignore_errors=True)
            p = subprocess.run([bins[b], recipe, "train.steps=%d" % steps, *SHORT, "report.dir=" + out], capture_output=True, text=True)
            assert p.returncode == 0, p.stderr[-300:]
            d = [x for x in os.listdir(out) if os.path.isdir(os.path.join(out, x))][0]
            got.setdefault((name, b), []).append(json.load(open(os.path.join(out, d, "latest", "plan.json")))["measured_step_seconds"])
            print("# round %d %s %s %.5f" % (r + 1, name, b, got[(name, b)][-1]), flush=True)
for name, _, _ in CASES:
    a, b = statistics.median(got[(name, "before")]), statistics.median(got[(name, "off")])
    print("| %s | %.5f | %.5f | %.3f |" % (name, a, b, b / a))
