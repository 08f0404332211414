"""Message framing between this process and the LIBERO server in its own virtual environment.

The two sides run different Python environments (LIBERO pins numpy/mujoco/robosuite versions),
so nothing version-dependent crosses the pipe: no pickle. A message is

    4-byte big-endian header length | UTF-8 JSON header | raw array bytes

The header is a JSON object; `"arrays": [[key, dtype, shape], ...]` describes the raw bytes that
follow, in order, each C-contiguous. Arrays come back as numpy arrays under their keys; every
other field is plain JSON. This file imports only the standard library and numpy, so the
server (which runs it from its own path) needs nothing of vam_stack.
"""
from __future__ import annotations

import json
import struct
from typing import Any, BinaryIO

import numpy as np

MAX_HEADER = 1 << 20  # bytes: a header larger than this is a corrupt stream, not a message
DTYPES = ("uint8", "float32", "float64", "int64", "bool")


class ProtocolError(RuntimeError):
    """The stream broke (closed early, corrupt header, unknown dtype); the message says where."""


def write_message(stream: BinaryIO, msg: dict[str, Any]) -> None:
    """Send one message; numpy arrays anywhere at the top level travel as raw bytes."""
    header, blobs = {}, []
    arrays = []
    for k, v in msg.items():
        if isinstance(v, np.ndarray):
            a = np.ascontiguousarray(v)
            if a.dtype.name not in DTYPES:
                raise ProtocolError(f"array {k!r} has dtype {a.dtype.name!r}; allowed: {DTYPES}")
            arrays.append([k, a.dtype.name, list(a.shape)])
            blobs.append(a.tobytes())
        else:
            header[k] = v
    header["arrays"] = arrays
    raw = json.dumps(header).encode()
    stream.write(struct.pack(">I", len(raw)) + raw + b"".join(blobs))
    stream.flush()


def _read_exact(stream: BinaryIO, n: int, what: str) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = stream.read(n - len(buf))
        if not chunk:
            raise ProtocolError(f"stream closed while reading {what} ({len(buf)} of {n} bytes)")
        buf += chunk
    return bytes(buf)


def read_message(stream: BinaryIO) -> dict[str, Any]:
    """Receive one message (blocking); raises ProtocolError on a closed or corrupt stream."""
    (n,) = struct.unpack(">I", _read_exact(stream, 4, "the header length"))
    if n > MAX_HEADER:
        raise ProtocolError(f"header length {n} exceeds {MAX_HEADER}: the stream is corrupt "
                            "(did something print to the protocol's stdout?)")
    try:
        header = json.loads(_read_exact(stream, n, "the header").decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ProtocolError(f"corrupt header: {e}") from e
    for key, dtype, shape in header.pop("arrays", []):
        if dtype not in DTYPES:
            raise ProtocolError(f"array {key!r}: unknown dtype {dtype!r}")
        size = int(np.prod(shape)) * np.dtype(dtype).itemsize
        header[key] = np.frombuffer(_read_exact(stream, size, f"array {key!r}"), dtype=dtype).reshape(shape)
    return header
