# Built by native/shm/build.mjs (npm run build:shm): the shm transport's optional native reduction.
# No library: only a C compiler and Node's headers.
{
  'targets': [
    {
      'target_name': 'paratrain_shm',
      'sources': ['paratrain_shm.c'],
      'cflags': ['-std=gnu11', '-O3', '-Wall', '-Wextra', '-Wno-unused-parameter', '-Wno-unused-function', '-Wno-psabi'],
      'defines': ['NAPI_VERSION=8'],
    },
  ],
}
