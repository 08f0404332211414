"""Images to and from sensor_msgs/Image and sensor_msgs/CompressedImage (JPEG as
image_transport's compressed transport writes it); part of vam_stack.msgs, which re-exports it
(both build on vam_stack.msg_base)."""
from __future__ import annotations

import re
from typing import Any, Sequence

import numpy as np

from .msg_base import IMAGE_ENCODINGS, MessageError, header, msg_class


# --- images -------------------------------------------------------------------------------

def _image_array(image: np.ndarray, encoding: str) -> np.ndarray:
    """The checked uint8 array of an image in `encoding` (HxWx3, or HxW for mono8)."""
    if encoding not in IMAGE_ENCODINGS:
        raise MessageError(f"image encoding must be one of {sorted(IMAGE_ENCODINGS)}, "
                           f"got {encoding!r}")
    if not isinstance(image, np.ndarray):
        raise MessageError(f"image must be a numpy array, got {type(image).__name__}")
    if image.dtype != np.uint8:
        raise MessageError(f"image must be uint8, got dtype {image.dtype}")
    channels = IMAGE_ENCODINGS[encoding]
    if channels == 1 and image.ndim == 3 and image.shape[2] == 1:
        image = image[:, :, 0]
    want = "HxW" if channels == 1 else "HxWx3"
    if image.ndim != (2 if channels == 1 else 3) or (channels == 3 and image.shape[2] != 3):
        raise MessageError(f"{encoding} image must be {want}, got shape {image.shape}")
    if image.shape[0] == 0 or image.shape[1] == 0:
        raise MessageError(f"image must not be empty, got shape {image.shape}")
    return image


def image_msg(image: np.ndarray, stamp_s: float, frame_id: str = "",
              encoding: str = "rgb8") -> Any:
    """sensor_msgs/Image from a uint8 array: HxWx3 for rgb8/bgr8, HxW (or HxWx1) for mono8.

    The array is taken as already in `encoding`'s channel order; nothing is reordered.
    """
    image = _image_array(image, encoding)
    channels = IMAGE_ENCODINGS[encoding]
    h, w = image.shape[:2]
    data = np.ascontiguousarray(image).reshape(-1)
    return msg_class("sensor_msgs/msg/Image")(
        header=header(stamp_s, frame_id), height=h, width=w, encoding=encoding,
        is_bigendian=0, step=w * channels, data=data)


def image_to_numpy(msg: Any, rgb: bool = True, copy: bool = True) -> np.ndarray:
    """uint8 array of an Image: HxWx3 (bgr8 turned into RGB when `rgb`), HxW for mono8.

    Row padding (step > width * channels) is removed. Returns a copy, or with `copy=False` a
    view of the message's own buffer (an rclpy message's `data` is read without a copy: whoever
    keeps the frame copies it once, where it stores it).
    """
    enc = msg.encoding
    if enc not in IMAGE_ENCODINGS:
        raise MessageError(f"unsupported image encoding {enc!r}; expected one of "
                           f"{sorted(IMAGE_ENCODINGS)}")
    c = IMAGE_ENCODINGS[enc]
    h, w, step = int(msg.height), int(msg.width), int(msg.step)
    if step < w * c:
        raise MessageError(f"image step {step} is smaller than width*channels = {w * c}")
    data = np.asarray(msg.data, dtype=np.uint8)
    if data.size != h * step:
        raise MessageError(f"image data has {data.size} bytes, expected height*step = "
                           f"{h}*{step} = {h * step}")
    rows = data.reshape(h, step)[:, : w * c]
    out = rows.reshape(h, w) if c == 1 else rows.reshape(h, w, c)
    if enc == "bgr8" and rgb:
        out = out[:, :, ::-1]
    return np.array(out, copy=True) if copy else out


# --- compressed images --------------------------------------------------------------------
# sensor_msgs/CompressedImage as image_transport's "compressed" plugin (compressed_image_transport)
# writes and reads it: on <image topic>/compressed, the header copied from the raw Image, `format`
# "<raw encoding>; jpeg compressed <encoding inside the JPEG>". OpenCV stores colour as BGR, so an
# rgb8 (or bgr8) image travels as "rgb8; jpeg compressed bgr8" (a mono8 one as "...mono8") and the
# subscriber turns it back into the raw encoding's channel order.

JPEG_QUALITY_DEFAULT = 95  # compressed_image_transport's `jpeg_quality` default (ROS 2 Humble to Rolling)
JPEG_STORED = {"rgb8": "bgr8", "bgr8": "bgr8", "mono8": "mono8"}  # raw encoding -> encoding inside the JPEG
_CODEC_MAGIC = {"jpeg": b"\xff\xd8\xff", "png": b"\x89PNG\r\n\x1a\n"}  # codecs read -> first bytes of their data
_FORMAT_RE = re.compile(r"^([a-z0-9_]+);\s*(jpeg|png) compressed ([a-z0-9_]+)$")


def compressed_format(encoding: str = "rgb8") -> str:
    """`format` of the JPEG CompressedImage of a raw `encoding` image: "rgb8; jpeg compressed bgr8"."""
    if encoding not in JPEG_STORED:
        raise MessageError(f"image encoding must be one of {sorted(JPEG_STORED)}, got {encoding!r}")
    return f"{encoding}; jpeg compressed {JPEG_STORED[encoding]}"


def jpeg_quality(quality: Any) -> int:
    """A JPEG quality: an integer in [1, 100] (image_transport's `jpeg_quality` range)."""
    if isinstance(quality, bool) or not isinstance(quality, (int, np.integer)) or not 1 <= quality <= 100:
        raise MessageError(f"JPEG quality must be an integer in [1, 100], got {quality!r}")
    return int(quality)


