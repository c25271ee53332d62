/**
 * A real WireGuard handshake and first data packet with published keys.
 *
 * Keys: Wireshark's test suite (test/suite_decryption.py, class TestDecryptWireguard) publishes
 * the static and ephemeral private keys of its capture test/captures/wireguard-ping-tcp.pcap
 * (Linux WireGuard, 10.9.0.1:43462 → 10.9.0.2:51820, no PSK). The test expects the initiation
 * timestamp's nanoseconds to be 356537872 (frame 1).
 *
 * Bytes: the capture's first three frames as published in PcapPlusPlus' test data
 * (Tests/Packet++Test/PacketExamples/WireGuardHandshakeInitiation.dat, ...Response.dat,
 * ...TransportData.dat: Ethernet + IPv4 10.9.0.1/10.9.0.2 + UDP 43462/51820). Only the UDP
 * payloads are kept below. That these are the same frames is checked, not assumed: the ephemeral
 * public keys in the messages equal X25519(Epriv_i0) and X25519(Epriv_r0) from Wireshark's list.
 */

export const WS_KEYS = {
  Spriv_i: 'AKeZaHwBxjiKLFnkY2unvEdOTtg4AL+M9dQXfopFVFk=',
  Spub_i: 'Igge9KzRytKNwrgkzDE/8hrLu6Ly0OqVdvOPWhA5KR4=',
  Spriv_r: 'cFIxTUyBs1Qil414hBwEgvasEax8CKJ5IS5ZougplWs=',
  Spub_r: 'YDCttCs9e1J52/g9vEnwJJa+2x6RqaayAYMpSVQfGEY=',
  Epriv_i0: 'sLGLJSOQfyz7JNJ5ZDzFf3Uz1rkiCMMjbWerNYcPFFU=',
  Epriv_r0: 'QC4/FZKhFf0b/eXEcCecmZNt6V6PXmRa4EWG1PIYTU4=',
} as const;

/** Frame 1: handshake initiation, 148 bytes. */
export const WS_INITIATION_HEX =
  '01000000d837d0305fcec7c8e5c8e2e3f7989eef60c228d82329d602b6b1e2bb9d068f89cf9d4d4532780f6d27264f7b98701fdc27' +
  'a4ec00aeb6becdbef2332f1b4084cadb93823935c012ae255e7b25eff13940c321fa6bd66a2a87b061db1430173e937f569349de28' +
  '56dc5f2616763eeeafc0533b01dd965e7ec76976e28f683d671200000000000000000000000000000000';

/** Frame 2: handshake response, 92 bytes. */
export const WS_RESPONSE_HEX =
  '0200000006f47dabd837d030b18d5550bd4042a37a46823ac08db1ec66839bc0ca2d64bc15cd80232b66232faec24af8918de1060f' +
  'f5c98e865d5f35f272214c5260110dc4c61e32cdd8542100000000000000000000000000000000';

/** Frame 3: first transport message (initiator → responder, counter 0, an ICMP echo request). */
export const WS_TRANSPORT_HEX =
  '0400000006f47dab0000000000000000a4ebc12ee3f990da18033a0789c04e2700f6f5c271d42ac4b4d6262e666549b445a7436e82' +
  '9bffb6ac65f05648bc0c391fe7c5884874376127164940188f03dba67af8388eaab76c593628bf9dc7be03346d912e916dad862545' +
  '454701364f2d2486d7ced4c8642ce547ddb26ef6a46b';

/** Wireshark's expected `wg.timestamp.nanoseconds` for frame 1. */
export const WS_INITIATION_TIMESTAMP_NANOS = 356537872;

export function fromBase64(b64: string): Uint8Array {
  return Uint8Array.from(Buffer.from(b64, 'base64'));
}
