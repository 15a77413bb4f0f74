# Sourced by the device scripts that bench GGUF files: the device's setup, the results folder R, the
# files' folder /tmp/gguf, the start time T0 and the commit measured (.cache/device/COMMIT).
set -u
source .device/setup.sh
R=$OUT/results
mkdir -p $R /tmp/gguf
T0=$(date +%s)
COMMIT=$(cat .cache/device/COMMIT 2>/dev/null || echo unknown)