def compressed_image_msg(image: np.ndarray, stamp_s: Any, frame_id: str = "", encoding: str = "rgb8",
                         quality: int = JPEG_QUALITY_DEFAULT) -> Any:
    """sensor_msgs/CompressedImage (JPEG) of a uint8 array given in `encoding`'s channel order
    (checked as `image_msg` checks it): what image_transport's compressed publisher makes of
    `image_msg(image, stamp_s, frame_id, encoding)`."""
    return _jpeg(_image_array(image, encoding), header(stamp_s, frame_id), encoding, quality)


def compress_image(msg: Any, quality: int = JPEG_QUALITY_DEFAULT) -> Any:
    """The JPEG CompressedImage of a sensor_msgs/Image, header (stamp, frame_id) copied, as
    image_transport's compressed publisher derives it from the raw message."""
    return _jpeg(image_to_numpy(msg, rgb=False), header(msg.header.stamp, msg.header.frame_id),
                 msg.encoding, quality)


def _jpeg(image: np.ndarray, hdr: Any, encoding: str, quality: int) -> Any:
    import cv2

    fmt, q = compressed_format(encoding), jpeg_quality(quality)
    if encoding == "rgb8":
        image = image[:, :, ::-1]  # OpenCV encodes BGR
    ok, buf = cv2.imencode(".jpg", np.ascontiguousarray(image), [cv2.IMWRITE_JPEG_QUALITY, q])
    if not ok:
        raise MessageError(f"OpenCV could not JPEG-encode a {encoding} image of shape {image.shape}")
    return msg_class("sensor_msgs/msg/CompressedImage")(header=hdr, format=fmt,
                                                        data=np.asarray(buf, np.uint8).reshape(-1))


def compressed_image_to_numpy(msg: Any, rgb: bool = True, shape: Sequence[int] | None = None) -> np.ndarray:
    """uint8 array of a CompressedImage in image_transport's compressed format: HxWx3 (RGB when
    `rgb`, else in the raw encoding's channel order), HxW for mono8; `shape`, when given, is the
    shape it must have. JPEG and PNG data are read, and the bare "jpeg" / "png" formats of older
    publishers (colour stored as BGR). Raises MessageError naming the bad format string, the
    undecodable data or the unexpected shape; returns a new array."""
    import cv2

    fmt = msg.format
    if not isinstance(fmt, str):
        raise MessageError(f"CompressedImage format must be a string, got {fmt!r}")
    legacy = fmt.strip() in _CODEC_MAGIC
    m = None if legacy else _FORMAT_RE.match(fmt.strip())
    if not legacy and (m is None or m.group(1) not in IMAGE_ENCODINGS or m.group(3) not in IMAGE_ENCODINGS
                       or IMAGE_ENCODINGS[m.group(1)] != IMAGE_ENCODINGS[m.group(3)]):
        raise MessageError(f"unsupported CompressedImage format {fmt!r}; expected '<encoding>; jpeg compressed "
                           f"<stored>' with encodings in {sorted(IMAGE_ENCODINGS)} of the same channel count "
                           f"(e.g. {compressed_format()!r}), or a bare 'jpeg' / 'png'")
    codec = fmt.strip() if legacy else m.group(2)
    data = np.asarray(msg.data, dtype=np.uint8).reshape(-1)
    magic = _CODEC_MAGIC[codec]
    if data.size == 0:
        raise MessageError(f"CompressedImage (format {fmt!r}) has no data")
    if bytes(data[:len(magic)]) != magic:
        raise MessageError(f"CompressedImage data ({data.size} bytes, starting {bytes(data[:4]).hex()}) is not "
                           f"{codec} data, as its format {fmt!r} says")
    try:
        out = cv2.imdecode(data, cv2.IMREAD_UNCHANGED)
    except cv2.error as e:
        raise MessageError(f"cannot decode {data.size} bytes of {codec} data (format {fmt!r}): "
                           f"{str(e).strip().splitlines()[-1]}") from None
    if out is None or out.size == 0:
        raise MessageError(f"cannot decode {data.size} bytes of {codec} data (format {fmt!r}): corrupt or truncated")
    channels = out.shape[2] if out.ndim == 3 else 1
    stored = ("bgr8" if channels == 3 else "mono8") if legacy else m.group(3)
    source = stored if legacy else m.group(1)
    if out.dtype != np.uint8 or channels != IMAGE_ENCODINGS.get(stored):
        raise MessageError(f"decoded {codec} image is {out.dtype} of shape {out.shape}; format {fmt!r} "
                           f"says {stored} ({IMAGE_ENCODINGS.get(stored, '?')} uint8 channel(s))")
    if channels == 3 and stored[:3] != ("rgb" if rgb or source == "rgb8" else "bgr"):
        out = out[:, :, ::-1]
    if shape is not None and tuple(out.shape) != tuple(shape):
        raise MessageError(f"decoded image has shape {out.shape}, expected {tuple(shape)} (format {fmt!r})")
    return np.ascontiguousarray(out)


def jpeg_roundtrip(image: np.ndarray, quality: int = JPEG_QUALITY_DEFAULT) -> np.ndarray:
    """An RGB frame as a subscriber of its compressed topic gets it: JPEG-encoded and decoded
    exactly as `compressed_image_msg` and `compressed_image_to_numpy` do; same shape."""
    return compressed_image_to_numpy(compressed_image_msg(image, 0.0, quality=quality), shape=np.shape(image))
