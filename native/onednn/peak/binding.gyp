# Built by native/onednn/peak/build.mjs (npm run build:peak). Plain -O2, no -march: each vector
# width's loop carries its own target attribute and runs only where the CPU has that ISA.
{
  'targets': [
    {
      'target_name': 'paratrain_peak',
      'sources': ['fma_peak.c'],
      'cflags!': ['-O3'],
      'cflags': ['-std=gnu11', '-O2', '-Wall', '-Wextra', '-Wno-unused-parameter'],
      'defines': ['NAPI_VERSION=8'],
    },
  ],
}
