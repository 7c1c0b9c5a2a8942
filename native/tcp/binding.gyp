# Built by native/tcp/build.mjs (npm run build:tcp): the tcp transport's optional native data path.
# No library: only a C compiler and Node's headers.
{
  'targets': [
    {
      'target_name': 'paratrain_tcp',
      'sources': ['paratrain_tcp.c', 'kernels.c', 'ring.c'],
      'cflags': ['-std=gnu11', '-O3', '-Wall', '-Wextra', '-Wno-unused-parameter', '-Wno-psabi'],
      'defines': ['NAPI_VERSION=8'],
    },
  ],
}
