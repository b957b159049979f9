"""A hostile peer that speaks just enough of distributed's TCP framing to be attached as a scheduler (for tests).

``python hostile_scheduler.py MODE PORT_FILE [MARKER]`` listens on 127.0.0.1, writes its port to
PORT_FILE, and answers every call according to MODE:

- ``nthreads``: an identity whose worker has ``nthreads: "abc"``;
- ``gpu-inf``: an identity whose worker has ``resources: {"GPU": inf}``;
- ``huge-frame``: a length header of 1.5 GB, then 256 MiB of data actually sent;
- ``pickle``: an identity whose id is a pickled object that creates the folder MARKER when unpickled;
- ``silent``: accepts connections and never answers;
- ``empty-maps``: an answer of 32 MiB that is 511 arrays of 65,535 empty maps (33.5 million);
- ``big-identity``: a valid identity of 26 MiB (256 workers, each with 1,300 strings nobody reads), appending
  one line to the file MARKER per identity call;
- ``escape-error``: answers every call with an error whose text holds terminal escape sequences, line breaks
  and a bidi override (:data:`HOSTILE_TEXT`).
"""

from __future__ import annotations

import asyncio
import os
import pickle
import struct
import sys

import msgpack

MODE, PORT_FILE = sys.argv[1], sys.argv[2]
MARKER = sys.argv[3] if len(sys.argv) > 3 else "/nonexistent"
#: Sets the terminal's title, turns text red, clears the screen, forges a line of output, reverses text.
HOSTILE_TEXT = "\x1b]0;pwned\x07\x1b[31mred\x1b[2J\r\nclustermgr: all fine\u202eevil\x1b[0m"


class Trap:
    def __reduce__(self):
        return (os.mkdir, (MARKER,))


def frame(*frames: bytes) -> bytes:
    prelude = struct.pack(f"<Q{len(frames)}Q", len(frames), *map(len, frames))
    return struct.pack("<Q", len(prelude) + sum(map(len, frames))) + prelude + b"".join(frames)


def identity() -> list[bytes]:
    worker = {"name": "w", "nthreads": 2, "memory_limit": 2**30, "resources": {}}
    ident = {"type": "Scheduler", "id": "Scheduler-hostile", "services": {}, "workers": {"tcp://127.0.0.1:9": worker}}
    if MODE == "nthreads":
        worker["nthreads"] = "abc"
    elif MODE == "gpu-inf":
        worker["resources"] = {"GPU": float("inf")}
    elif MODE == "pickle":
        ident["id"] = {"__Pickled__": 1}
        sub = msgpack.dumps({"pickled-obj": pickle.dumps(Trap()), "num-sub-frames": 0})
        return [msgpack.dumps(ident), sub]
    return [msgpack.dumps(ident)]


def big_identity() -> bytes:
    metrics = [f"{i:080d}" for i in range(1300)]  # 1,300 short strings: decoding them is what costs
    workers = {
        f"tcp://127.0.0.1:{10000 + i}": {
            "name": f"w{i}",
            "nthreads": 1,
            "memory_limit": 2**30,
            "metrics": metrics,
        }
        for i in range(256)
    }
    return msgpack.dumps({"type": "Scheduler", "id": "Scheduler-big", "services": {}, "workers": workers})


BIG_IDENTITY = big_identity() if MODE == "big-identity" else b""


async def read_message(reader: asyncio.StreamReader) -> dict:
    (length,) = struct.unpack("<Q", await reader.readexactly(8))
    data = await reader.readexactly(length)
    (count,) = struct.unpack_from("<Q", data)
    lengths = struct.unpack_from(f"<{count}Q", data, 8)
    start = 8 * (count + 1)
    return msgpack.loads(data[start : start + lengths[0]], strict_map_key=False)


async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        if MODE == "silent":
            await reader.read()
            return
        writer.write(frame(msgpack.dumps({"compression": None, "python": (3, 11, 0), "pickle-protocol": 5})))
        await read_message(reader)  # the peer's handshake
        while True:
            message = await read_message(reader)
            if message.get("op") == "echo":
                writer.write(frame(msgpack.dumps(message.get("data"))))
            elif MODE == "empty-maps":
                inner = b"\xdc" + struct.pack(">H", 65535) + b"\x80" * 65535  # no array longer than 65,535
                writer.write(frame(b"\xdc" + struct.pack(">H", 511) + inner * 511))
            elif MODE == "big-identity":
                with open(MARKER, "a") as calls:
                    calls.write(f"{message.get('op')}\n")
                writer.write(frame(BIG_IDENTITY))
            elif MODE == "escape-error":
                writer.write(frame(msgpack.dumps({"status": "error", "exception": HOSTILE_TEXT, "text": HOSTILE_TEXT})))
            elif MODE == "huge-frame":
                writer.write(struct.pack("<Q", 1_500_000_000))
                chunk = bytes(2**20)
                for _ in range(256):
                    writer.write(chunk)
                    await writer.drain()
            else:
                writer.write(frame(*identity()))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main() -> None:
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    with open(PORT_FILE + ".part", "w") as out:
        out.write(str(port))
    os.rename(PORT_FILE + ".part", PORT_FILE)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
