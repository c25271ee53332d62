/**
 * A line-protocol client of a scapy peer (test/rules/nc_peer.py, rlx_peer.py) running in a
 * namespace: one JSON command line out, one JSON answer line back.
 */
import type { ChildProcess } from 'node:child_process';

export class Peer {
  private buf = '';
  private waiters: ((line: string) => void)[] = [];
  private lines: string[] = [];
  private err = '';
  constructor(readonly child: ChildProcess) {
    child.stdout!.on('data', (d: Buffer) => {
      this.buf += d.toString('utf8');
      let i: number;
      while ((i = this.buf.indexOf('\n')) >= 0) {
        const line = this.buf.slice(0, i);
        this.buf = this.buf.slice(i + 1);
        const w = this.waiters.shift();
        if (w) w(line);
        else this.lines.push(line);
      }
    });
    child.stderr!.on('data', (d: Buffer) => {
      this.err = (this.err + d.toString('utf8')).slice(-4000);
    });
    // A peer killed (cleanup after a timeout) fails the next call by its 30 s bound, not the process.
    child.stdin!.on('error', (e) => {
      this.err += String(e);
    });
  }

  async next(): Promise<Record<string, string[]>> {
    const queued = this.lines.shift();
    const line =
      queued ??
      (await new Promise<string>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`scapy peer did not answer in 30 s: ${this.err}`)), 30_000);
        this.waiters.push((l) => {
          clearTimeout(t);
          resolve(l);
        });
      }));
    return JSON.parse(line) as Record<string, string[]>;
  }

  async call(cmd: object): Promise<Record<string, string[]>> {
    const answer = this.next();
    this.child.stdin!.write(`${JSON.stringify(cmd)}\n`);
    return answer;
  }
}
