"""A CAN channel between two processes: one Unix seqpacket socket per channel (`can_interface:
unix_socket`, the channel name is the socket's path).

The emulated Damiao arm runs in a process of its own (`yam_driver.emulators.process`), as real
motors are hardware of their own: a reply it sends waits in this process's socket buffer whatever
this process's scheduling, and the bus's late read (`DamiaoBus._collect`) takes it, as it takes
a frame from a CAN adapter's queue. Emulators that shared the driver's interpreter (python-can's
"virtual" interface, in-process only) answered only when the driver process's GIL let them: on a
loaded 2-core machine all 14 joints latched "no reply" at once (docs/deployment.md).

`SocketCanBus` is the driver's end (connects); `ListeningCanBus` the emulator's (listens; one
peer at a time, a new connection replaces the old, frames sent with no peer are lost, as on a
bus with no listener). A frame on the socket: send time (s, time.time()), arbitration id, length,
8 data bytes. A closed peer reads as `can.CanOperationError` (an adapter that went away).
"""
from __future__ import annotations

import os
import select
import socket
import struct
import threading
import time

import can

INTERFACE = "unix_socket"      # DriverConfig.can_interface for a channel served by ListeningCanBus
_FRAME = struct.Struct("<dIB8s")


def _pack(msg: can.Message) -> bytes:
    data = bytes(msg.data)
    return _FRAME.pack(time.time(), msg.arbitration_id, len(data), data.ljust(8, b"\0"))


def _unpack(raw: bytes) -> can.Message:
    if len(raw) != _FRAME.size:
        raise can.CanOperationError(f"a frame on the socket has {len(raw)} bytes, expected {_FRAME.size}")
    stamp, arb, dlc, data = _FRAME.unpack(raw)
    return can.Message(timestamp=stamp, arbitration_id=arb, data=data[:min(dlc, 8)], is_extended_id=False,
                       is_rx=True)


def _readable(socks: list[socket.socket], timeout: float | None) -> list[socket.socket]:
    return select.select(socks, [], [], None if timeout is None else max(0.0, timeout))[0]


class SocketCanBus(can.BusABC):
    """The driver's end of a channel: connects to the socket at `channel` (a path)."""

    def __init__(self, channel: str, **kwargs):
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._sock.connect(channel)
        except OSError as e:
            self._sock.close()
            raise can.CanInitializationError(f"no emulated CAN channel at {channel!r}: {e}") from e
        self.channel_info = f"unix socket {channel}"
        super().__init__(channel=channel, **{k: v for k, v in kwargs.items() if k == "can_filters"})

    def send(self, msg: can.Message, timeout: float | None = None) -> None:
        try:
            self._sock.send(_pack(msg))
        except OSError as e:
            raise can.CanOperationError(f"{self.channel_info}: send failed: {e}") from e

    def _recv_internal(self, timeout: float | None):
        try:
            if not _readable([self._sock], timeout):
                return None, False
            raw = self._sock.recv(64)
        except OSError as e:
            raise can.CanOperationError(f"{self.channel_info}: receive failed: {e}") from e
        if not raw:
            raise can.CanOperationError(f"{self.channel_info}: the emulator closed the channel")
        return _unpack(raw), False

    def shutdown(self) -> None:
        super().shutdown()
        self._sock.close()


class ListeningCanBus(can.BusABC):
    """The emulator's end: listens at `channel` (a path, created here, removed at shutdown). Several
    threads may wait in `recv` at once (each frame goes to one of them)."""

    def __init__(self, channel: str, **kwargs):
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._listener.bind(channel)
        self._listener.listen(2)
        self._listener.setblocking(False)
        self._lock = threading.Lock()               # the peer socket is replaced by one thread at a time
        self._path = channel
        self._peer: socket.socket | None = None
        self.channel_info = f"unix socket {channel} (listening)"
        super().__init__(channel=channel)

    def _drop_peer(self, peer: socket.socket | None = None) -> None:
        """Close `peer` (default: the current one) if it is still the current one."""
        with self._lock:
            if self._peer is not None and (peer is None or peer is self._peer):
                self._peer.close()
                self._peer = None

    def send(self, msg: can.Message, timeout: float | None = None) -> None:
        peer = self._peer
        if peer is None:
            return                                   # nobody on the bus: the frame is lost
        try:
            peer.send(_pack(msg))
        except BlockingIOError:                      # the driver's queue is full: the frame is lost
            pass
        except OSError:                              # the driver went away
            self._drop_peer(peer)

    def _recv_internal(self, timeout: float | None):
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if end is None else end - time.monotonic()
            peer = self._peer
            socks = [self._listener] + ([peer] if peer is not None else [])
            try:
                ready = _readable(socks, left)
            except (OSError, ValueError):            # the peer was closed by another thread meanwhile
                ready = []
                if left is None or left > 0:
                    continue
            if not ready:
                return None, False
            if self._listener in ready:
                try:
                    new = self._listener.accept()[0]  # the driver (re)connected: it replaces the old peer
                except (BlockingIOError, OSError):
                    new = None                       # another thread took it
                if new is not None:
                    new.setblocking(False)
                    with self._lock:
                        old, self._peer = self._peer, new
                    if old is not None:
                        old.close()
            elif peer is not None and peer in ready:
                try:
                    raw = peer.recv(64)
                except BlockingIOError:              # another thread took the frame
                    continue
                except OSError:
                    raw = b""
                if raw:
                    return _unpack(raw), False
                self._drop_peer(peer)                # the driver closed its end

    def shutdown(self) -> None:
        super().shutdown()
        self._drop_peer()
        self._listener.close()
        try:
            os.unlink(self._path)
        except OSError:
            pass
