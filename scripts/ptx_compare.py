#!/usr/bin/env python3
"""Compares the PTX two builds of flashjit generate, kernel names aside.

    scripts/ptx_compare.py OLD_BUILD NEW_BUILD [--jobs N] [--keep DIR]

OLD_BUILD and NEW_BUILD are folders holding a `flashjit` executable (and its libflashjit.so).
Every spec of the matrix below is compiled by both with `flashjit compile --emit ptx` for
sm_90a (wgmma), sm_80 (mma.sync) and sm_90a with FLASHJIT_MMA=sync, with the heuristic config
and a few others; a config one build rejects must be rejected by the other too. The kernel
names embed the kernel key (a hash that changes with versions), so `flashjit_fwd_<hex>` is
replaced by a fixed name before the texts are compared. Exit 0 when everything is identical.
"""
import argparse
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile

# The codegen matrix: every mask and score at d=128 in fp16 and bf16, and causal, document and
# softcap at every head dim (bf16), d_qk != d_v included (tests/test_codegen.cpp builds the same).
VARIANTS = [
    ("none", "score", "", ""),
    ("causal", "score", "", ""),
    ("causal_br", "score", "", ""),
    ("window(256, 0)", "score", "", ""),
    ("prefix(n) || causal", "score", "params:\n  n: {type: i32, default: 100}\n", ""),
    ("document(doc)", "score", "", "tensors:\n  doc: {type: i32, dims: [seq_kv]}\n"),
    ("none", "softcap * tanh(score / softcap)", "params:\n  softcap: {type: f32, default: 30.0}\n", ""),
    ("causal", "score - slope[h] * abs(q - kv)", "", "tensors:\n  slope: {type: f32, dims: [heads_q]}\n"),
]
DIMS = [(64, 64), (72, 72), (80, 80), (96, 96), (160, 160), (192, 192), (256, 256), (192, 128)]
# Besides the heuristic's: one m-tile and one stage, two m-tiles (mma.sync on every arch), short
# key tiles with a deep pipeline, and two warpgroups.
CONFIGS = [None, "64,64,4,1", "128,64,4,2", "64,32,4,3", "128,128,8,2"]
TARGETS = [("sm_90a", ""), ("sm_80", ""), ("sm_90a", "sync")]


def spec_yaml(dtype, d, dv, variant):
    mask, score, params, tensors = variant
    head = f"head_dim: {d}\n" if d == dv else f"head_dim: {{qk: {d}, v: {dv}}}\n"
    text = f"dtype: {dtype}\n{head}"
    if mask != "none":  # YAML omits the defaults ("none" and "score" are the C++ API's spellings)
        text += f'mask: "{mask}"\n'
    if score != "score":
        text += f'score: "{score}"\n'
    return text + params + tensors


def matrix():
    specs = []
    for i, v in enumerate(VARIANTS):
        for dt in ("fp16", "bf16"):
            specs.append((f"v{i}_{dt}_d128", spec_yaml(dt, 128, 128, v)))
    for d, dv in DIMS:
        for i in (1, 5, 6):
            specs.append((f"v{i}_bf16_d{d}_{dv}", spec_yaml("bf16", d, dv, VARIANTS[i])))
    return specs


NAME = re.compile(r"flashjit_fwd_[0-9a-f]+")


def compile_one(build, spec_path, arch, mma, config):
    env = dict(os.environ)
    env.pop("FLASHJIT_DUMP_DIR", None)
    env.pop("FLASHJIT_OVERRIDE_DIR", None)
    env["FLASHJIT_MMA"] = mma or "auto"
    env["PATH"] = "/nonexistent"  # no ptxas report: only the PTX matters here
    with tempfile.NamedTemporaryFile(suffix=".ptx") as out:
        cmd = [os.path.join(build, "flashjit"), "compile", spec_path, "--emit", "ptx", "--arch", arch, "-o", out.name]
        if config:
            cmd += ["--config", config]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            # A rejected config: the message names the limit; compare it without the key.
            return "rejected (exit %d): %s" % (r.returncode, NAME.sub("flashjit_fwd_K", r.stderr.strip()))
        with open(out.name) as f:
            return NAME.sub("flashjit_fwd_K", f.read())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--keep", help="write differing PTX pairs here")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ptx-compare-")
    jobs = []
    for name, text in matrix():
        path = os.path.join(work, name + ".yaml")
        with open(path, "w") as f:
            f.write(text)
        for arch, mma in TARGETS:
            for config in CONFIGS:
                jobs.append((name, path, arch, mma, config))
    # The example specs (windows, documents per batch, ALiBi, MLA head dims), heuristic config.
    examples = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "specs")
    for file in sorted(os.listdir(examples)):
        for arch, mma in TARGETS:
            jobs.append((file, os.path.join(examples, file), arch, mma, None))
    same = differ = rejected = 0
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = {}
        for job in jobs:
            name, path, arch, mma, config = job
            futures[job] = (pool.submit(compile_one, args.old, path, arch, mma, config),
                            pool.submit(compile_one, args.new, path, arch, mma, config))
        for job, (old_f, new_f) in futures.items():
            name, _, arch, mma, config = job
            old, new = old_f.result(), new_f.result()
            label = f"{name} {arch}{'/mma=' + mma if mma else ''} config={config or 'heuristic'}"
            if old.startswith("rejected"):
                rejected += 1
            if old == new:
                same += 1
                continue
            differ += 1
            print(f"DIFFERS: {label}\n  old: {old[:200]!r}\n  new: {new[:200]!r}")
            if args.keep:
                os.makedirs(args.keep, exist_ok=True)
                stem = os.path.join(args.keep, label.replace(" ", "_").replace("/", "_"))
                for suffix, text in (("old", old), ("new", new)):
                    with open(f"{stem}.{suffix}.ptx", "w") as f:
                        f.write(text)
    print(f"{same} identical ({rejected} of them rejected configs with identical messages), {differ} differ, "
          f"{len(jobs)} compiles per build ({len(matrix())} specs x {len(TARGETS)} targets x {len(CONFIGS)} configs, "
          f"and examples/specs x {len(TARGETS)} targets)")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
