import { ownedSlice, type CollectiveStats, type Communicator, type ReduceOp } from './communicator.ts';

/**
 * A Communicator over some of a world's ranks: a tensor-parallel group, or the devices that hold
 * the same pipeline stage. It is built on the world's point-to-point calls, so it works over every
 * transport, and its members call it in the same order as with any communicator; the other ranks
 * never see it.
 *
 * Collectives are rings over the members in the order `ranks` lists them (member i sends to i + 1):
 * a reduce-scatter leaves member i the sum of its owned slice (ownedSlice), added up in the ring's
 * order starting after i, and an all-gather passes the slices on; an all-reduce is both, so every
 * member holds the same bits. Each member moves 2(n − 1)/n of the buffer, as a world ring does.
 *
 * Calls run one at a time in the order they are made (a strategy may start its next bucket before
 * the last finished): the world's transports deliver a pair's messages in order, and some check
 * tags rather than match them. Messages carry tag `tagBase` (collectives) or `tagBase + 1 + tag`
 * (point to point), so choose tagBase apart from other users of the same pairs of ranks.
 *
 * A transport's synchronous send may wait for its receiver, so in every ring step the even members
 * send first and the odd ones receive first (with an odd count, the chain still resolves from the
 * first odd member).
 */
export function subgroup(world: Communicator, ranks: readonly number[], tagBase: number): Communicator {
  checkMembers(world, ranks);
  const rank = ranks.indexOf(world.rank);
  const size = ranks.length;
  const next = ranks[(rank + 1) % size]!;
  const prev = ranks[(rank - 1 + size) % size]!;
  const stats: CollectiveStats = { commMs: 0, idleMs: 0, bytes: 0 };
  let queue: Promise<unknown> = Promise.resolve();
  let scratch = new Float32Array(0);

  /** Runs `call` after every earlier call of this member has ended, timing it. */
  const inTurn = <T>(call: () => Promise<T>): Promise<T> => {
    const run = queue.then(async () => {
      const t0 = performance.now();
      try {
        return await call();
      } finally {
        stats.commMs += performance.now() - t0;
      }
    });
    queue = run.catch(() => {});
    return run;
  };
  const slice = (buf: Float32Array, member: number) => {
    const { start, end } = ownedSlice(buf.length, size, member);
    return buf.subarray(start, end);
  };
  /** One ring step: send `out` to the next member, receive `into` from the previous one. */
  const ringStep = async (out: Float32Array, into: Float32Array) => {
    stats.bytes += (out.length + into.length) * 4;
    if (rank % 2 === 0) {
      await world.send(out, next, tagBase);
      await world.recv(into, prev, tagBase);
    } else {
      await world.recv(into, prev, tagBase);
      await world.send(out, next, tagBase);
    }
  };
  const mod = (k: number) => (k + size) % size;

  // step s sends the partial sum of slice i − s − 1 and adds the arriving one into slice i − s − 2,
  // so after n − 1 steps slice i is whole here
  const reduceScatter = async (buf: Float32Array, op: ReduceOp) => {
    for (let s = 0; s < size - 1; s++) {
      const out = slice(buf, mod(rank - s - 1));
      const mine = slice(buf, mod(rank - s - 2));
      if (scratch.length < mine.length) scratch = new Float32Array(mine.length);
      const arriving = scratch.subarray(0, mine.length);
      await ringStep(out, arriving);
      for (let j = 0; j < mine.length; j++) mine[j] = mine[j]! + arriving[j]!;
    }
    const own = slice(buf, rank);
    if (op === 'mean' && size > 1) for (let j = 0; j < own.length; j++) own[j] = own[j]! / size;
  };
  // step s passes on slice i − s and receives slice i − s − 1
  const allgather = async (buf: Float32Array) => {
    for (let s = 0; s < size - 1; s++) await ringStep(slice(buf, mod(rank - s)), slice(buf, mod(rank - s - 1)));
  };

  return {
    rank,
    size,
    allreduce: (buf, op = 'sum') =>
      inTurn(async () => {
        await reduceScatter(buf, op);
        await allgather(buf);
      }),
    reduceScatter: (buf, op = 'sum') =>
      inTurn(async () => {
        await reduceScatter(buf, op);
        return ownedSlice(buf.length, size, rank);
      }),
    allgather: (buf) => inTurn(() => allgather(buf)),
    broadcast: (buf, root) =>
      inTurn(async () => {
        checkMember(root, size, 'broadcast root');
        if (rank !== root) {
          stats.bytes += buf.length * 4;
          return world.recv(buf, ranks[root]!, tagBase);
        }
        for (let m = 0; m < size; m++) {
          if (m === root) continue;
          stats.bytes += buf.length * 4;
          await world.send(buf, ranks[m]!, tagBase);
        }
      }),
    barrier: () =>
      inTurn(async () => {
        const token = new Float32Array(size);
        await reduceScatter(token, 'sum');
        await allgather(token);
      }),
    send: (buf, dest, tag = 0) =>
      inTurn(() => {
        checkMember(dest, size, 'send destination');
        stats.bytes += buf.length * 4;
        return world.send(buf, ranks[dest]!, tagBase + 1 + tag);
      }),
    recv: (buf, source, tag = 0) =>
      inTurn(() => {
        checkMember(source, size, 'recv source');
        stats.bytes += buf.length * 4;
        return world.recv(buf, ranks[source]!, tagBase + 1 + tag);
      }),
    // idle time is in the world's own stats: its point-to-point calls do the waiting
    takeStats: () => {
      const out = { ...stats };
      stats.commMs = 0;
      stats.bytes = 0;
      return out;
    },
  };
}

/** The members must be distinct ranks of the world, this rank among them. */
function checkMembers(world: Communicator, ranks: readonly number[]): void {
  const bad = ranks.find((r) => !Number.isInteger(r) || r < 0 || r >= world.size);
  if (bad !== undefined)
    throw new Error(`subgroup: rank ${bad} is not a rank of the world of ${world.size} (ranks 0–${world.size - 1})`);
  if (new Set(ranks).size !== ranks.length) throw new Error(`subgroup: ranks [${ranks.join(', ')}] repeat a rank`);
  if (!ranks.includes(world.rank))
    throw new Error(`subgroup: rank ${world.rank} builds a group of ranks [${ranks.join(', ')}] it is not in`);
}

function checkMember(member: number, size: number, what: string): void {
  if (!Number.isInteger(member) || member < 0 || member >= size)
    throw new Error(`subgroup: ${what} ${member} is not a member (0–${size - 1})`);
}
