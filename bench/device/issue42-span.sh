#!/usr/bin/env bash
# Issue 42, second session, on the H200: the quantized GEMV timed as a step runs it, and the whole models
# beside llama.cpp. PARTS (default span,rms):
#   span  the qgemv suite with its calls in one pass and the weights rotating over 4 copies (out of L2, as
#         in a step), the yardsticks beside (the read kernel over the same bytes; an empty dispatch), every
#         KT, R and workgroup size of the explore lists (KTS, RS, WGS), at Llama-3.1-8B's and -3.2-1B's shapes;
#   rms   the planner's plan with the RMSNorm folded in (RMS_TYPES);
#   m8    the 8B shapes at 8 rows (the planner's plan, and the GEMV beside where it picks the matrices);
#   gguf  the gguf suite on files made by llama.cpp's peer writer (MODELS), llama.cpp on each same file
#         (GGUF_ARGS, e.g. --model-contexts=1024); the file AB_FILE (a basename) also runs with AB_ARGS
#         (e.g. --model-ab=pagedMinPartition=64).
# Before the call (on this machine): bash ../shared/device/prepare.sh node; a clean worktree at the commit
# measured: npm run build:bench; git rev-parse HEAD > .cache/device/COMMIT; for gguf, .peer/ as
# bench/device/issue28b.sh says. Carry [".device", ".cache/device"] (+ ".peer").
# What comes back: span.log, rms.log, bench.log, results/*.md.
set -u
source .device/setup.sh
R=$OUT/results
mkdir -p $R
T0=$(date +%s)
PARTS=${PARTS:-span,rms}
COMMIT=$(cat .cache/device/COMMIT 2>/dev/null || echo unknown)
if [[ $PARTS == *gguf* ]]; then
  mkdir -p /tmp/llama && tar xJf .peer/llama-libs.tar.xz -C /tmp/llama
  ( for m in ${MODELS:-llama-1b:q4_k_m}; do python3 .peer/make_gguf.py --model ${m%%:*} --types ${m#*:} --out /tmp/gguf || exit 1; done
    echo "gguf rc $? $(( $(date +%s) - T0 ))s"; ls -la /tmp/gguf ) > $OUT/gguf.log 2>&1 &
  GG=$!
fi
B=(node .cache/device/bench.mjs --suite=qgemv --commit=$COMMIT --peer=none "--device=NVIDIA H200" --out=$R)
if [[ $PARTS == *span* ]]; then
  timeout ${SPAN_LIMIT:-330} "${B[@]}" --qgemv-shapes=${SHAPES:-8b,1b} --qgemv-m=1 --rounds=2 --qgemv-span --qgemv-rot=4 --qgemv-yardsticks --explore-qgemv \
    --qgemv-kt=${KTS:-32,64,128} --qgemv-r=${RS:-2,4} --qgemv-wg=${WGS:-64,256} ${SPAN_ARGS:-} > $OUT/span.log 2>&1
  echo "span rc $? $(( $(date +%s) - T0 ))s" >> $OUT/span.log
  mv $R/qgemv-nvidia-h200.md $R/qgemv-span-nvidia-h200.md 2>/dev/null
fi
if [[ $PARTS == *rms* ]]; then
  timeout ${RMS_LIMIT:-120} "${B[@]}" --qgemv-shapes=${SHAPES:-8b,1b} --qgemv-m=1 --rounds=2 --qgemv-span --qgemv-rot=4 --qgemv-rms --qgemv-types=${RMS_TYPES:-Q4_K,Q4_0} > $OUT/rms.log 2>&1
  echo "rms rc $? $(( $(date +%s) - T0 ))s" >> $OUT/rms.log
  mv $R/qgemv-nvidia-h200.md $R/qgemv-span-rms-nvidia-h200.md 2>/dev/null
fi
if [[ $PARTS == *m8* ]]; then
  timeout ${M8_LIMIT:-120} "${B[@]}" --qgemv-shapes=8b --qgemv-m=8 --rounds=2 --qgemv-span --qgemv-rot=4 > $OUT/m8.log 2>&1
  echo "m8 rc $? $(( $(date +%s) - T0 ))s" >> $OUT/m8.log
  mv $R/qgemv-nvidia-h200.md $R/qgemv-span-m8-nvidia-h200.md 2>/dev/null
fi
rm -f $R/*.json
if [[ $PARTS == *gguf* ]]; then
  wait $GG
  for f in /tmp/gguf/*.gguf; do
    b=$(basename $f .gguf)
    ab=""; [[ -n ${AB_FILE:-} && $b == $AB_FILE ]] && ab=${AB_ARGS:-}
    timeout ${GGUF_LIMIT:-200} node .cache/device/bench.mjs --suite=gguf --gguf=$f:$b --gguf-llamacpp=/tmp/llama --llamacpp-script=.peer/bench_ctypes.py \
      --commit=$COMMIT "--device=NVIDIA H200" --out=/tmp/res-$b ${GGUF_ARGS:-} $ab >> $OUT/bench.log 2>&1
    echo "gguf $f rc $? $(( $(date +%s) - T0 ))s" >> $OUT/bench.log
    cat /tmp/res-$b/gguf-nvidia-h200.md >> $R/gguf-nvidia-h200.md 2>/dev/null; echo >> $R/gguf-nvidia-h200.md
  done
fi
