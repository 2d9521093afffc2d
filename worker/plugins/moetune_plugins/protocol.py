"""The plugin protocol's framing and messages (proto/plugin.proto, version 1).

Each message is one frame: a 4-byte little-endian length, then UTF-8 JSON in
protobuf's JSON mapping of PluginRequest / PluginReply (proto field names;
int64 / uint64 as decimal strings; bytes as base64).
"""
import base64
import json
import struct

PROTOCOL_VERSION = 1
MAX_FRAME_BYTES = 256 << 20


def read_frame(stream):
    """The next frame's payload, or None at end of input."""
    header = stream.read(4)
    if len(header) < 4:
        return None
    (length,) = struct.unpack("<I", header)
    if length > MAX_FRAME_BYTES:
        raise ValueError(f"frame of {length} bytes is over the limit")
    payload = stream.read(length)
    if len(payload) < length:
        return None
    return payload


def write_frame(stream, payload):
    stream.write(struct.pack("<I", len(payload)) + payload)
    stream.flush()


def encode(message):
    return json.dumps(message, separators=(",", ":")).encode("utf-8")


def decode(payload):
    return json.loads(payload.decode("utf-8"))


def reply(kind, body):
    return {"protocol_version": PROTOCOL_VERSION, kind: body}


def error(code, message):
    return reply("error", {"code": code, "message": message})


def float32_bytes(array):
    """A float32 array as the base64 text of its little-endian bytes."""
    return base64.b64encode(array.astype("<f4").tobytes()).decode("ascii")
