#!/usr/bin/env bash
# Issue 42 on the H200, one call: the GPU test pass of the quantized cases (FILTER), then the qgemv suite
# (QGEMV_ARGS: by default Llama-3.1-8B's and Llama-3.2-1B's shapes at batch 1 with every KT and R and the
# decode path's A/B, then the 8B shapes at batch 8), then (PARTS includes gguf) the gguf suite on files
# made by llama.cpp's peer writer (MODELS), llama.cpp on each same file.
# Before the call, on this machine:
#   bash ../shared/device/prepare.sh node && npm run build && npm run build:bench
#   git rev-parse HEAD > .cache/device/COMMIT      (the commit measured; the tree must be clean)
#   for gguf: .peer/ as bench/device/issue28b.sh says (llama-libs.tar.xz, make_gguf.py, bench_ctypes.py)
# Carry [".device", ".cache/device", "dist/webinfer.js"] (+ ".peer" for gguf); command
# `PARTS=test,qgemv bash bench/device/issue42.sh`. What comes back: gputest.log, qgemv.log, gguf.log,
# bench.log, results/*.md.
set -u
source .device/setup.sh
R=$OUT/results
mkdir -p $R
T0=$(date +%s)
PARTS=${PARTS:-test,qgemv}
COMMIT=$(cat .cache/device/COMMIT 2>/dev/null || echo unknown)
if [[ $PARTS == *test* ]]; then
  timeout ${TEST_LIMIT:-150} node .cache/device/gputest.mjs --filter="${FILTER:-^quant}" --out=$R --device="NVIDIA H200" > $OUT/gputest.log 2>&1
  echo "gputest rc $? $(( $(date +%s) - T0 ))s" >> $OUT/gputest.log
fi
if [[ $PARTS == *qgemv* ]]; then
  { timeout ${QGEMV_LIMIT:-300} node .cache/device/bench.mjs --suite=qgemv --qgemv-shapes=${SHAPES1:-8b,1b} --qgemv-m=1 ${EXPLORE:---explore-qgemv} --rounds=3 --commit=$COMMIT \
      --peer=none --device="NVIDIA H200" --out=$R ${QGEMV_ARGS:-}
    echo "qgemv M1 rc $? $(( $(date +%s) - T0 ))s"
    cp $R/qgemv-nvidia-h200.md $R/qgemv-m1-nvidia-h200.md
    timeout ${QGEMV8_LIMIT:-150} node .cache/device/bench.mjs --suite=qgemv --qgemv-shapes=8b --qgemv-m=${M8:-8} --rounds=3 --commit=$COMMIT \
      --peer=none --device="NVIDIA H200" --out=$R ${QGEMV_ARGS:-}
    echo "qgemv M8 rc $? $(( $(date +%s) - T0 ))s"
    mv $R/qgemv-nvidia-h200.md $R/qgemv-m8-nvidia-h200.md
  } > $OUT/qgemv.log 2>&1
  rm -f $R/nvidia-h200.json
fi
if [[ $PARTS == *gguf* ]]; then
  # The gguf part is issue42-span.sh's (the files made by llama.cpp's peer writer, llama.cpp on each).
  PARTS=gguf bash bench/device/issue42-span.sh
fi
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv >> $OUT/qgemv.log 2>&1
