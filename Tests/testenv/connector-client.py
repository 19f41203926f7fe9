#!/usr/bin/python3
"""One request to permissionsd-connector, as a test's client (ConnectorTests): its
protocol written out again here, independently of the Swift code it tests
(Sources/UserSockets/ConnectorProtocol.swift). Prints one line: "result R" for a
reply, then "fd peer-uid=U type=T" for the descriptor it carried, if any; or
"closed" when the connector closed the connection without a reply.

    connector-client.py SOCKET --uid U [--name N] [--magic M] [--truncate N]
                        [--pad N] [--no-nul] [--with-fd] [--empty] [--silent]
"""
import argparse
import socket
import struct
import sys

MAGIC = 0x50434E01

parser = argparse.ArgumentParser()
parser.add_argument("socket")
parser.add_argument("--uid", type=int, default=1)
parser.add_argument("--name", default="pipewire-0")
parser.add_argument("--magic", type=lambda text: int(text, 0), default=MAGIC)
parser.add_argument("--truncate", type=int, help="send only the first N bytes")
parser.add_argument("--pad", type=int, default=0, help="send N more bytes")
parser.add_argument("--no-nul", action="store_true", help="a name field of 64 bytes without a NUL")
parser.add_argument("--with-fd", action="store_true", help="attach a descriptor (standard input)")
parser.add_argument("--empty", action="store_true", help="send an empty message")
parser.add_argument("--silent", action="store_true", help="send nothing, wait for the connector")
args = parser.parse_args()

name = b"x" * 64 if args.no_nul else args.name.encode()
request = struct.pack("=II64s", args.magic, args.uid, name) + b"\0" * args.pad
if args.truncate is not None:
    request = request[: args.truncate]

s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.settimeout(10)
s.connect(args.socket)
if args.empty:
    s.send(b"")
elif args.with_fd:
    socket.send_fds(s, [request], [0])
elif not args.silent:
    s.send(request)

message, ancillary, flags, _ = s.recvmsg(64, socket.CMSG_SPACE(4 * struct.calcsize("i")))
if not message and not ancillary:
    print("closed")
    sys.exit(0)
if len(message) != 8:
    print(f"reply of {len(message)} bytes")
    sys.exit(1)
magic, result = struct.unpack("=Ii", message)
if magic != MAGIC:
    print(f"reply magic {magic:#x}")
    sys.exit(1)
print(f"result {result}")
for level, kind, data in ancillary:
    if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
        for (fd,) in struct.iter_unpack("i", data):
            passed = socket.socket(fileno=fd)
            _, uid, _ = struct.unpack("3i", passed.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
            kind_name = {socket.SOCK_STREAM: "stream"}.get(passed.type, str(passed.type))
            print(f"fd peer-uid={uid} type={kind_name}")
