#!/usr/bin/env bash
# One H200 call for issues 44 and 45: the exactness of speculation (the speculative cases on every golden
# subject, the paged cases and those two models' goldens) and Gemma 3 (text and vision goldens) through
# the shared cases, while the Gemma-3-4B vision pair is written; then issue44-vision.sh's time to first
# token with an 896×896 image. Before the call: as issue44-vision.sh says, and the goldens those cases
# read packed as .peer/goldens-check.tar.xz (goldens/{llama-gqa,qwen3-qknorm-tied,deepseek-v2-moe},
# goldens-quant/gguf-llama-q4-k-m, goldens-arch/gemma3-{text,vision}). Carry [".device", ".cache/device",
# ".peer/goldens-check.tar.xz"]. What comes back: gputest.log, gen.log, vision.log, results/gpu-tests-*.md,
# results/vision-nvidia-h200.md.
source bench/device/preamble.sh
mkdir -p ../shared && tar xJf .peer/goldens-check.tar.xz -C ../shared
node .cache/device/make_gguf.mjs --shape=gemma3-4b --out=/tmp/gguf/g3v > $OUT/gen.log 2>&1 &
G1=$!
node .cache/device/make_gguf.mjs --shape=gemma3-4b-mmproj --out=/tmp/gguf/g3v >> $OUT/gen.log 2>&1 &
G2=$!
timeout ${TEST_LIMIT:-300} node .cache/device/gputest.mjs --filter="${FILTER:-^speculative|^paged|^models › (llama-gqa|qwen3-qknorm-tied|deepseek-v2-moe|gguf-llama-q4-k-m):|gemma3}" \
  --out=$R --device="NVIDIA H200" > $OUT/gputest.log 2>&1
echo "gputest rc $? $(( $(date +%s) - T0 ))s" >> $OUT/gputest.log
wait $G1 $G2
echo "written rc $? $(( $(date +%s) - T0 ))s" >> $OUT/gen.log
timeout ${LIMIT:-200} node .cache/device/bench.mjs --suite=vision "--vision=/tmp/gguf/g3v/gemma3-4b-q4_k.gguf:/tmp/gguf/g3v/gemma3-4b-mmproj-f16.gguf:Gemma-3-4B shape (Q4_K text and F16 tower)" \
  --peer=none --commit=$COMMIT "--device=NVIDIA H200" --out=$R > $OUT/vision.log 2>&1
echo "vision rc $? $(( $(date +%s) - T0 ))s" >> $OUT/vision.log
