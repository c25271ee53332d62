"""One end of the nftables oracle topology (test/rules/nft-oracle.test.ts).

Runs inside a namespace; reads one JSON command per line on stdin, answers one JSON line:
  {"op":"send","mac":R,"pkts":[spec...]}  -> {"sent":[hex of each IP packet]}  (sent as built)
  {"op":"collect"}                        -> {"got":[hex of each IP packet the router sent us]}
  {"op":"sync"}                           -> the same as collect, once the capture has read every
                                             frame that reached the interface before
  {"op":"quit"}
Packets are crafted with scapy; a capture keeps frames whose source MAC is the router's. sync
sends a marker frame from this end (a local experimental EtherType, addressed to itself: no IP
stack or nftables sees it) and waits until the capture has seen it leave: the capture reads a
socket's frames in order, so everything that arrived before is then in `got`.
"""
import json
import socket
import sys
import threading
import time

from scapy.all import AsyncSniffer, Ether, IP, TCP, UDP, ICMP, Raw, sendp, get_if_hwaddr  # noqa: E402

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
    if len(raw) < 34 or raw[12:14] != b'\x08\x00':
        return
    if p[Ether].src.lower() != router_mac:
        return
    total = int.from_bytes(raw[16:18], 'big')
    with lock:
        got.append(raw[14:14 + total].hex())


sniffer = AsyncSniffer(iface=iface, prn=keep, store=False)
sniffer.start()
mine = get_if_hwaddr(iface)
# Protocol 0: this socket only sends markers (it receives nothing).
tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
tx.bind((iface, 0))
mine_bytes = bytes.fromhex(mine.replace(':', ''))
sync_no = 0
# Capture must be running before the first packet is sent: announce readiness once it is.
for _ in range(100):
    if getattr(sniffer, 'running', False):
        break
    time.sleep(0.05)
time.sleep(0.3)
print(json.dumps({'ready': [str(getattr(sniffer, 'running', False))]}), flush=True)


def build(s):
    ip = IP(src=s['src'], dst=s['dst'], id=s['id'], ttl=64)
    k = s['kind']
    if k == 'syn':
        l4 = TCP(sport=s['sport'], dport=s['dport'], flags='S', seq=1000, options=[('MSS', s.get('mss', 1460))])
    elif k == 'synopt':
        # MSS at an odd offset: a NOP first, then MSS, then padding.
        l4 = TCP(sport=s['sport'], dport=s['dport'], flags='S', seq=1000, options=[('NOP', None), ('MSS', s.get('mss', 1460)), ('NOP', None), ('NOP', None), ('NOP', None)])
    elif k == 'ack':
        l4 = TCP(sport=s['sport'], dport=s['dport'], flags='A', seq=1, ack=1) / Raw(b'weft')
    elif k == 'udp':
        l4 = UDP(sport=s['sport'], dport=s['dport']) / Raw(b'weft-udp')
    else:
        l4 = ICMP(type=8, id=s['sport'], seq=1) / Raw(b'weft-icmp')
    return Ether(src=mine, dst=s['mac']) / ip / l4


for line in sys.stdin:
    cmd = json.loads(line)
    if cmd['op'] == 'send':
        frames = []
        for s in cmd['pkts']:
            s['mac'] = cmd['mac']
            frames.append(Ether(bytes(build(s))))
        if frames:
            sendp(frames, iface=iface, verbose=False)
        out = [bytes(f)[14:].hex() for f in frames]
        print(json.dumps({'sent': out}), flush=True)
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
