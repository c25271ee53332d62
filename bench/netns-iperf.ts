/**
 * What the namespace benches share: synchronous commands (in a namespace or here), one iperf3
 * run between two namespaces (TCP one stream, or UDP with 64-byte payloads at full rate), a
 * process's CPU ticks and the median. iperf3's server is started, used once and killed by its
 * process group.
 */
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** Runs `cmd`, returns its stdout; throws with its stderr on failure unless `allowFail`. */
export function sh(cmd: readonly string[], allowFail = false, timeoutMs = 30_000): string {
  const r = spawnSync(cmd[0]!, cmd.slice(1), { encoding: 'utf8', timeout: timeoutMs });
  if ((r.status !== 0 || r.error) && !allowFail)
    throw new Error(`${cmd.join(' ')}: ${r.stderr ?? ''}${r.error ? String(r.error) : ''}`);
  return r.stdout ?? '';
}

export function inNs(ns: string, cmd: readonly string[], allowFail = false, timeoutMs = 30_000): string {
  return sh(['ip', 'netns', 'exec', ns, ...cmd], allowFail, timeoutMs);
}

export interface IperfRun {
  /** Namespace and address the server binds. */
  serverNs: string;
  bind: string;
  clientNs: string;
  /** Address the client connects to (default `bind`; differs when the path translates it). */
  connect?: string;
  udp: boolean;
  seconds: number;
}

/** TCP: received bit/s; UDP: received packets/s and loss %; both: iperf3's own CPU % (-1 unknown). */
export interface IperfResult {
  bps: number;
  pps: number;
  loss: number;
  client: number;
  server: number;
}

export async function iperf(run: IperfRun): Promise<IperfResult> {
  const port = String(5201 + Math.floor(Math.random() * 500));
  const srv = spawn('ip', ['netns', 'exec', run.serverNs, 'iperf3', '-s', '-1', '-B', run.bind, '-p', port], {
    stdio: 'ignore',
    detached: true,
  });
  try {
    for (let i = 0; i < 50 && inNs(run.serverNs, ['ss', '-Hln', `sport = :${port}`], true).trim() === ''; i++)
      await new Promise((r) => setTimeout(r, 100));
    const to = run.connect ?? run.bind;
    const args = ['iperf3', '-c', to, '-p', port, '-t', String(run.seconds), '-J', '--connect-timeout', '3000'];
    if (run.udp) args.push('-u', '-l', '64', '-b', '0');
    const j = JSON.parse(inNs(run.clientNs, args, true, (run.seconds + 20) * 1000)) as {
      error?: string;
      end?: {
        sum_received?: { bits_per_second?: number };
        sum?: { packets?: number; lost_packets?: number; seconds?: number; lost_percent?: number };
        cpu_utilization_percent?: { host_total?: number; remote_total?: number };
      };
    };
    if (j.error) throw new Error(`iperf3: ${j.error}`);
    const cpu = j.end?.cpu_utilization_percent;
    const cs = { client: cpu?.host_total ?? -1, server: cpu?.remote_total ?? -1 };
    if (!run.udp) return { bps: j.end?.sum_received?.bits_per_second ?? 0, pps: 0, loss: 0, ...cs };
    const s = j.end?.sum ?? {};
    const got = (s.packets ?? 0) - (s.lost_packets ?? 0);
    return { bps: 0, pps: got / (s.seconds ?? run.seconds), loss: s.lost_percent ?? 0, ...cs };
  } finally {
    if (srv.pid !== undefined)
      try {
        process.kill(-srv.pid, 'SIGKILL');
      } catch {
        /* gone */
      }
  }
}

/** PIDs of the node processes in a namespace (a data plane's namespace holds only it). */
export function nodePids(ns: string): number[] {
  return sh(['ip', 'netns', 'pids', ns], true)
    .split(/\s+/)
    .filter(Boolean)
    .map(Number)
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'node';
      } catch {
        return false;
      }
    });
}

/** utime + stime of a process in clock ticks (1/100 s; 0 when gone). */
export function ticksOf(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const st = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
    return Number(f[11]) + Number(f[12]); // fields 14 and 15 of proc(5)
  } catch {
    return 0;
  }
}

export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}
