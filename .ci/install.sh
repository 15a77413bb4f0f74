#!/usr/bin/env bash
# Installs what webinfer's three test suites need on Debian 12 (run as root; idempotent, non-interactive).
#   - chromium (Debian package; its SwiftShader also serves dawn.node)      -> Playwright suite
#   - firefox-esr (Debian package, driven by npm puppeteer-core over BiDi)   -> Firefox suite (on lavapipe 22)
#   - libvulkan1 (loader only) + Node's npm `webgpu` (dawn.node)              -> Node suite
#   - mesa-vulkan-drivers (Debian lavapipe 22)                                -> Deno suite (wgpu)
#   - haproxy (Debian package; the test starts its own on loopback, not the service) -> server suite's
#     two `webinfer serve` behind a least-connections balancer (tests/server/balancer.test.ts)
#   - Mesa 25 lavapipe from bookworm-backports, unpacked privately into
#     .cache/lavapipe25/ (never installed system-wide)                        -> Node suite on lavapipe
#   - npm ci when node_modules is missing or does not match package-lock.json
# Fast when everything is present: apt-get update runs only if something is missing.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export DEBIAN_FRONTEND=noninteractive

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
APT_OPTS=(-y -q -o DPkg::Lock::Timeout=300)

log()  { printf '[install] %s\n' "$*"; }
warn() { printf '[install] WARNING: %s\n' "$*" >&2; }

is_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

# ---------------------------------------------------------------- 1+2. Debian packages
missing_recommends=()   # installed with recommends (chromium needs its fonts etc.)
missing_norecommends=() # loader + Debian lavapipe 22 + haproxy, nothing else
is_installed chromium || missing_recommends+=(chromium)
is_installed firefox-esr || missing_recommends+=(firefox-esr)
for p in libvulkan1 mesa-vulkan-drivers haproxy; do
  is_installed "$p" || missing_norecommends+=("$p")
