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
    """The emulator's end: listens at `channel` (a path, created here, removed at shutdown)."""

    def __init__(self, channel: str, **kwargs):
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._listener.bind(channel)
        self._listener.listen(2)
        self._path = channel
        self._peer: socket.socket | None = None
        self.channel_info = f"unix socket {channel} (listening)"
        super().__init__(channel=channel)

    def _drop_peer(self) -> None:
        if self._peer is not None:
            self._peer.close()
            self._peer = None

    def send(self, msg: can.Message, timeout: float | None = None) -> None:
        if self._peer is None:
            return                                   # nobody on the bus: the frame is lost
        try:
            self._peer.send(_pack(msg))
        except OSError:                              # the driver went away
            self._drop_peer()

    def _recv_internal(self, timeout: float | None):
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if end is None else end - time.monotonic()
            socks = [self._listener] + ([self._peer] if self._peer is not None else [])
            ready = _readable(socks, left)
            if not ready:
                return None, False
            if self._listener in ready:
                self._drop_peer()                    # a new connection (the driver reconnected) replaces the old
                self._peer = self._listener.accept()[0]
            elif self._peer is not None and self._peer in ready:
                try:
                    raw = self._peer.recv(64)
                except OSError:
                    raw = b""
                if raw:
                    return _unpack(raw), False
                self._drop_peer()                    # the driver closed its end

    def shutdown(self) -> None:
        super().shutdown()
        self._drop_peer()
        self._listener.close()
        try:
            os.unlink(self._path)
        except OSError:
            pass
