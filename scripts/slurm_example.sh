#!/usr/bin/env bash
# Example SLURM job: one vibethinker training stage on NODES x 8 GPUs with torchrun's rendezvous
# (docs/SCALING.md). Submit with e.g.
#   sbatch --nodes 2 scripts/slurm_example.sh sft1 recipes/vibethinker-3b.yaml
#   sbatch --nodes 1 scripts/slurm_example.sh rl_math recipes/vibethinker-3b.yaml engine=vllm
# Every node runs one torchrun (srun --ntasks-per-node 1); torchrun starts 8 processes per node and
# they meet at the first node's address (c10d rendezvous). Outputs go where the recipe says (a
# filesystem all nodes share: checkpoints are written by every process, sharded).
#SBATCH --job-name=vibethinker
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=64
#SBATCH --exclusive
#SBATCH --time=24:00:00
#SBATCH --output=logs/%x-%j.out
set -euo pipefail

STAGE=${1:?usage: slurm_example.sh STAGE RECIPE.yaml [key=value ...]}
RECIPE=${2:?usage: slurm_example.sh STAGE RECIPE.yaml [key=value ...]}
shift 2
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
HEAD=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
PORT=${PORT:-29500}
VENV=${VENV:-.venv}

export OMP_NUM_THREADS=8
export NCCL_ASYNC_ERROR_HANDLING=1
# export NCCL_SOCKET_IFNAME=ib0   # the cluster's fast interface, if NCCL picks a slow one

srun --kill-on-bad-exit=1 "$VENV/bin/torchrun" \
  --nnodes "$SLURM_NNODES" \
  --nproc-per-node "$GPUS_PER_NODE" \
  --rdzv-id "$SLURM_JOB_ID" \
  --rdzv-backend c10d \
  --rdzv-endpoint "$HEAD:$PORT" \
  "$VENV/bin/vibethinker" "$STAGE" "$RECIPE" "$@"
