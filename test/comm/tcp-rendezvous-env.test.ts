/** rendezvousFromEnv: torchrun, Open MPI and Slurm environments, Slurm node lists, and the errors. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { expandNodeList, rendezvousFromEnv, RendezvousEnvError } from '../../src/comm/rendezvous.ts';

function throwsVar(env: Record<string, string>, variable: string, message: RegExp): void {
  assert.throws(
    () => rendezvousFromEnv(env),
    (err: unknown) => {
      assert.ok(err instanceof RendezvousEnvError, String(err));
      assert.equal(err.variable, variable);
      assert.match(err.message, message);
      assert.ok(err.message.includes(variable), `the message names ${variable}: ${err.message}`);
      return true;
    },
  );
}

test('no launcher variables: a single process', () => {
  assert.deepEqual(rendezvousFromEnv({}), {
    rank: 0,
    worldSize: 1,
    localRank: 0,
    masterAddr: '127.0.0.1',
    masterPort: 29500,
    source: 'single',
  });
});

test('torchrun style', () => {
  assert.deepEqual(
    rendezvousFromEnv({ RANK: '3', WORLD_SIZE: '8', LOCAL_RANK: '1', MASTER_ADDR: 'node01', MASTER_PORT: '29600' }),
    { rank: 3, worldSize: 8, localRank: 1, masterAddr: 'node01', masterPort: 29600, source: 'torchrun' },
  );
  // defaults: port 29500; without LOCAL_RANK one host is assumed
  assert.deepEqual(rendezvousFromEnv({ RANK: '1', WORLD_SIZE: '2', MASTER_ADDR: '127.0.0.1' }), {
    rank: 1,
    worldSize: 2,
    localRank: 1,
    masterAddr: '127.0.0.1',
    masterPort: 29500,
    source: 'torchrun',
  });
  // torchrun wins over the Slurm allocation it runs in
  assert.equal(
    rendezvousFromEnv({ RANK: '0', WORLD_SIZE: '1', SLURM_PROCID: '5', SLURM_NTASKS: '8' }).source,
    'torchrun',
  );
});

test('torchrun style errors name the variable', () => {
  throwsVar({ RANK: '1' }, 'WORLD_SIZE', /WORLD_SIZE is not/);
  throwsVar({ WORLD_SIZE: '2' }, 'RANK', /RANK is not/);
  throwsVar({ RANK: '2', WORLD_SIZE: '2', MASTER_ADDR: 'h' }, 'RANK', /out of range.*0…1/);
  throwsVar({ RANK: 'one', WORLD_SIZE: '2', MASTER_ADDR: 'h' }, 'RANK', /not a non-negative integer/);
  throwsVar({ RANK: '0', WORLD_SIZE: '0', MASTER_ADDR: 'h' }, 'WORLD_SIZE', /at least 1/);
  throwsVar({ RANK: '1', WORLD_SIZE: '2' }, 'MASTER_ADDR', /host of rank 0/);
  throwsVar({ RANK: '1', WORLD_SIZE: '2', MASTER_ADDR: 'h', MASTER_PORT: '70000' }, 'MASTER_PORT', /not a TCP port/);
  throwsVar({ RANK: '1', WORLD_SIZE: '4', LOCAL_RANK: '3', MASTER_ADDR: 'h' }, 'LOCAL_RANK', /larger than RANK/);
});

test('Open MPI', () => {
  assert.deepEqual(
    rendezvousFromEnv({
      OMPI_COMM_WORLD_RANK: '2',
      OMPI_COMM_WORLD_SIZE: '4',
      OMPI_COMM_WORLD_LOCAL_RANK: '2',
      OMPI_COMM_WORLD_LOCAL_SIZE: '4',
    }),
    { rank: 2, worldSize: 4, localRank: 2, masterAddr: '127.0.0.1', masterPort: 29500, source: 'openmpi' },
  );
  // mpirun -x MASTER_ADDR -x MASTER_PORT
  const multi = {
    OMPI_COMM_WORLD_RANK: '5',
    OMPI_COMM_WORLD_SIZE: '8',
    OMPI_COMM_WORLD_LOCAL_RANK: '1',
    OMPI_COMM_WORLD_LOCAL_SIZE: '4',
  };
  assert.deepEqual(rendezvousFromEnv({ ...multi, MASTER_ADDR: 'gpu07', MASTER_PORT: '1234' }), {
    rank: 5,
    worldSize: 8,
    localRank: 1,
    masterAddr: 'gpu07',
    masterPort: 1234,
    source: 'openmpi',
  });
  // mpirun inside a Slurm allocation: the allocation's first host
  assert.equal(rendezvousFromEnv({ ...multi, SLURM_JOB_NODELIST: 'cn[003-004]' }).masterAddr, 'cn003');
  throwsVar(multi, 'MASTER_ADDR', /span \(OMPI_COMM_WORLD_LOCAL_SIZE=4\) several hosts.*mpirun -x MASTER_ADDR/);
  throwsVar({ OMPI_COMM_WORLD_RANK: '1' }, 'OMPI_COMM_WORLD_SIZE', /not set/);
  throwsVar({ OMPI_COMM_WORLD_RANK: '4', OMPI_COMM_WORLD_SIZE: '4' }, 'OMPI_COMM_WORLD_RANK', /out of range/);
});

test('Slurm', () => {
  assert.deepEqual(
    rendezvousFromEnv({
      SLURM_PROCID: '6',
      SLURM_NTASKS: '8',
      SLURM_LOCALID: '2',
      SLURM_JOB_NODELIST: 'node[01-04,07]',
      SLURM_JOB_ID: '123456',
    }),
    { rank: 6, worldSize: 8, localRank: 2, masterAddr: 'node01', masterPort: 29500 + 456, source: 'slurm' },
  );
  // SLURM_NODELIST and SLURM_NPROCS are accepted too; MASTER_* override
  const old = rendezvousFromEnv({ SLURM_PROCID: '0', SLURM_NPROCS: '2', SLURM_NODELIST: 'a1,b2' });
  assert.equal(old.masterAddr, 'a1');
  assert.equal(old.worldSize, 2);
  assert.equal(old.masterPort, 29500);
  const over = rendezvousFromEnv({
    SLURM_PROCID: '1',
    SLURM_NTASKS: '2',
    SLURM_JOB_NODELIST: 'a1',
    MASTER_ADDR: 'x',
    MASTER_PORT: '4000',
  });
  assert.deepEqual([over.masterAddr, over.masterPort], ['x', 4000]);
  throwsVar({ SLURM_PROCID: '1', SLURM_NTASKS: '2' }, 'SLURM_JOB_NODELIST', /MASTER_ADDR/);
  throwsVar({ SLURM_PROCID: '1' }, 'SLURM_NTASKS', /not set/);
  throwsVar({ SLURM_PROCID: '0', SLURM_NTASKS: '2', SLURM_JOB_NODELIST: 'node[01-' }, 'SLURM_JOB_NODELIST', /unclosed/);
  throwsVar(
    { SLURM_PROCID: '0', SLURM_NTASKS: '2', SLURM_JOB_NODELIST: 'node[04-01]' },
    'SLURM_JOB_NODELIST',
    /backwards/,
  );
});

test('Slurm node lists expand like scontrol show hostnames', () => {
  assert.deepEqual(expandNodeList('node[01-04,07]'), ['node01', 'node02', 'node03', 'node04', 'node07']);
  assert.deepEqual(expandNodeList('gpu1'), ['gpu1']);
  assert.deepEqual(expandNodeList('a[1-2],b,c[9-11]'), ['a1', 'a2', 'b', 'c9', 'c10', 'c11']);
  assert.deepEqual(expandNodeList('n[098-101]'), ['n098', 'n099', 'n100', 'n101']);
  assert.deepEqual(expandNodeList('rack[1-2]-n[1,3]'), ['rack1-n1', 'rack1-n3', 'rack2-n1', 'rack2-n3']);
  assert.deepEqual(expandNodeList('big[0001-9999]', 2), ['big0001', 'big0002']);
  for (const bad of ['', 'a[]', 'a[1-x]', 'a[[1]]', 'a]1[', 'a,,b'])
    assert.throws(() => expandNodeList(bad), Error, bad);
});
