#!/usr/bin/env bash
# The real-GPU check: on a machine with an NVIDIA (or any Vulkan) GPU and its driver, after `npm ci`,
# finds what Vulkan needs, runs the webgpu tests on that GPU and the GPU benchmarks, and writes
# everything they print to one file (default gpu-figures.txt; first argument to change it).
# Bounded to under 8 minutes.
#
#   scripts/gpu-check.sh [OUTPUT_FILE]
#
# The Vulkan loader (libvulkan.so.1) comes from the distribution (Debian/Ubuntu: libvulkan1); where
# the machine cannot install packages, put the unpacked .deb files of libvulkan1 in .gl/ and they
# are unpacked into / first. The NVIDIA driver's ICD file is looked for where drivers and
# containers put it; VK_DRIVER_FILES, if set, wins.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-gpu-figures.txt}"
exec > >(tee "$out") 2>&1
started=$SECONDS
left() { echo $((470 - (SECONDS - started))); }

echo "== machine"
date -u
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "nvidia-smi: not found"
node --version

echo "== Vulkan"
if ! ldconfig -p 2>/dev/null | grep -q 'libvulkan.so.1'; then
  if compgen -G '.gl/*.deb' >/dev/null; then
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
  fi
fi
ldconfig -p 2>/dev/null | grep -q 'libvulkan.so.1' && echo "loader: $(ldconfig -p | grep -m1 'libvulkan.so.1')" ||
  echo "loader: libvulkan.so.1 not found (Debian/Ubuntu: apt-get install libvulkan1)"
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -z "${VK_ICD_FILENAMES:-}" ]; then
  for icd in /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json \
    /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.x86_64.json; do
    if [ -f "$icd" ]; then
      export VK_DRIVER_FILES="$icd"
      break
    fi
  done
fi
echo "driver file: ${VK_DRIVER_FILES:-${VK_ICD_FILENAMES:-the default search of the loader}}"
if [ -f /usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json ]; then
  export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
fi

echo "== paratrain info"
timeout 60 node --import tsx src/cli/main.ts info

echo "== webgpu tests on this GPU"
PARATRAIN_REQUIRE_GPU_TESTS=1 timeout 180 node --import tsx --test --test-concurrency=1 test/webgpu/*.test.ts 2>&1 |
  grep -E '^# (tests|pass|fail|skipped)|^not ok|error:' || true

echo "== npm run bench -- gpu"
timeout "$(left)" node --import tsx bench/main.ts gpu --sizes 256,1024,2048,4096

echo "== the CPU for comparison: npm run bench -- kernels (onednn, sgemm rows, one core)"
timeout "$(left)" node --import tsx bench/main.ts kernels --quick --backends onednn --filter sgemm

echo "== done in $((SECONDS - started)) s; figures in $out"
