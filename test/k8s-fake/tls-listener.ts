/**
 * The fake API server's HTTPS listener and its outage modes: a self-signed certificate made
 * with `openssl req` at start-up, a port that can stop listening and reopen (clients get
 * ECONNREFUSED, as from a restarting kube-apiserver), and a black hole in which requests are
 * read and never answered (a partition, a hung server).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export type Handler = (req: IncomingMessage, res: ServerResponse) => void;

export class TlsListener {
  private blackHole = false;
  private readonly unanswered = new Set<ServerResponse>();
  private server!: Server;
  private port = 0;
  private down = false;
  private certDir!: string;
  url = '';
  caPem = '';

  /** Make the certificate and listen on an ephemeral port of 127.0.0.1. */
  async listen(handler: Handler): Promise<void> {
    this.certDir = mkdtempSync(join(tmpdir(), 'weft-k8s-fake-'));
    const key = join(this.certDir, 'key.pem');
    const cert = join(this.certDir, 'cert.pem');
    const r = spawnSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-keyout',
        key,
        '-out',
        cert,
        '-days',
        '1',
        '-subj',
        '/CN=weft-fake-apiserver',
        '-addext',
        'subjectAltName=IP:127.0.0.1,DNS:localhost',
      ],
      { encoding: 'utf8', timeout: 20_000 },
    );
    if (r.status !== 0) throw new Error(`openssl req failed: ${r.stderr}`);
    this.caPem = readFileSync(cert, 'utf8');
    this.server = createServer({ key: readFileSync(key), cert: this.caPem }, (req, res) => {
      // A black hole: the request is read and never answered (setBlackHole).
      if (this.blackHole) {
        this.unanswered.add(res);
        return;
      }
      handler(req, res);
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    this.url = `https://127.0.0.1:${this.port}`;
  }

  get isDown(): boolean {
    return this.down;
  }

  /** Cut every open connection and stop listening; `beforeClose` runs first (ends the watches). */
  async beginOutage(beforeClose: () => void): Promise<void> {
    if (this.down) return;
    this.down = true;
    beforeClose();
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections();
    await closed;
  }

  /** Listen again on the same port. */
  async endOutage(): Promise<void> {
    if (!this.down) return;
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.port, '127.0.0.1', () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    this.down = false;
  }

  /** Leave requests unanswered while on; turning it off resets the unanswered connections. */
  setBlackHole(on: boolean): void {
    this.blackHole = on;
    if (on) return;
    for (const res of this.unanswered) res.socket?.destroy();
    this.unanswered.clear();
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    if (!this.down) await new Promise<void>((resolve) => this.server.close(() => resolve()));
    rmSync(this.certDir, { recursive: true, force: true });
  }
}
