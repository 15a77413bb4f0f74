#!/usr/bin/env bash
# Issue 42, third session, on the H200: the whole-model grid beside llama.cpp at one commit, the files
# benched while the later ones are still being written. FILES: groups of make_gguf.py models, each
# "model:type,type" (default the 1B files, then DeepSeek-V2-Lite, then gpt-oss-20b), and the group
# gpt-oss-20b:mxfp4 (gpt-oss-20b's shape with MXFP4 experts and Q8_0 matrices, 12.1 GB, written with
# writeGGUF's header by .cache/device/make_gguf.mjs: bench/make_gguf_gptoss.ts), and issue 44's groups
# gemma3-4b:q4_k and qwen3-30b-a3b:q4_k (Gemma-3-4B's and Qwen3-30B-A3B's shapes, Q4_K matrices and Q6_K
# output, 2.5 and 17 GB: bench/gguf_arch_random.ts; run them with GGUF_ARGS=--model-contexts=1024, the
# issue's batch 1/8/32 at context 1024); GGUF_ARGS (default both contexts);
# GGUF_LIMIT a file. Before the call: as issue42-span.sh says (.device, .cache/device, .peer carried).
# What comes back: gen.log, bench.log, results/gguf-nvidia-h200.md (every file's tables, in order).
source bench/device/preamble.sh
mkdir -p /tmp/llama && tar xJf .peer/llama-libs.tar.xz -C /tmp/llama
bench_file() {
  local f=$1 b; b=$(basename $f .gguf)
  timeout ${GGUF_LIMIT:-170} node .cache/device/bench.mjs --suite=gguf --gguf=$f:$b --gguf-llamacpp=/tmp/llama --llamacpp-script=.peer/bench_ctypes.py \
    --commit=$COMMIT "--device=NVIDIA H200" --out=/tmp/res-$b ${GGUF_ARGS:---model-contexts=1024,4096} >> $OUT/bench.log 2>&1
  echo "gguf $f rc $? $(( $(date +%s) - T0 ))s" >> $OUT/bench.log
  cat /tmp/res-$b/gguf-nvidia-h200.md >> $R/gguf-nvidia-h200.md 2>/dev/null; echo >> $R/gguf-nvidia-h200.md
}
prev=""
for g in ${FILES:-llama-1b:q4_k_m,q8_0,q4_0 dsv2-lite:q4_k_m gpt-oss-20b:mxfp4}; do
  # Write this group while the one before is benched (the GPU is idle while the writer runs).
  if [[ $g == gpt-oss-20b:mxfp4 ]]; then
    node .cache/device/make_gguf.mjs --shape=20b --out=/tmp/gguf/${g%%:*} >> $OUT/gen.log 2>&1 &
  elif [[ $g == gemma3-4b:q4_k || $g == qwen3-30b-a3b:q4_k ]]; then
    node .cache/device/make_gguf.mjs --shape=${g%%:*} --out=/tmp/gguf/${g%%:*} >> $OUT/gen.log 2>&1 &
  else
    python3 .peer/make_gguf.py --model ${g%%:*} --types ${g#*:} --out /tmp/gguf/${g%%:*} >> $OUT/gen.log 2>&1 &
  fi
  W=$!
  for f in $prev; do bench_file $f; done
  wait $W; echo "written $g rc $? $(( $(date +%s) - T0 ))s" >> $OUT/gen.log
  prev=$(ls /tmp/gguf/${g%%:*}/*.gguf)
done
for f in $prev; do bench_file $f; done
