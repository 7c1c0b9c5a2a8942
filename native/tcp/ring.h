/*
 * The native ring: runs the frame-by-frame part of a ring collective (reduce-scatter and/or
 * allgather steps) of src/comm/tcp/ring.ts straight on the two ring sockets, with
 * poll(2), instead of through the JavaScript event loop. Same frames on the wire (header, chunking,
 * checksums), so a rank running it and a rank running the JavaScript ring interoperate.
 *
 * It only runs the expected: anything else — a frame of another call, an Abort, a malformed
 * header, the end of the stream, no data for `slice_ms`, or anything readable on one of the
 * `watch` sockets (this rank's other connections, whose frames JavaScript reads: a peer's Abort
 * comes there, ahead of the data still queued on the ring) — is handed back to JavaScript at a frame
 * boundary (status RING_HANDOVER: the header bytes already read are in `head`), which continues
 * the same steps from (step, cur) and reports errors as it always does. It can start with the next
 * frame's header already read (head_fill 32 on the way in).
 */
#ifndef PARATRAIN_TCP_RING_H
#define PARATRAIN_TCP_RING_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
  uint64_t start, end; /* floats of the buffer this step receives, in order */
  int reduce;          /* add into the buffer (reduce-scatter) or store (allgather) */
  int forward;         /* send the result on to the right */
  float div;           /* divide the sum by this when non-zero (mean, last reduce step) */
} ring_step;

/*
 * RING_ABORTED (only when watching): a peer's Abort is waiting — on the ring's left socket (err_kind
 * RING_ABORT_IN: its header is in `head`, as with a hand-over) or unread on a watched socket
 * (RING_ABORT_WATCHED; the left socket may be in the middle of a frame). The ring returns at once,
 * without waiting for the right neighbour to take the sends still queued: those never started are
 * dropped (out_seq counts back), and the rest of one it was in the middle of is given back
 * (partial_*, out_head) for JavaScript to write, so that the stream stays whole for what follows
 * (this rank's own Abort). JavaScript reads the peer's Abort and fails the call with it.
 */
enum { RING_DONE = 0, RING_HANDOVER = 1, RING_ERROR = 2, RING_ABORTED = 3 };
enum { RING_ABORT_IN = 1, RING_ABORT_WATCHED = 2 };
enum { RING_ERR_FRAME = 1, RING_ERR_EOF = 2, RING_ERR_IO_IN = 3, RING_ERR_IO_OUT = 4, RING_ERR_TIMEOUT_IN = 5, RING_ERR_TIMEOUT_OUT = 6 };

typedef struct {
  /* in */
  int in_fd, out_fd;
  float *buf;
  uint8_t *slot;
  size_t slot_bytes;
  const ring_step *steps;
  size_t nsteps;
  uint64_t send_start, send_end; /* floats sent first, in frames of chunk_floats (none when equal) */
  uint32_t type, flags, arg, tag, aux, chunk_floats, max_frame;
  int slice_ms, timeout_ms;
  const int *watch_fds; /* sockets to watch for anything readable (none when nwatch is 0) */
  int nwatch;
  /* in and out */
  uint32_t in_seq, out_seq;
  size_t step;
  uint64_t cur;
  uint8_t head[32];
  int head_fill;
  /* out */
  int status, err_kind, err_no;
  uint64_t partial_off, partial_payload, partial_len; /* RING_ABORTED: bytes of a frame written, its payload's float offset in buf, its length */
  uint8_t out_head[32];                              /* and its header */
  char msg[256];
  double wait_ms;
  uint64_t bytes_in, bytes_out;
} ring_args;

void ring_run(ring_args *a);

#endif
