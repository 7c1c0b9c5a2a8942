/*
 * The native ring (see ring.h): one poll(2) loop over the ring's two sockets. Received frames
 * are read straight where they go (reduce-scatter: a slot, then added into the buffer; allgather:
 * the buffer itself), hashed as they arrive, and forwarded from the buffer without copying; sends
 * wait in a queue that writev(2) drains whenever the right neighbour can take more, so sending,
 * receiving and reducing overlap as in the JavaScript ring.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include "kernels.h"
#include "ring.h"

#define MAGIC 0x31525450u
#define HEADER 32
#define TYPE_ABORT 30 /* FrameType.Abort (src/comm/tcp/frame.ts) */
#define MAX_IOV 64
#define MAX_WATCH 256

typedef struct {
  uint8_t head[HEADER];
  const uint8_t *payload;
  size_t len;
} pending;

typedef struct {
  pending *items;
  size_t cap, head, tail;
  size_t offset; /* bytes of items[head] (header, then payload) already written */
} send_queue;

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void put32(uint8_t *p, uint32_t v) {
  p[0] = v;
  p[1] = v >> 8;
  p[2] = v >> 16;
  p[3] = v >> 24;
}

static uint32_t get32(const uint8_t *p) {
  return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Queues one frame of the call's kind carrying bytes [p, p + len) with payload checksum `check`. */
static int enqueue(send_queue *q, ring_args *a, const uint8_t *p, size_t len, uint32_t check) {
  if (q->tail == q->cap) {
    size_t cap = q->cap ? q->cap * 2 : 64;
    pending *items = realloc(q->items, cap * sizeof *items);
    if (!items) return -1;
    q->items = items;
    q->cap = cap;
  }
  pending *f = &q->items[q->tail++];
  uint8_t *h = f->head;
  put32(h, MAGIC);
  h[4] = (uint8_t)a->type;
  h[5] = (uint8_t)a->flags;
  h[6] = a->arg & 0xff;
  h[7] = (a->arg >> 8) & 0xff;
  put32(h + 8, a->out_seq++);
  put32(h + 12, a->tag);
  put32(h + 16, a->aux);
  put32(h + 20, (uint32_t)len);
  put32(h + 24, check);
  put32(h + 28, crc32_bytes(h, 28));
  f->payload = p;
  f->len = len;
  a->bytes_out += len;
  return 0;
}

/* Writes what the socket takes: 1 = progress, 0 = would block, -1 = error (errno). */
static int drain(send_queue *q, int fd) {
  struct iovec iov[MAX_IOV];
  int k = 0;
  for (size_t i = q->head; i < q->tail && k + 2 <= MAX_IOV; i++) {
    pending *f = &q->items[i];
    size_t skip = i == q->head ? q->offset : 0;
    if (skip < HEADER) {
      iov[k].iov_base = f->head + skip;
      iov[k++].iov_len = HEADER - skip;
      skip = 0;
    } else skip -= HEADER;
    if (f->len > skip) {
      iov[k].iov_base = (void *)(f->payload + skip);
      iov[k++].iov_len = f->len - skip;
    }
  }
  ssize_t w = writev(fd, iov, k);
  if (w < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
  size_t left = (size_t)w;
  while (left > 0) {
    pending *f = &q->items[q->head];
    size_t rest = HEADER + f->len - q->offset;
    if (left >= rest) {
      left -= rest;
      q->head++;
      q->offset = 0;
    } else {
      q->offset += left;
      left = 0;
    }
  }
  if (q->head == q->tail) q->head = q->tail = 0;
  return 1;
}

static void fail(ring_args *a, int kind, int err, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void fail(ring_args *a, int kind, int err, const char *fmt, ...) {
  a->status = RING_ERROR;
  a->err_kind = kind;
  a->err_no = err;
  __builtin_va_list ap;
  __builtin_va_start(ap, fmt);
  vsnprintf(a->msg, sizeof a->msg, fmt, ap);
  __builtin_va_end(ap);
}

/* Whether the 32 header bytes in a->head are exactly the next frame this call expects. */
static int expected(ring_args *a, const ring_step *s) {
  const uint8_t *h = a->head;
  uint32_t len = get32(h + 20);
  size_t room = (size_t)(s->end - a->cur) * 4;
  return get32(h) == MAGIC && crc32_bytes(h, 28) == get32(h + 28) && get32(h + 8) == a->in_seq &&
         h[4] == a->type && h[5] == a->flags && (uint32_t)(h[6] | h[7] << 8) == a->arg && get32(h + 12) == a->tag &&
         get32(h + 16) == a->aux && len > 0 && len % 4 == 0 && len <= a->max_frame && len <= room &&
         (!s->reduce || len <= a->slot_bytes);
}

/* Whether the 32 bytes at h are the header of an Abort frame (magic, type and header checksum). */
static int is_abort(const uint8_t *h) {
  return get32(h) == MAGIC && h[4] == TYPE_ABORT && crc32_bytes(h, 28) == get32(h + 28);
}

/* Whether the next bytes waiting on socket fd are an Abort's header (looked at, not read: JavaScript reads them). */
static int abort_waiting(int fd) {
  uint8_t h[HEADER];
  ssize_t r;
  do r = recv(fd, h, HEADER, MSG_PEEK | MSG_DONTWAIT);
  while (r < 0 && errno == EINTR);
  return r == HEADER && is_abort(h);
}

/*
 * The watched sockets (this rank's other connections, whose frames JavaScript reads). A socket with
 * anything to read but an Abort (or hung up) leaves the set — JavaScript must look at it, at the
 * next frame boundary — so that level-triggered polls do not spin on it; the others stay watched.
 */
typedef struct {
  int fds[MAX_WATCH];
  int n;
  int ready; /* one left the set: hand over at the next frame boundary */
} watch_set;

static void watch_fill(const watch_set *w, struct pollfd *pf) {
  for (int i = 0; i < w->n; i++) pf[i] = (struct pollfd){w->fds[i], POLLIN, 0};
}

/* After a poll of w's sockets into pf: 1 when one holds a peer's Abort; else moves the ready ones out of the set. */
static int watch_check(watch_set *w, const struct pollfd *pf) {
  int kept = 0, n = w->n;
  for (int i = 0; i < n; i++) {
    if (pf[i].revents & POLLIN && abort_waiting(pf[i].fd)) return 1;
    if (pf[i].revents) w->ready = 1;
    else w->fds[kept++] = pf[i].fd;
  }
  w->n = kept;
  return 0;
}

/* Polls w's sockets without waiting: 1 when one holds a peer's Abort (see watch_check). */
static int watch_now(watch_set *w) {
  if (w->n == 0) return 0;
  struct pollfd pf[MAX_WATCH];
  watch_fill(w, pf);
  int r;
  do r = poll(pf, w->n, 0);
  while (r < 0 && errno == EINTR);
  return r > 0 && watch_check(w, pf);
}

static void aborted(ring_args *a, int where) {
  a->status = RING_ABORTED;
  a->err_kind = where;
}

/* RING_ABORTED: the queued sends never started are dropped, the rest of one half written is given back (ring.h). */
static void give_back_unsent(ring_args *a, const send_queue *q) {
  size_t unstarted = q->tail - q->head;
  a->partial_off = a->partial_payload = a->partial_len = 0;
  if (unstarted > 0 && q->offset > 0) {
    const pending *f = &q->items[q->head];
    memcpy(a->out_head, f->head, HEADER);
    a->partial_off = q->offset;
    a->partial_payload = (uint64_t)(f->payload - (const uint8_t *)a->buf) / 4;
    a->partial_len = f->len;
    unstarted--;
  }
  a->out_seq -= (uint32_t)unstarted;
}

/* Moves past steps with nothing (more) to receive: with fewer floats than ranks, some segments are empty. */
static void skip_done_steps(ring_args *a) {
  while (a->step < a->nsteps && a->cur >= a->steps[a->step].end)
    if (++a->step < a->nsteps) a->cur = a->steps[a->step].start;
}

void ring_run(ring_args *a) {
  send_queue q = {0};
  a->status = RING_DONE;
  a->wait_ms = 0;
  const double t0 = now_ms();
  int got_first = 0;
  for (uint64_t s = a->send_start; s < a->send_end; s += a->chunk_floats) {
    uint64_t e = s + a->chunk_floats < a->send_end ? s + a->chunk_floats : a->send_end;
    const uint8_t *p = (const uint8_t *)(a->buf + s);
    if (enqueue(&q, a, p, (e - s) * 4, hash_payload(p, (e - s) * 4))) {
      fail(a, RING_ERR_IO_OUT, ENOMEM, "out of memory");
      goto out;
    }
  }

  skip_done_steps(a);
  uint32_t lanes[HASH_LANES], out_lanes[HASH_LANES];
  uint8_t *target = NULL; /* while a payload is being read: where it goes */
  size_t len = 0, fill = 0, hashed = 0;
  double last_in = now_ms(), last_out = last_in;
  watch_set w = {.n = 0, .ready = 0};
  for (int i = 0; i < a->nwatch && w.n < MAX_WATCH; i++) w.fds[w.n++] = a->watch_fds[i];
  struct pollfd pf[2 + MAX_WATCH];
  if (watch_now(&w)) {
    aborted(a, RING_ABORT_WATCHED);
    goto out;
  }
  for (;;) {
    int want_in = a->step < a->nsteps;
    int want_out = q.head < q.tail;
    if (!want_in && !want_out) break;
    const double t = now_ms();
    /* idle at a frame boundary with nothing to send: give the rest to JavaScript */
    if (want_in && !want_out && !target && t - last_in >= a->slice_ms) {
      a->status = RING_HANDOVER;
      goto out;
    }
    /* another connection has something (a peer's Abort): JavaScript reads it, from the next frame boundary */
    if (want_in && !target && w.ready) {
      a->status = RING_HANDOVER;
      goto flush;
    }
    if (want_out && t - last_out >= a->timeout_ms) {
      fail(a, RING_ERR_TIMEOUT_OUT, 0, "no progress sending for %d ms", a->timeout_ms);
      goto out;
    }
    if (want_in && target && t - last_in >= a->timeout_ms) {
      fail(a, RING_ERR_TIMEOUT_IN, 0, "no data for %d ms in the middle of a frame", a->timeout_ms);
      goto out;
    }
    /* a header read before we started needs no poll for input */
    int head_ready = want_in && !target && a->head_fill == HEADER;
    pf[0] = (struct pollfd){a->in_fd, want_in && !head_ready ? POLLIN : 0, 0};
    pf[1] = (struct pollfd){a->out_fd, want_out ? POLLOUT : 0, 0};
    const int npf = 2 + w.n;
    watch_fill(&w, pf + 2);
    double until = want_in && !want_out && !target ? last_in + a->slice_ms : (want_out ? last_out : last_in) + a->timeout_ms;
    if (want_in && want_out && !target && last_in + a->slice_ms < until) until = last_in + a->slice_ms;
    int wait = (int)(until - t) + 1;
    if (poll(pf, npf, head_ready ? 0 : wait < 1 ? 1 : wait) < 0) {
      if (errno == EINTR) continue;
      fail(a, RING_ERR_IO_IN, errno, "poll: %s", strerror(errno));
      goto out;
    }
    if (npf > 2 && watch_check(&w, pf + 2)) {
      aborted(a, RING_ABORT_WATCHED);
      goto out;
    }
    if (want_out && (pf[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
      int r = drain(&q, a->out_fd);
      if (r < 0) {
        fail(a, RING_ERR_IO_OUT, errno, "%s", strerror(errno));
        goto out;
      }
      if (r > 0) last_out = now_ms();
    }
    if (!want_in || !(head_ready || (pf[0].revents & (POLLIN | POLLERR | POLLHUP)))) continue;
    /* read until the socket is empty, a frame boundary needs JavaScript, or the call's frames are in */
    while (a->step < a->nsteps) {
      const ring_step *s = &a->steps[a->step];
      if (!target) {
        if (watch_now(&w)) {
          aborted(a, RING_ABORT_WATCHED);
          goto out;
        }
        if (w.ready) break;
        if (a->head_fill < HEADER) {
          ssize_t r = read(a->in_fd, a->head + a->head_fill, HEADER - a->head_fill);
          if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
          if (r <= 0) { /* the end of the stream or an error at a boundary: JavaScript reports it */
            a->status = RING_HANDOVER;
            goto flush;
          }
          last_in = now_ms();
          a->head_fill += (int)r;
          if (a->head_fill < HEADER) continue;
        }
        if (!expected(a, s)) {
          /* a peer's Abort: no flush (the job is failing; the right neighbour may not read any more) */
          if (a->watch_fds && is_abort(a->head)) {
            aborted(a, RING_ABORT_IN);
            goto out;
          }
          a->status = RING_HANDOVER;
          goto flush;
        }
        if (!got_first) {
          got_first = 1;
          a->wait_ms = last_in - t0;
        }
        len = get32(a->head + 20);
        target = s->reduce ? a->slot : (uint8_t *)(a->buf + a->cur);
        fill = hashed = 0;
        hash_init(lanes);
        continue;
      }
      ssize_t r = read(a->in_fd, target + fill, len - fill);
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
      if (r == 0) {
        fail(a, RING_ERR_EOF, 0, "the connection closed in the middle of a frame");
        goto out;
      }
      if (r < 0) {
        fail(a, RING_ERR_IO_IN, errno, "%s", strerror(errno));
        goto out;
      }
      last_in = now_ms();
      fill += (size_t)r;
      size_t upto = fill - fill % HASH_STRIPE;
      if (upto > hashed) { /* while the new bytes are in cache */
        hash_stripes(lanes, target + hashed, upto - hashed);
        hashed = upto;
      }
      if (fill < len) continue;
      uint32_t check = hash_finish(lanes, target, len), want = get32(a->head + 24);
      if (check != want) {
        fail(a, RING_ERR_FRAME, 0, "payload checksum mismatch in frame #%u (%zu bytes: got %x, the header says %x)", a->in_seq, len, check, want);
        goto out;
      }
      a->in_seq++;
      a->bytes_in += len;
      float *dst = a->buf + a->cur;
      if (s->reduce) {
        if (s->forward) hash_init(out_lanes);
        add_hash(dst, (const float *)a->slot, len / 4, s->div, s->forward ? out_lanes : NULL);
        if (s->forward) check = hash_finish(out_lanes, (const uint8_t *)dst, len);
      }
      if (s->forward && enqueue(&q, a, (const uint8_t *)dst, len, check)) {
        fail(a, RING_ERR_IO_OUT, ENOMEM, "out of memory");
        goto out;
      }
      target = NULL;
      a->head_fill = 0;
      a->cur += len / 4;
      skip_done_steps(a);
      /* send what this frame produced before reading more */
      if (s->forward) break;
    }
  }
  goto out;

flush: /* hand over with nothing in flight: JavaScript's sends must follow ours */
  while (q.head < q.tail) {
    double left = last_out + a->timeout_ms - now_ms();
    if (left <= 0) {
      fail(a, RING_ERR_TIMEOUT_OUT, 0, "no progress sending for %d ms", a->timeout_ms);
      break;
    }
    /* the watched sockets too: a peer's Abort ends the wait for a right neighbour that may never read again */
    const int nf = 1 + w.n;
    pf[0] = (struct pollfd){a->out_fd, POLLOUT, 0};
    watch_fill(&w, pf + 1);
    int polled = poll(pf, nf, (int)left + 1);
    if (polled < 0) {
      if (errno == EINTR) continue;
      fail(a, RING_ERR_IO_OUT, errno, "poll: %s", strerror(errno));
      break;
    }
    if (polled > 0 && nf > 1 && watch_check(&w, pf + 1)) {
      aborted(a, RING_ABORT_WATCHED);
      break;
    }
    if (!(pf[0].revents & (POLLOUT | POLLERR | POLLHUP))) continue;
    int r = drain(&q, a->out_fd);
    if (r < 0) {
      fail(a, RING_ERR_IO_OUT, errno, "%s", strerror(errno));
      break;
    }
    if (r > 0) last_out = now_ms();
  }
out:
  if (a->status == RING_ABORTED) give_back_unsent(a, &q);
  free(q.items);
}
