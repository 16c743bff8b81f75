#!/usr/bin/env bash
# Issue 30's restart table: a rank or the launcher is killed before the first
# save, during it, between saves, during a restart and after the last save;
# with and without --resume; into an empty folder, the run's own folder and
# another run's folder. Every case ends bitwise equal to the undisturbed run
# (the final checkpoint's files by CRC-32, and each step's loss in --metrics
# once, in order), or with exit 2 before training and the folder unchanged.
# A killed launcher is followed by the same command again and, when that is
# refused, by its continuation with --resume auto. Kills come from the test
# hooks (baton/core/test_hooks.h), which fire once per case.
source "$(dirname "$0")/lib/common.sh"

python3 - "$baton" "$tmp" <<'PY'
import hashlib, json, os, shutil, subprocess, sys

baton, tmp = sys.argv[1], sys.argv[2]
STEPS = 12
BASE = ["train", "--model", "mlp", "--layers", "4", "--batch", "8", "--microbatches", "2",
        "--pp", "2", "--nproc", "2", "--threads", "1", "--log-every", "100"]


def run(args, env_extra=None, timeout=300):
    env = dict(os.environ)
    for k in ("BATON_TEST_KILL_AT_STEP", "BATON_TEST_KILL_IN_SAVE"):
        env.pop(k, None)
    env.update(env_extra or {})
    if "--hidden" not in args:
        args = ["--hidden", "16"] + args
    p = subprocess.run([baton] + BASE + args, env=env, capture_output=True, text=True,
                       timeout=timeout)
    return p.returncode, p.stdout + p.stderr


def must(args, what):
    rc, out = run(args)
    assert rc == 0, f"{what}: exit {rc}: {out[-800:]}"


def state(folder):
    """The newest checkpoint's step and its files' CRCs, by name inside the step folder."""
    m = json.load(open(os.path.join(folder, "manifest.json")))
    return m["step"], sorted((f["path"].split("/", 1)[1], f["crc32"]) for f in m["files"])


def losses(path):
    return [(r["step"], r["loss"]) for r in map(json.loads, open(path)) if "step" in r]


def digest(folder):
    h = hashlib.sha256()
    for root, dirs, files in sorted(os.walk(folder)):
        dirs.sort()
        for name in sorted(files):
            p = os.path.join(root, name)
            h.update(os.path.relpath(p, folder).encode())
            h.update(open(p, "rb").read())
    return h.hexdigest()


# The undisturbed runs: from step 0, and resumed from a step-2 checkpoint.
must(["--steps", "2", "--save", f"{tmp}/src"], "the step-2 checkpoint")
must(["--steps", str(STEPS), "--save", f"{tmp}/ref", "--save-every", "4",
      "--metrics", f"{tmp}/ref.jsonl"], "the undisturbed run")
must(["--steps", str(STEPS), "--resume", f"{tmp}/src", "--save", f"{tmp}/ref_resumed",
      "--save-every", "4", "--metrics", f"{tmp}/ref_resumed.jsonl"], "the undisturbed resumed run")
ref_state, ref_losses = state(f"{tmp}/ref"), losses(f"{tmp}/ref.jsonl")
assert ref_state[0] == STEPS and len(ref_losses) == STEPS
assert state(f"{tmp}/ref_resumed") == ref_state, "a resumed run differs from the undisturbed one"
assert losses(f"{tmp}/ref_resumed.jsonl") == ref_losses[2:]
must(["--hidden", "32", "--steps", "3", "--save", f"{tmp}/other"], "another run's checkpoint")

# Moments: (name, hook variable, hooks with R for the rank and ^R for the launcher).
MOMENTS = [
    ("before the first save", "BATON_TEST_KILL_AT_STEP", "{k}1:3:{m}a"),
    ("during the first save", "BATON_TEST_KILL_IN_SAVE", "{k}1:4:{m}a"),
    ("between saves", "BATON_TEST_KILL_AT_STEP", "{k}1:6:{m}a"),
    ("during a restart", "BATON_TEST_KILL_AT_STEP", "1:6:{m}a,{k}0:4:{m}b"),
    ("after the last save", "BATON_TEST_KILL_AT_STEP", "{k}1:12:{m}a"),
]
# Folders and --resume: (name, set-up returning (args, first step of --metrics)).
def empty(case):
    return ["--save", f"{case}/dst"], 1
