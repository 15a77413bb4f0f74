#!/usr/bin/env bash
# The last H200 call of the session: the Gemma 3 vision cases (SDPA in the tower), the GEMV rows case and two
# speculative subjects, the vision benchmark, then issue45.sh (AB: the GEMV rows at once). Carry [".device",
# ".cache/device", ".peer"]. What comes back: logs.txt and results.tar.xz.
source bench/device/preamble.sh
mkdir -p ../shared && tar xJf .peer/goldens-check.tar.xz -C ../shared
node .cache/device/make_gguf.mjs --shape=gemma3-4b --out=/tmp/gguf/g3v > $OUT/gen.log 2>&1 &
node .cache/device/make_gguf.mjs --shape=gemma3-4b-mmproj --out=/tmp/gguf/g3v >> $OUT/gen.log 2>&1 &
timeout 120 node .cache/device/gputest.mjs --filter="gemma3-vision|rows do not depend|^speculative › (gguf-llama-q4-k-m|deepseek-v2-moe): greedy" --out=$R --device="NVIDIA H200" > $OUT/gputest.log 2>&1
echo "gputest rc $? $(( $(date +%s) - T0 ))s" >> $OUT/gputest.log
wait
timeout 150 node .cache/device/bench.mjs --suite=vision "--vision=/tmp/gguf/g3v/gemma3-4b-q4_k.gguf:/tmp/gguf/g3v/gemma3-4b-mmproj-f16.gguf:Gemma-3-4B shape (Q4_K text and F16 tower)" --peer=none --commit=$COMMIT "--device=NVIDIA H200" --out=$R > $OUT/vision.log 2>&1
echo "vision rc $? $(( $(date +%s) - T0 ))s" >> $OUT/vision.log
rm -f /tmp/gguf/g3v/*
LIMIT1=200 LIMIT2=300 AB=quantGemvRowsEach=false bash bench/device/issue45.sh
for f in gputest gen vision spec-1b spec-8b; do [[ -f $OUT/$f.log ]] && { echo "=== $f.log"; cat $OUT/$f.log; rm $OUT/$f.log; }; done > $OUT/logs.txt
tar cJf $OUT/results.tar.xz -C $OUT results && rm -rf $OUT/results
