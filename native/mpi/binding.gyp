# Built by native/mpi/build.mjs (npm run build:mpi), which asks `mpicc --showme:…` for Open MPI's
# include directories and link flags and passes them as the gyp variables below (space-separated).
{
  'variables': {
    'mpi_include%': '/usr/include',
    'mpi_ldflags%': '-lmpi',
  },
  'targets': [
    {
      'target_name': 'paratrain_mpi',
      'sources': ['paratrain_mpi.c'],
      'include_dirs': ['<@(mpi_include)'],
      'cflags': ['-std=c11', '-O2', '-Wall', '-Wextra', '-Wno-unused-parameter'],
      'libraries': ['<@(mpi_ldflags)', '-ldl', '-lpthread'],
      'defines': ['NAPI_VERSION=8'],
    },
  ],
}
