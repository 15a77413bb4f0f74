#!/usr/bin/env bash
# Issue 44 on the H200: Gemma-3-4B's time to first token with an 896×896 image and the vision tower's share
# (bench/vision.ts), on llama.cpp's pair written with random weights: the gemma3 text GGUF (Q4_K matrices,
# 2.2 GiB) and its mmproj (F16 matrices, SigLIP-So400m at 896 px and the projector). Before the call: as
# issue42-span.sh says (.device and .cache/device carried). What comes back: gen.log, vision.log,
# results/vision-nvidia-h200.md.
source bench/device/preamble.sh
node .cache/device/make_gguf.mjs --shape=gemma3-4b --out=/tmp/gguf/g3v > $OUT/gen.log 2>&1 &
node .cache/device/make_gguf.mjs --shape=gemma3-4b-mmproj --out=/tmp/gguf/g3v >> $OUT/gen.log 2>&1
wait
echo "written rc $? $(( $(date +%s) - T0 ))s" >> $OUT/gen.log
timeout ${LIMIT:-240} node .cache/device/bench.mjs --suite=vision "--vision=/tmp/gguf/g3v/gemma3-4b-q4_k.gguf:/tmp/gguf/g3v/gemma3-4b-mmproj-f16.gguf:Gemma-3-4B shape (Q4_K text and F16 tower)" \
  --peer=none --commit=$COMMIT "--device=NVIDIA H200" --out=$R > $OUT/vision.log 2>&1
echo "vision rc $? $(( $(date +%s) - T0 ))s" >> $OUT/vision.log
