#!/usr/bin/env python3
"""finalize_race.py PID...: does the hung MPI job whose ranks are PID... show
MPICH 4.0's finalize race over UCX 1.13's TCP transport (docs/mpi.md)?
Exit 0 if it does, 1 (saying what it saw) if not.

The race, natively as detached: MPI_Finalize disconnects every endpoint
(ucp_disconnect_nb), and UCX's TCP flush of an endpoint that sent anything
since its last flush sends the peer a PUT request of length 0 and waits for
the peer's acknowledgment; a rank whose own disconnect completed first waits
in a PMI barrier without progressing UCX, so the peer's request stays unread
on its socket and the peer waits for good.  Its signature, all from the
kernel: one rank has a thread blocked reading a unix socket (the PMI
barrier; a detached rank's proxy reads it), and exactly one of its TCP
sockets holds unread exactly that request: UCX's TCP header (am_id 33, the
PUT request, payload 20 bytes) and a PUT header of length 0, 25 bytes; no
other rank has anything unread.  The bytes are read with MSG_PEEK on a copy
of the socket taken with pidfd_getfd (root), so they stay where they are.
"""
import ctypes
import os
import socket
import sys

SYS_PIDFD_GETFD = 438
PUT_REQ_AM_ID = 33     # UCT_AM_ID_MAX + 1 (uct/tcp/tcp.h, UCX 1.13)
AM_HDR = 5             # uct_tcp_am_hdr_t: am_id u8, length u32, packed
PUT_REQ_HDR = 20       # uct_tcp_ep_put_req_hdr_t: addr u64, length u64, sn u32


def tcp_rx_queues():
    """inode -> bytes received and unread, for every TCP socket here."""
    q = {}
    for f in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(f).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            w = line.split()
            q[w[9]] = int(w[4].split(":")[1], 16)
    return q


def blocked_in_unix_read(pid):
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            if open(f"/proc/{pid}/task/{tid}/wchan").read() == "unix_stream_read_generic":
                return True
        except OSError:
            pass
    return False


def sockets(pid):
    """(fd, inode) of the process's sockets"""
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            out.append((int(fd), link[8:-1]))
    return out


def peek(pid, fd):
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = os.pidfd_open(pid)
    try:
        mine = libc.syscall(SYS_PIDFD_GETFD, pidfd, fd, 0)
        if mine < 0:
            raise OSError(ctypes.get_errno(), "pidfd_getfd")
        s = socket.socket(fileno=mine)
        try:
            # MSG_DONTWAIT, not O_NONBLOCK: the file's flags are the rank's
            return s.recv(4096, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        finally:
            s.detach()
            os.close(mine)
    finally:
        os.close(pidfd)


def main(pids):
    rx = tcp_rx_queues()
    blocked = [p for p in pids if blocked_in_unix_read(p)]
    unread = {p: [(fd, rx[ino]) for fd, ino in sockets(p) if rx.get(ino, 0) > 0] for p in pids}
    print(f"ranks {pids}: blocked reading a unix socket: {blocked}; "
          f"unread TCP bytes (fd, bytes): {unread}")
    if len(pids) != 2 or len(blocked) != 1:
        return 1
    b = blocked[0]
    other = [p for p in pids if p != b][0]
    if unread[other] or len(unread[b]) != 1 or unread[b][0][1] != AM_HDR + PUT_REQ_HDR:
        return 1
    data = peek(b, unread[b][0][0])
    print(f"rank {b} fd {unread[b][0][0]}: {data.hex(' ')}")
    am_id, length = data[0], int.from_bytes(data[1:5], "little")
    put_len = int.from_bytes(data[AM_HDR + 8:AM_HDR + 16], "little")
    if len(data) != AM_HDR + PUT_REQ_HDR or am_id != PUT_REQ_AM_ID or length != PUT_REQ_HDR or put_len:
        return 1
    print(f"rank {b} waits in the PMI barrier over rank {other}'s unread flush request "
          "(UCX TCP PUT request of length 0): MPICH's finalize race")
    return 0


if __name__ == "__main__":
    sys.exit(main([int(a) for a in sys.argv[1:]]))
