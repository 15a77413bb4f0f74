#!/usr/bin/env bash
# Issue 30 on the H200, one call: the hfquant suite (bench/hfquant.ts). The bench writes checkpoints with
# random weights in each HF quantized format (bench/hfquant_write.ts: MAKE, FORMAT:SHAPE,...) and loads
# them through loadCheckpoint and loadModel, while llama.cpp's peer writer makes the same Llama shapes at
# Q4_K_M in the background (GGUF; each file moved into place when whole, the bench waits for it); bf16
# made on the GPU for RANDOM_SHAPES (DeepSeek-V2-Lite's beside its FP8 checkpoint). Every model gets
# the model suite's grid; the results are rewritten after each model, so a run cut at LIMIT seconds
# keeps what it measured.
#
# Before the call, on this machine: .device/ as bench/device/issue27.sh says (../shared/device/prepare.sh
# node), and the bundle built from a clean checkout of the commit measured:
#   git worktree add /tmp/wt HEAD && ln -s $PWD/node_modules /tmp/wt/node_modules
#   (cd /tmp/wt && npx vite build -c vite.bench.config.ts --outDir $OLDPWD/.cache/hfq-device)
#   mkdir -p .peer && cp ../shared/peers/llamacpp/make_gguf.py .peer/
# Carry [".device", ".cache/hfq-device", ".peer/make_gguf.py"]; command `bash bench/device/issue30.sh`
# (all of it: the Llama shapes in MLX, AWQ, GPTQ and Q4_K_M, DeepSeek-V2-Lite's in FP8 and bf16; about
# 40 GB of files in /tmp); a second call can take what a first one did not reach (MAKE=gptq:llama-8b GGUF=llama-8b RANDOM_SHAPES=,
# FROM=the first call's hfquant-nvidia-h200.json, carried: its runs are kept in the results this call writes).
# What comes back: gguf.log, bench.log, results/hfquant-nvidia-h200.{md,json} and -decode.svg.
set -u
source .device/setup.sh
B=${BENCH:-.cache/hfq-device/bench.mjs}
G=/tmp/gguf
R=$OUT/results
mkdir -p $G /tmp/gguf-part $R
T0=$(date +%s)
GGUF=${GGUF-"llama-1b llama-8b"}
MAKE=${MAKE-"mlx:llama-1b,awq:llama-1b,gptq:llama-1b,mlx:llama-8b,awq:llama-8b,gptq:llama-8b,fp8:dsv2-lite"}
RANDOM_SHAPES=${RANDOM_SHAPES-dsv2-lite}
( for m in $GGUF; do
    python3 .peer/make_gguf.py --model $m --types q4_k_m --out /tmp/gguf-part && mv /tmp/gguf-part/$m-q4_k_m.gguf $G/
    echo "$m rc $? $(( $(date +%s) - T0 ))s"
  done; ls -la $G ) > $OUT/gguf.log 2>&1 &
GG=""
for m in $GGUF; do GG="$GG${GG:+,}$G/$m-q4_k_m.gguf:$m"; done
timeout ${LIMIT:-540} node $B --suite=hfquant ${MAKE:+--hfquant-make=$MAKE} ${GG:+--hfquant-gguf=$GG} ${RANDOM_SHAPES:+--hfquant-random=$RANDOM_SHAPES} \
  ${FROM:+--hfquant-from=$FROM} --hfquant-wait=300 --hfquant-dir=/tmp/hfq --peer=none --device="NVIDIA H200" --out=$R ${BENCH_ARGS:-} > $OUT/bench.log 2>&1
echo "bench rc $? $(( $(date +%s) - T0 ))s" >> $OUT/bench.log
{ df -h /tmp; free -g; nproc; } >> $OUT/bench.log 2>&1
rm -f $R/nvidia-h200.json $R/nvidia-h200-*.svg