done
if [ ${#missing_recommends[@]} -gt 0 ] || [ ${#missing_norecommends[@]} -gt 0 ]; then
  log "apt-get update (missing: ${missing_recommends[*]} ${missing_norecommends[*]})"
  $SUDO apt-get "${APT_OPTS[@]}" update
  if [ ${#missing_norecommends[@]} -gt 0 ]; then
    $SUDO apt-get "${APT_OPTS[@]}" install --no-install-recommends "${missing_norecommends[@]}"
  fi
  if [ ${#missing_recommends[@]} -gt 0 ]; then
    $SUDO apt-get "${APT_OPTS[@]}" install "${missing_recommends[@]}"
  fi
else
  log "Debian packages already installed (chromium, firefox-esr, libvulkan1, mesa-vulkan-drivers, haproxy)"
fi

# ---------------------------------------------------------------- 3. Mesa 25 lavapipe (private)
LVP_DIR="$ROOT/.cache/lavapipe25"

lvp_ok() {
  [ -f "$LVP_DIR/lvp_icd.json" ] && [ -f "$LVP_DIR/env.sh" ] || return 1
  local lib
  lib="$(sed -n 's/.*"library_path": *"\([^"]*\)".*/\1/p' "$LVP_DIR/lvp_icd.json")"
  [ -f "$lib" ] || return 1
  # every dependency must resolve (with the private LD_LIBRARY_PATH, if env.sh sets one)
  ( . "$LVP_DIR/env.sh"; ! ldd -r "$lib" 2>&1 | grep -Eq 'not found|undefined symbol' ) || return 1
}

setup_lavapipe25() {
  # Runs in a subshell with `set -e`; any failure -> caller warns and continues.
  local src=/etc/apt/sources.list.d/debian.sources
  local apt_dir="$LVP_DIR/apt" root="$LVP_DIR/root"
  rm -rf "$LVP_DIR"
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/dl" "$root"
  if [ -f "$src" ]; then
    # first stanza of the system's deb822 sources, suite switched to backports, comments dropped
    awk 'BEGIN{RS="";ORS="\n"} NR==1{print; exit}' "$src" \
      | grep -v '^#' \
      | sed 's/^Suites:.*/Suites: bookworm-backports/' > "$apt_dir/backports.sources"
  elif [ -f /etc/apt/sources.list ]; then
    # one-line format: take the first main-archive `deb` line
    local line uri
    line="$(grep -E '^deb[[:space:]]' /etc/apt/sources.list | grep -v -- '-security' | head -n1)"
    uri="$(printf '%s\n' "$line" | awk '{for(i=2;i<=NF;i++) if ($i ~ /^[a-z]+:\/\//) {print $i; exit}}')"
    [ -n "$uri" ]
    printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      "$uri" > "$apt_dir/backports.sources"
  else
    echo "no apt sources found" >&2; return 1
  fi
  grep -q '^URIs:' "$apt_dir/backports.sources"

  local A=(-q
    -o "Dir::Etc::SourceList=$apt_dir/backports.sources"
    -o "Dir::Etc::SourceParts=/dev/null"
    -o "Dir::State::Lists=$apt_dir/lists"
    -o "Dir::Cache=$apt_dir/cache"
    -o "APT::Sandbox::User=root"
    -o "Acquire::Retries=1"
    -o "Acquire::http::Timeout=30")
  apt-get "${A[@]}" update
  ( cd "$apt_dir/dl" && apt-get "${A[@]}" download mesa-vulkan-drivers/bookworm-backports )
  dpkg -x "$apt_dir"/dl/mesa-vulkan-drivers_*.deb "$root"
  dpkg-deb -f "$apt_dir"/dl/mesa-vulkan-drivers_*.deb Version > "$LVP_DIR/VERSION"

  local lib
  lib="$(find "$root" -name libvulkan_lvp.so -type f | head -n1)"
  [ -n "$lib" ]
  # keep only lavapipe (the package also ships radeon/intel/... drivers: ~60 MB we never use)
  find "$root" -name 'libvulkan_*.so' ! -name libvulkan_lvp.so -delete
  find "$root" -name 'libVkLayer_*.so' -delete
  rm -rf "$root/usr/share/vulkan"

  # Libraries it needs that bookworm's are too old / missing for: pull them from backports too.
  # (Mesa 25.0.7's package declares libdrm2 >= 2.4.121, but lavapipe only uses symbols that
  #  bookworm's libdrm 2.4.114 has, so normally nothing is needed here; this is the fallback.)
  local libdir_extra="" env_ld=""
  if ldd -r "$lib" 2>&1 | grep -Eq 'not found|undefined symbol'; then
    echo "lavapipe needs newer libraries; fetching libdrm2 from backports" >&2
    ( cd "$apt_dir/dl" && apt-get "${A[@]}" download libdrm2/bookworm-backports )
    dpkg -x "$apt_dir"/dl/libdrm2_*.deb "$root"
    libdir_extra="$(dirname "$(find "$root" -name 'libdrm.so.2' | head -n1)")"
    env_ld="export LD_LIBRARY_PATH=\"$libdir_extra\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}\""
  fi
  rm -rf "$apt_dir/dl" "$apt_dir/cache"

  cat > "$LVP_DIR/lvp_icd.json" <<JSON
{
    "file_format_version": "1.0.0",
    "ICD": {
        "library_path": "$lib",
        "api_version": "1.4.305"
    }
}
JSON
  {
    echo "# generated by .ci/install.sh: source this before using lvp_icd.json"
    echo "export VK_ICD_FILENAMES=\"$LVP_DIR/lvp_icd.json\""
    [ -z "$env_ld" ] || echo "$env_ld"
  } > "$LVP_DIR/env.sh"
  lvp_ok
}

if lvp_ok; then
  log "Mesa 25 lavapipe already unpacked in .cache/lavapipe25"
else
  log "fetching Mesa 25 lavapipe from bookworm-backports into .cache/lavapipe25"
  set +e
  ( set -e; setup_lavapipe25 )
  rc=$?
  set -e
  if [ $rc -ne 0 ]; then
    warn "could not set up Mesa 25 lavapipe from bookworm-backports (rc=$rc);"
    warn "the Node-on-lavapipe runtime will be reported as unavailable. Continuing."
    rm -rf "$LVP_DIR"
  fi
fi

# ---------------------------------------------------------------- 4. npm ci if needed
npm_stale() {
  [ -d node_modules ] && [ -f node_modules/.package-lock.json ] || return 0
  # stale if any package in package-lock.json is absent (non-optional) or at another version
  node -e '
    const fs = require("fs");
    const want = JSON.parse(fs.readFileSync("package-lock.json", "utf8")).packages || {};
    const have = JSON.parse(fs.readFileSync("node_modules/.package-lock.json", "utf8")).packages || {};
    for (const [k, w] of Object.entries(want)) {
      if (!k || w.link) continue;
      const h = have[k];
      if (!h) { if (!w.optional) { console.error("missing " + k); process.exit(1); } continue; }
      if (h.version !== w.version || (w.integrity && h.integrity && h.integrity !== w.integrity)) {
        console.error("changed " + k); process.exit(1);
      }
      if (!fs.existsSync(k + "/package.json")) { console.error("absent " + k); process.exit(1); }
    }' && return 1 || return 0
}
if npm_stale; then
  log "npm ci (node_modules missing or stale)"
  CI=true npm ci --no-audit --no-fund
else
  log "node_modules up to date with package-lock.json"
fi

# ---------------------------------------------------------------- 5. report
echo "---- runtimes ----"
chromium_ver="$( (/usr/bin/chromium --version 2>/dev/null || true) | head -n1)"
swiftshader_icd=/usr/lib/chromium/vk_swiftshader_icd.json
echo "chromium (Playwright):      ${chromium_ver:-MISSING} $( [ -f $swiftshader_icd ] && echo "[SwiftShader ICD: $swiftshader_icd]" )"
webgpu_ver="$(node -p 'require("./node_modules/webgpu/package.json").version' 2>/dev/null || echo MISSING)"
echo "node+dawn.node SwiftShader: node $(node --version) webgpu $webgpu_ver; VK_ICD_FILENAMES=$swiftshader_icd"
if lvp_ok; then
  echo "node+dawn.node lavapipe25:  mesa $(cat "$LVP_DIR/VERSION" 2>/dev/null); . .cache/lavapipe25/env.sh  (VK_ICD_FILENAMES=$LVP_DIR/lvp_icd.json)"
else
  echo "node+dawn.node lavapipe25:  UNAVAILABLE (bookworm-backports not reachable?)"
fi
firefox_ver="$( (/usr/bin/firefox-esr --version 2>/dev/null || true) | head -n1)"
echo "firefox (puppeteer-core):   ${firefox_ver:-MISSING}; VK_ICD_FILENAMES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json"
deno_bin="$ROOT/node_modules/@deno/linux-x64-glibc/deno"
deno_ver="$( ("$deno_bin" --version 2>/dev/null || true) | head -n1)"
lvp22_icd="$(ls /usr/share/vulkan/icd.d/lvp_icd.*.json 2>/dev/null | head -n1 || true)"
haproxy_ver="$( (/usr/sbin/haproxy -v 2>/dev/null || true) | head -n1)"
echo "haproxy (server suite):     ${haproxy_ver:-MISSING}"
echo "deno (wgpu) lavapipe22:     ${deno_ver:-MISSING}; VK_ICD_FILENAMES=${lvp22_icd:-MISSING} (mesa $(dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null || echo '?'))"
