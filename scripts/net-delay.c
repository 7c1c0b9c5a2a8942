/*
 * A one-way delay for emulated links, in user space (the kernel here has no sch_netem): the C
 * twin of scripts/net-delay.py, which scripts/netns.ts compiles with the system's cc when it can
 * (a packet costs it a few microseconds, the Python relay ~100 µs on a busy machine: at 9,000-byte
 * packets the Python one carried ~500 Mbit/s in all, so a ring's two directions at 250 Mbit/s
 * each already queued behind it).
 *
 *   net-delay TUN_NAME DELAY_SECONDS MAX_SECONDS
 *
 * Every IP packet routed into the TUN device is read, held for DELAY_SECONDS and written back
 * (policy routing then sends it on to its destination's veth), in arrival order. Prints `ready`
 * once the device is open; stops when its standard input closes or after MAX_SECONDS. Real-time
 * scheduling (SCHED_FIFO 10) where allowed, a timer slack of 1 ns; it blocks in ppoll() between
 * packets, never spins.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define SLOTS 65536            /* packets held at once at most (a power of two) */
#define MAX_PACKET 65536

typedef struct { double at; int len; unsigned char *data; } Held;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  if (argc != 4) { fprintf(stderr, "usage: net-delay TUN_NAME DELAY_SECONDS MAX_SECONDS\n"); return 2; }
  const double delay = atof(argv[2]), deadline = now() + atof(argv[3]);
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  struct sched_param sp = { .sched_priority = 10 };
  if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0) setpriority(PRIO_PROCESS, 0, -20);
  int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK);
  if (fd < 0) { perror("net-delay: /dev/net/tun"); return 1; }
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
  strncpy(ifr.ifr_name, argv[1], IFNAMSIZ - 1);
  if (ioctl(fd, TUNSETIFF, &ifr) != 0) { perror("net-delay: TUNSETIFF"); return 1; }
  Held *ring = calloc(SLOTS, sizeof(Held));
  if (!ring) return 1;
  unsigned head = 0, tail = 0;   /* held packets are ring[head .. tail) */
  printf("ready\n");
  fflush(stdout);
  for (;;) {
    double t = now();
    if (t > deadline) return 0;
    while (head != tail && ring[head & (SLOTS - 1)].at <= t) {
      Held *h = &ring[head & (SLOTS - 1)];
      if (write(fd, h->data, (size_t)h->len) < 0 && errno != EAGAIN && errno != EINVAL) { perror("net-delay: write"); return 1; }
      free(h->data);
      head++;
    }
    double wait = head != tail ? ring[head & (SLOTS - 1)].at - t : 0.5;
    if (wait < 0) wait = 0;
    struct timespec ts = { (time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9) };
    struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = 0, .events = POLLIN } };
    if (ppoll(p, 2, &ts, NULL) < 0 && errno != EINTR) { perror("net-delay: ppoll"); return 1; }
    if (p[1].revents & (POLLIN | POLLHUP)) {
      char b[256];
      if (read(0, b, sizeof b) <= 0) return 0;
    }
    if (p[0].revents & POLLIN) {
      double at = now() + delay;
      for (;;) {
        unsigned char buf[MAX_PACKET];
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0) break;
        if (tail - head >= SLOTS) continue;   /* full: dropped, as a full queue drops */
        Held *h = &ring[tail & (SLOTS - 1)];
        h->data = malloc((size_t)n);
        if (!h->data) continue;
        memcpy(h->data, buf, (size_t)n);
        h->len = (int)n;
        h->at = at;
        tail++;
      }
    }
  }
}
