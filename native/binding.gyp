# Built by native/build.mjs (npm run build:native), which finds OpenBLAS and passes its header and
# library directories as --openblas-include / --openblas-libdir (gyp variables below).
{
  'variables': {
    'openblas_include%': '/usr/include',
    'openblas_libdir%': '/usr/lib',
  },
  'targets': [
    {
      'target_name': 'paratrain_native',
      'sources': ['paratrain_native.c', 'recurrent.c'],
      'include_dirs': ['<(openblas_include)'],
      # -ffp-contract=fast: the vector updates of recurrent.c's micro-kernel become FMAs (ISO C's default is off)
      'cflags': ['-std=c11', '-O3', '-ffp-contract=fast', '-Wall', '-Wextra', '-Wno-unused-parameter'],
      'libraries': ['-L<(openblas_libdir)', '-Wl,-rpath,<(openblas_libdir)', '-lopenblas'],
      'defines': ['NAPI_VERSION=8'],
    },
  ],
}
