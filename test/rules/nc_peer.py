"""One end of the stateful nftables oracle topology (test/rules/nft-oracle-stateful.test.ts).

Runs inside a namespace; reads one JSON command per line on stdin, answers one JSON line:
  {"op":"send","mac":R,"pkts":[hex IP packet...]}  -> {"sent":[...]}   (sent with scapy, as given)
  {"op":"collect"}                                -> {"got":[hex of each IPv4/IPv6 packet from the router]}
  {"op":"sync"}                                   -> the same as collect, once the capture has read
                                                     every frame that reached the interface before
  {"op":"quit"}
The packets are built by the test (so the kernel and Weft get the very same bytes); scapy frames
them and one raw socket sends them, and a capture keeps the frames whose source MAC is the
router's. sync sends a marker frame from this end (a local experimental EtherType, addressed to
itself: no IP stack or nftables sees it) and waits until the capture has seen it leave: the
capture reads a socket's frames in order, so everything that arrived before is then in `got`.
"""
import json
import socket
import sys
import threading
import time

from scapy.all import AsyncSniffer, Ether, Raw, get_if_hwaddr  # noqa: E402

iface = sys.argv[1]
router_mac = sys.argv[2].lower()
lock = threading.Lock()
got = []
MARKER_TYPE = b'\x88\xb5'
marker_seen = threading.Condition(lock)
markers = [0]


def keep(p):
    raw = bytes(p)
    if raw[12:14] == MARKER_TYPE and raw[14:20] == b'weftsy':
        with lock:
            markers[0] = max(markers[0], int.from_bytes(raw[20:24], 'big'))
            marker_seen.notify_all()
        return
    if len(raw) < 34 or p[Ether].src.lower() != router_mac:
        return
    if raw[12:14] == b'\x08\x00':
        total = int.from_bytes(raw[16:18], 'big')
    elif raw[12:14] == b'\x86\xdd':
        total = 40 + int.from_bytes(raw[18:20], 'big')
    else:
        return
    with lock:
        got.append(raw[14:14 + total].hex())


sniffer = AsyncSniffer(iface=iface, prn=keep, store=False)
sniffer.start()
mine = get_if_hwaddr(iface)
# Protocol 0: this socket only sends (it receives nothing, so nothing piles up in it).
tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
tx.bind((iface, 0))
mine_bytes = bytes.fromhex(mine.replace(':', ''))
sync_no = 0
for _ in range(100):
    if getattr(sniffer, 'running', False):
        break
    time.sleep(0.05)
time.sleep(0.3)
print(json.dumps({'ready': [str(getattr(sniffer, 'running', False))]}), flush=True)

for line in sys.stdin:
    cmd = json.loads(line)
    if cmd['op'] == 'send':
        frames = []
        for h in cmd['pkts']:
            b = bytes.fromhex(h)
            et = 0x86dd if (b[0] >> 4) == 6 else 0x0800
            frames.append(Ether(src=mine, dst=cmd['mac'], type=et) / Raw(b))
        for f in frames:
            tx.send(bytes(f))
        print(json.dumps({'sent': [str(len(frames))]}), flush=True)
    elif cmd['op'] in ('collect', 'sync'):
        if cmd['op'] == 'sync':
            sync_no += 1
            tx.send(mine_bytes + mine_bytes + MARKER_TYPE + b'weftsy' + sync_no.to_bytes(4, 'big') + bytes(36))
            with lock:
                if not marker_seen.wait_for(lambda: markers[0] >= sync_no, timeout=10):
                    print(json.dumps({'error': ['sync marker not captured in 10 s']}), flush=True)
                    continue
        with lock:
            out = list(got)
            got.clear()
        print(json.dumps({'got': out}), flush=True)
    else:
        break

sniffer.stop()
