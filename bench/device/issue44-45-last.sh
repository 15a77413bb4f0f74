#!/usr/bin/env bash
# The session's last H200 call: Gemma-3-4B's first token with an image (the projector's pooling on the GPU)
# while the 8B Q4_K_M file is written, then the speculation suite on the 8B shape alone (no bf16, no draft:
# the policy's runs after its cost estimate changed). Carry [".device", ".cache/device", ".peer"]. What comes
# back: logs.txt and results.tar.xz.
source bench/device/preamble.sh
python3 .peer/make_gguf.py --model llama-8b --types q4_k_m --out /tmp/gguf/8b --threads 12 > $OUT/gen.log 2>&1 &
W=$!
node .cache/device/make_gguf.mjs --shape=gemma3-4b --out=/tmp/gguf/g3v >> $OUT/gen.log 2>&1 &
G=$!
node .cache/device/make_gguf.mjs --shape=gemma3-4b-mmproj --out=/tmp/gguf/g3v >> $OUT/gen.log 2>&1
wait $G
timeout 120 node .cache/device/bench.mjs --suite=vision "--vision=/tmp/gguf/g3v/gemma3-4b-q4_k.gguf:/tmp/gguf/g3v/gemma3-4b-mmproj-f16.gguf:Gemma-3-4B shape (Q4_K text and F16 tower)" \
  --peer=none --commit=$COMMIT "--device=NVIDIA H200" --out=$R > $OUT/vision.log 2>&1
echo "vision rc $? $(( $(date +%s) - T0 ))s" >> $OUT/vision.log
wait $W
echo "written 8b rc $? $(( $(date +%s) - T0 ))s" >> $OUT/gen.log
F8=$(ls /tmp/gguf/8b/*.gguf | head -1)
timeout ${LIMIT:-200} node .cache/device/bench.mjs --suite=spec --spec-no-bf16 "--spec-gguf=$F8:Llama-3.1-8B shape Q4_K_M" \
  --peer=none --commit=$COMMIT "--device=NVIDIA H200" --spec-tag=8b-policy --out=$R > $OUT/spec-8b.log 2>&1
echo "spec 8b rc $? $(( $(date +%s) - T0 ))s" >> $OUT/spec-8b.log
for f in gen vision spec-8b; do [[ -f $OUT/$f.log ]] && { echo "=== $f.log"; cat $OUT/$f.log; rm $OUT/$f.log; }; done > $OUT/logs.txt
tar cJf $OUT/results.tar.xz -C $OUT results && rm -rf $OUT/results
