"""One end of the stateful nftables oracle topology (test/rules/nft-oracle-stateful.test.ts).

Runs inside a namespace; reads one JSON command per line on stdin, answers one JSON line:
  {"op":"send","mac":R,"pkts":[hex IP packet...]}  -> {"sent":[...]}   (sent with scapy, as given)
  {"op":"collect"}                                -> {"got":[hex of each IPv4/IPv6 packet from the router]}
  {"op":"quit"}
The packets are built by the test (so the kernel and Weft get the very same bytes); scapy frames
and sends them, and a capture keeps the frames whose source MAC is the router's.
"""
import json
import sys
import threading
import time

from scapy.all import AsyncSniffer, Ether, Raw, sendp, get_if_hwaddr  # noqa: E402

iface = sys.argv[1]
router_mac = sys.argv[2].lower()
lock = threading.Lock()
got = []


def keep(p):
    raw = bytes(p)
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
        if frames:
            sendp(frames, iface=iface, verbose=False)
        print(json.dumps({'sent': [str(len(frames))]}), flush=True)
    elif cmd['op'] == 'collect':
        with lock:
            out = list(got)
            got.clear()
        print(json.dumps({'got': out}), flush=True)
    else:
        break

sniffer.stop()
