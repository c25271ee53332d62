#!/usr/bin/env bash
# Installs what Weft needs on a fresh Debian machine (idempotent): system tools used by the
# end-to-end and interop tests and the demo, then the npm dependencies, then the build.
# Every command a test needs is here (test/util/requirements.ts PACKAGE_OF names the package):
# as root a missing one fails its test instead of skipping it.
# Runs as root (apt-get); --no-install-recommends keeps wireguard-tools from pulling a kernel image.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v wireguard-go >/dev/null 2>&1 || need_apt+=(wireguard-go)
command -v wg >/dev/null 2>&1 || need_apt+=(wireguard-tools)
command -v iperf3 >/dev/null 2>&1 || need_apt+=(iperf3)
command -v tshark >/dev/null 2>&1 || need_apt+=(tshark)
command -v tcpdump >/dev/null 2>&1 || need_apt+=(tcpdump)
command -v nft >/dev/null 2>&1 || need_apt+=(nftables)
command -v conntrack >/dev/null 2>&1 || need_apt+=(conntrack)
command -v ping >/dev/null 2>&1 || need_apt+=(iputils-ping)
command -v jq >/dev/null 2>&1 || need_apt+=(jq)
command -v ip >/dev/null 2>&1 || need_apt+=(iproute2)
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
command -v curl >/dev/null 2>&1 || need_apt+=(curl)
# scripts/jazzer-compat.mjs (the fuzzer's addon on Debian 12) builds a shim and patches the ELF.
command -v patchelf >/dev/null 2>&1 || need_apt+=(patchelf)
command -v g++ >/dev/null 2>&1 || need_apt+=(g++)
/usr/bin/python3 -c 'import scapy' >/dev/null 2>&1 || need_apt+=(python3-scapy)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "setup: missing system packages (${need_apt[*]}); run as root to install them" >&2
  else
    echo "setup: apt-get install ${need_apt[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # tshark asks whether non-root users may capture; answer no without a prompt.
    echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections 2>/dev/null || true
    apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  fi
fi

if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "setup: npm ci" >&2
  npm ci --no-audit --no-fund >/dev/null
fi
# npm ci builds the native addons; a reused node_modules skips npm ci, so build them when one is
# missing or older than its sources.
stale=0
for m in weft_io weft_crypto; do
  [ -f native/build/Release/$m.node ] || stale=1
done
if [ $stale = 0 ] && [ -n "$(find native -maxdepth 1 \( -name '*.c' -o -name '*.h' -o -name binding.gyp \) -newer native/build/Release/weft_io.node)" ]; then stale=1; fi
[ $stale = 0 ] || node native/build.mjs
# @jazzer.js/fuzzer's prebuilt addon needs glibc 2.38; on older systems it is shimmed (FUZZING.md).
# Idempotent: does nothing when the addon already loads.
node scripts/jazzer-compat.mjs || echo "setup: scripts/jazzer-compat.mjs failed: npm run fuzz and test/fuzz/jazzer-addon.test.ts need it" >&2
echo "setup: build" >&2
npm run --silent build
