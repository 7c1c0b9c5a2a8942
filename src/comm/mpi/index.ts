/**
 * The optional Open MPI transport: the same Communicator as `shm` and `tcp`, with MPI's own tuned
 * collectives doing the work. Needs the addon build/native/paratrain_mpi.node, which `npm ci`
 * builds only where Open MPI's development files are installed (Debian: libopenmpi-dev; mpirun
 * comes with openmpi-bin); without it init() fails with a message saying how to build it.
 *
 *   // every process, started by `mpirun -np N node …`
 *   const comm = await MpiCommunicator.init();   // in the main thread or ONE worker thread
 *   await comm.allreduce(grads, 'mean');          // MPI_Iallreduce in place, MPI_Wait, then ÷ size
 *   const { commMs, bytes } = comm.takeStats();   // idleMs is 0: not measurable from outside MPI
 *   await comm.close();                           // MPI_Finalize (every rank; once per process)
 *
 * Calls: allreduce = MPI_Iallreduce(MPI_IN_PLACE); reduceScatter = MPI_Ireduce_scatter with the
 * ownedSlice counts (the result is moved from the front of the buffer to the owned slice);
 * allgather = MPI_Iallgatherv(MPI_IN_PLACE) with the same counts — each completed with MPI_Wait
 * at once, or, while the caller computes (computing(true): hybrid's gradient buckets during
 * backward, comm/overlap.ts), with one MPI_Test per turn of the event loop until it ends: Open MPI
 * progresses a non-blocking collective only inside MPI calls, so those tests are its progress. One
 * algorithm either way, so overlap changes no bit. broadcast = MPI_Bcast;
 * barrier = MPI_Barrier; send/recv = MPI_Isend/MPI_Irecv polled with MPI_Test, so a thread can
 * have several in flight (two ranks that both send first do not deadlock). 'mean' is the sum
 * divided by the number of ranks. All run on a duplicate of MPI_COMM_WORLD.
 *
 * Threads: MPI is initialised with MPI_THREAD_FUNNELED by the thread that calls init(), and the
 * addon refuses MPI calls from any other thread. Collectives block that thread's event loop until
 * they complete (no timers or I/O run meanwhile), as MPI calls do in C, except while the caller
 * computes (above): then MPI is only tested, on the same thread, between the caller's turns.
 *
 * Failures: an MPI error is thrown as MpiError naming the rank, and the communicator refuses
 * further calls. A rank that exits without close() makes mpirun end the whole job (Open MPI
 * reports which process); abort(reason) ends it at once with MPI_Abort. There are no timeouts:
 * a rank that never joins a collective leaves the others waiting, as in any MPI program.
 */
export { MpiCommunicator, MpiError } from './mpiCommunicator.ts';
export { loadMpiAddon, mpiAddonPath, mpiUnavailableReason, type MpiAddon, type MpiInitInfo } from './addon.ts';
