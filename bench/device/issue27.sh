#!/usr/bin/env bash
# Issue 27's measurements in one GPU-machine call (NVIDIA H200): the host probe, the GPU test pass of
# the cases a model step touches, paged decode against copy bandwidth, and the model and deepseek
# suites (A/B against the step before step graphs, the fused RoPE + cache write and the third step in
# flight) with llama.cpp run by the bench beside each: bf16 on the Llama-3.2-1B shape, Q4_K_M on
# DeepSeek-V2-Lite's (its MLA path; the peer README's file).
#
# Before the call, on this machine (the GPU machine has no network and no Node):
#   bash ../shared/device/prepare.sh node                # .device/: Vulkan loader, Node 22, dawn.node
#   npm run build && npm run build:bench                 # dist/webinfer.js, .cache/device/{bench,gputest}.mjs
#   mkdir -p .peer && (cd /tmp && npm pack @node-llama-cpp/linux-x64-vulkan@3.22.1 && tar xzf node-llama-cpp-linux-x64-vulkan-3.22.1.tgz)
#   tar cJf .peer/llama-libs.tar.xz -C /tmp/package/bins/linux-x64-vulkan libggml-base.so libggml-cpu-x64.so \
#     libggml-cpu-haswell.so libggml-cpu-icelake.so libggml-cpu-sapphirerapids.so libggml-cpu-zen4.so \
#     libggml-vulkan.so libggml.vulkan.v0.5.0.so libllama-common.so libllama.vulkan.v0.5.0.so
#   cp ../shared/peers/llamacpp/make_gguf.py ../shared/peers/llamacpp/bench_ctypes.py .peer/
#   mkdir -p .peer/shared && cp -r ../shared/goldens .peer/shared/
# Then the device tool: carry [".device", ".peer", ".cache/device", "dist/webinfer.js"] (~58 MB),
# command `bash bench/device/issue27.sh` (about 8 minutes). What comes back ($OUT, 8 files at most):
# host.log, gputest.log, bench.log, results/{nvidia-h200.json, model-…md, deepseek-…md, paged-…md,
# gpu-tests-…md}. Merge the suites' keys into bench/results/nvidia-h200.json and `npm run plot`.
set -u
source .device/setup.sh
mkdir -p ../shared && cp -r .peer/shared/goldens ../shared/
mkdir -p /tmp/llama && tar xJf .peer/llama-libs.tar.xz -C /tmp/llama
(python3 .peer/make_gguf.py --model llama-1b --types bf16 --out /tmp/gguf && python3 .peer/make_gguf.py --model dsv2-lite --types q4_k_m --out /tmp/gguf) > /tmp/gguf.log 2>&1 &
GG=$!
T0=$(date +%s)
R=$OUT/results
node bench/probes/host.mjs --model=llama1b > $OUT/host.log 2>&1
node .cache/device/gputest.mjs --filter="^engine|^models|^paged|^linear|^mla|^moe|^ops|^plan" --out=$R --device="NVIDIA H200" > $OUT/gputest.log 2>&1
echo "gputest rc $? $(( $(date +%s) - T0 ))s" >> $OUT/gputest.log
{
  node .cache/device/bench.mjs --suite=paged --peer=none --portable=off --batches=16,64 --contexts=4096,32768 --device="NVIDIA H200" --out=/tmp/paged
  cp /tmp/paged/paged-*.md $R/
  wait $GG; cat /tmp/gguf.log
  node .cache/device/bench.mjs --suite=model,deepseek --model-ab="stepGraphs=false|fuseRopeCache=false|stepsInFlight=2" \
    --llamacpp=/tmp/llama:$(ls /tmp/gguf/*llama-1b*bf16*.gguf):bf16 --llamacpp-deepseek=/tmp/llama:$(ls /tmp/gguf/*dsv2*q4_k_m*.gguf):q4_k_m \
    --llamacpp-script=.peer/bench_ctypes.py --device="NVIDIA H200" --out=$R
  echo "bench rc $? $(( $(date +%s) - T0 ))s"
} > $OUT/bench.log 2>&1
rm -f $R/*.svg
