"""A one-way delay for emulated links, in user space (the kernel here has no sch_netem).

Run inside the router namespace of scripts/emulated-network.ts, on a TUN device it created:

    /usr/bin/python3 scripts/net-delay.py TUN_NAME DELAY_SECONDS MAX_SECONDS

Every IP packet routed into the TUN device is read, held for DELAY_SECONDS and written back;
policy routing (`ip rule add iif TUN lookup 100`) then forwards it to its destination's veth. So each
packet crossing the router is delayed once, in arrival order (a FIFO: a constant delay keeps the
order). Rates are set by tbf on the veths; this only adds latency.

It prints `ready` once the device is open, and stops when its standard input closes (the parent
script ended, however it ended) or after MAX_SECONDS. Precision: it asks for real-time scheduling
(SCHED_FIFO, priority 10; else the highest nice) so the machine's other work does not add to the
emulated latency, and a timer slack of 1 ns; it blocks in select() between packets, never spins.
What remains (wake-up latency, Python's per-packet work) the script's calibration measures.
"""
import collections
import ctypes
import fcntl
import os
import select
import struct
import sys
import time

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
PR_SET_TIMERSLACK = 29


def main() -> None:
    name, delay, max_seconds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    try:
        ctypes.CDLL(None).prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)
    except OSError:
        pass
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
    except (OSError, AttributeError):
        try:
            os.nice(-20)
        except OSError:
            pass
    fd = os.open('/dev/net/tun', os.O_RDWR)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack('16sH', name.encode(), IFF_TUN | IFF_NO_PI))
    os.set_blocking(fd, False)
    held: collections.deque = collections.deque()
    stdin = sys.stdin.fileno()
    deadline = time.monotonic() + max_seconds
    print('ready', flush=True)
    while True:
        now = time.monotonic()
        if now > deadline:
            return
        while held and held[0][0] <= now:
            os.write(fd, held.popleft()[1])
        timeout = max(0.0, held[0][0] - now) if held else 0.5
        ready, _, _ = select.select([fd, stdin], [], [], timeout)
        if stdin in ready and not os.read(stdin, 4096):
            return
        if fd in ready:
            at = time.monotonic() + delay
            try:
                while True:
                    held.append((at, os.read(fd, 65536)))
            except BlockingIOError:
                pass


if __name__ == '__main__':
    main()
