/**
 * The Geneve port's contract with its owner (geneve-port.ts): where decapsulated packets go, the
 * options, the counters, the typed error, and the GRO batch sizes the owner sizes its lanes by.
 */
import type { DatagramSocket } from '../io/datagram.js';
import type { UdpMechanism, UdpOptions } from '../io/udp.js';
import type { GeneveEngineOptions } from '../geneve/engine.js';
import type { GeneveTunnelTable } from '../geneve/table.js';
import type { GeneveTunnel } from '../geneve/tunnel.js';

/** Where decapsulated inner packets go. */
export interface GeneveSink {
  /**
   * Inner IP packets i < count at buf[offs[i], offs[i]+lens[i]), each received through
   * tunnels[i]. The arrays are the port's own and are reused for the next batch: read them
   * during the call only. Each packet has ≥ rxHeadroom + 8 bytes before it and ≥ rxTailroom after.
   * buf[areaOff, +areaLen) is free scratch space in the same buffer (rxCoalesceReservation;
   * length 0 without it). `count` is at most `deliverCapacity`.
   */
  deliverBatch(
    buf: Uint8Array,
    offs: Uint32Array,
    lens: Uint32Array,
    tunnels: readonly GeneveTunnel[],
    count: number,
    areaOff: number,
    areaLen: number,
  ): void;
}

export interface GenevePortOptions {
  readonly table: GeneveTunnelTable;
  readonly sink: GeneveSink;
  /** UDP port to bind (and the engine's decapsulateIp port). Default 6091 (Liqo). */
  readonly port?: number;
  /** Bind address (one family only); default: any address, IPv4 and (if available) IPv6. */
  readonly address?: string;
  /** Engine options (understood options, hash seed, ARP retry). */
  readonly engine?: GeneveEngineOptions;
  /** Datagrams per receive batch. Default 64. */
  readonly batchSize?: number;
  /** Bytes reserved before every received datagram (≥ 64). Default 128. */
  readonly rxHeadroom?: number;
  /** Bytes reserved after every received datagram (≥ 48). Default 64. */
  readonly rxTailroom?: number;
  /** Largest datagram received. Default 9216 (jumbo underlays stay whole). */
  readonly maxDatagram?: number;
  /** Socket buffers to request (bytes). Default 8 MiB (io/udp.ts). */
  readonly socketBuffer?: number;
  readonly udpMechanism?: UdpMechanism;
  /** Opens the sockets (default: real UDP sockets; pipelines/devices.ts). */
  readonly openUdp?: (opts: UdpOptions) => Promise<DatagramSocket>;
  /** Try UDP GSO on send and UDP GRO on receive (see the file comment). Default false. */
  readonly offload?: boolean;
  /**
   * Bytes one super-packet takes in the sink's coalescing area (Coalescer.reservation): receive
   * batches get an area after their slots for a batch's worth of super-packets. 0 (default): none.
   */
  readonly rxCoalesceReservation?: number;
  /** Open flows the sink coalesces at once (sizes the area). Default 16. */
  readonly rxCoalesceFlows?: number;
  /**
   * Open the sockets inside this network namespace (name under /run/netns or a path). Needs the
   * native addon, whose socket() runs synchronously while the thread is inside the namespace.
   */
  readonly netns?: string;
  /** Milliseconds for the engine's ARP timers and hold queue. Default Date.now. */
  readonly clock?: () => number;
  /** Unexpected I/O errors (never per packet). */
  readonly onError?: (what: string, err: unknown) => void;
}

/** Counters of this stage (the engine has its own drops by reason). */
export interface GenevePortStats {
  rxDatagrams: number;
  rxDelivered: number;
  txPackets: number;
  /** No tunnel for the inner destination (sendBatch). */
  txNoTunnel: number;
  /** The caller's buffer had too little headroom for the tunnel's header. */
  txNoHeadroom: number;
  /** sendmmsg did not take the datagram (socket buffer full, unreachable). */
  txSendFailures: number;
  /** No socket of the tunnel's underlay family. */
  txNoSocket: number;
  /** L2: ARP requests/replies sent. */
  controlSent: number;
  /** A GRO slot with more datagrams than UDP_GRO_CNT_MAX (64): dropped whole. */
  rxGroOverrun: number;
  /** GRO runs the kernel scattered at their own size: already spread apart, no copy. */
  rxRunsInPlace: number;
  /** Scattered slots holding something else, whose pieces were moved back together first. */
  rxJoined: number;
}

/** Problems opening the Geneve socket, with what to fix. */
export class GenevePortError extends Error {
  override readonly name = 'GenevePortError';
}

/** GRO receive batches: fewer slots (each holds up to 64 KiB). */
export const GRO_BATCH = 32;
/** Datagrams the kernel puts in one GRO slot at most (UDP_GRO_CNT_MAX). */
export const GRO_MAX_SEGMENTS = 64;
/** The most inner packets one deliverBatch passes with offload on (a full GRO batch). */
export const GENEVE_OFFLOAD_DELIVER_MAX = GRO_BATCH * GRO_MAX_SEGMENTS;
