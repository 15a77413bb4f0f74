#!/usr/bin/env bash
# Issue 31's test cases on the H200, one call: the layer goldens (Gemma 2, gpt-oss, BERT, ModernBERT,
# Whisper, T5), the attention layer (KV sharing, cross-attention), the two-sided window, the new ops and
# gpt-oss's MoE, through the shared cases (tests/cases) bundled as gputest.mjs, every spread item run.
# Before the call: .device/ (bench/device/issue27.sh), the bundle built from a clean checkout of the commit
# measured into .cache/layers-device (bench/device/issue31.sh says how), and the goldens packed:
#   tar cJf .peer/goldens-layers.tar.xz -C ../shared goldens-layers
# Carry [".device", ".cache/layers-device", ".peer/goldens-layers.tar.xz"]; command `bash bench/device/issue31-gputest.sh`.
set -u
source .device/setup.sh
mkdir -p ../shared && tar xJf .peer/goldens-layers.tar.xz -C ../shared
T0=$(date +%s)
node .cache/layers-device/gputest.mjs --filter="${FILTER:-decoders|encoder|whisper|t5|attention layer|gatedAct|layerNorm|two-sided|gpt-oss}" --out=$OUT/results --device="NVIDIA H200" > $OUT/gputest.log 2>&1
echo "gputest rc $? $(( $(date +%s) - T0 ))s" >> $OUT/gputest.log
