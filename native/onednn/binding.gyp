# Built by native/onednn/build.mjs (npm run build:onednn), which finds oneDNN and passes its header
# and library directories and extra link flags as gyp variables (below). Plain -O2 and no -march:
# the addon must run on any x86-64 it is copied to; oneDNN picks its kernels for the CPU at run time.
{
  'variables': {
    'onednn_include%': '/usr/include',
    'onednn_libdir%': '/usr/lib',
    'onednn_extra_libs%': '',
  },
  'targets': [
    {
      'target_name': 'paratrain_onednn',
      'sources': ['paratrain_onednn.c', 'plan.c', 'gemm.c', 'packed.c', 'conv.c', 'pool.c', 'eltwise.c', 'direct.c', 'convpool.c', 'gemmconv.c', 'cells.c', 'rnn.c', 'batchnorm.c', 'dropout.c', 'attention.c', 'attention_rows.c', 'rows.c'],
      'include_dirs': ['<(onednn_include)'],
      'cflags!': ['-O3'],
      'cflags': ['-std=gnu11', '-O2', '-Wall', '-Wextra', '-Wno-unused-parameter', '-Wno-missing-field-initializers', '-Wshadow'],
      'libraries': ['-L<(onednn_libdir)', '-Wl,-rpath,<(onednn_libdir)', '-ldnnl', '<@(onednn_extra_libs)'],
      'defines': ['NAPI_VERSION=8'],
    },
  ],
}