def resumed(case):
    return ["--resume", f"{tmp}/src", "--save", f"{case}/dst"], 3
def own(case):
    shutil.copytree(f"{tmp}/src", f"{case}/dst")
    return ["--resume", f"{case}/dst", "--save", f"{case}/dst"], 3
MODES = [("empty folder, no --resume", empty), ("empty folder, --resume SRC", resumed),
         ("the run's own folder, --resume it", own)]


def check_end(case, args, first, rc, out, label):
    """Bitwise the undisturbed run, or (a run that ended after its last save) its state."""
    dst = f"{case}/dst"
    assert os.path.exists(f"{dst}/manifest.json"), f"{label}: no checkpoint: {out[-800:]}"
    got = state(dst)
    assert got == ref_state, f"{label}: checkpoint differs (step {got[0]}): {out[-800:]}"
    if rc == 0:
        assert losses(f"{case}/m.jsonl") == ref_losses[first - 1:], f"{label}: metrics differ"
    else:
        # Only a kill after the last save may end non-zero: nothing is left to train.
        assert "after the last save" in label, f"{label}: exit {rc}: {out[-800:]}"


cases = 0
for target, k in (("rank", ""), ("launcher", "^")):
    for moment, variable, hooks in MOMENTS:
        for mode, setup in MODES:
            cases += 1
            case = f"{tmp}/case{cases}"
            os.makedirs(case)
            label = f"kill the {target} {moment}, {mode}"
            args, first = setup(case)
            args += ["--steps", str(STEPS), "--save-every", "4", "--metrics", f"{case}/m.jsonl",
                     "--max-restarts", "2"]
            env = {variable: hooks.format(k=k, m=f"{case}/marker.")}
            rc, out = run(args, env)
            if target == "launcher":
                assert rc == -9, f"{label}: the launcher was not killed (exit {rc}): {out[-800:]}"
                before = digest(f"{case}/dst")
                rc, out = run(args, env)  # the same command again
                if rc == 2:
                    assert digest(f"{case}/dst") == before, f"{label}: a refused run changed the folder"
                    assert "holds a checkpoint at step" in out or "not below --steps" in out, out
                    cont = list(args)
                    if "--resume" in cont:
                        cont[cont.index("--resume") + 1] = "auto"
                    else:
                        cont += ["--resume", "auto"]
                    rc, out = run(cont, env)
                    if rc == 2 and "not below --steps" in out:
                        assert state(f"{case}/dst") == ref_state, label
                        print(f"ok: {label}: refused, unchanged; the run had ended")
                        continue
            check_end(case, args, first, rc, out, label)
            print(f"ok: {label}")

# Refused before training, the folder unchanged: a fresh run into its own
# earlier checkpoint, and any run into another run's.
for label, args in (
        ("no --resume, a checkpoint of this run", ["--save", f"{tmp}/src"]),
        ("no --resume, another run's checkpoint", ["--save", f"{tmp}/other"]),
        ("--resume SRC, another run's checkpoint", ["--resume", f"{tmp}/src", "--save", f"{tmp}/other"])):
    folder = args[-1]
    before = digest(folder)
    rc, out = run(args + ["--steps", str(STEPS), "--save-every", "4", "--max-restarts", "2"])
    lines = [l for l in out.splitlines() if l]
    assert rc == 2 and len(lines) == 1 and "holds a checkpoint at step" in out, f"{label}: {rc} {out}"
    assert digest(folder) == before, f"{label}: the folder changed"
    print(f"ok: refused: {label}")
    cases += 1
print(f"{cases} cases passed")
PY
