/**
 * Watch streams of the fake API server: the retained event history (resumption from a
 * resourceVersion, 410 Expired once it is older than the history), live delivery as JSON lines
 * with label-selector transitions translated as the real server does, and the hooks that
 * compact the history, mute or end the open streams.
 */
import type { ServerResponse } from 'node:http';
import { clone, status, type Obj } from './resources.js';
import type { Selector } from './selectors.js';

export interface StoredEvent {
  rv: number;
  typeKey: string;
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  obj: Obj;
  old?: Obj;
}

interface Watcher {
  typeKey: string;
  namespace?: string;
  selector: Selector;
  res: ServerResponse;
  muted?: boolean;
}

export interface WatchOptions {
  /** Events kept for watch resumption (default 1000). */
  historyLimit?: number;
  /** How a too-old resourceVersion is refused: ERROR event (real API server) or HTTP 410. */
  expired?: 'event' | 'http';
}

export class WatchStreams {
  private history: StoredEvent[] = [];
  /** A watch resuming from a resourceVersion below this gets 410 (events after it are gone). */
  private minResumeRv = 0;
  private readonly watchers = new Set<Watcher>();
  /** Watches refused with 410 (too old resourceVersion) so far. */
  expiredCount = 0;

  constructor(private readonly opts: WatchOptions) {}

  get count(): number {
    return this.watchers.size;
  }

  /** Record a write and deliver it to the open streams. */
  emit(typeKey: string, type: StoredEvent['type'], obj: Obj, old?: Obj): void {
    const ev: StoredEvent = {
      rv: Number(obj.metadata.resourceVersion),
      typeKey,
      type,
      obj: clone(obj),
      ...(old ? { old: clone(old) } : {}),
    };
    this.history.push(ev);
    const limit = this.opts.historyLimit ?? 1000;
    if (this.history.length > limit) {
      const dropped = this.history.splice(0, this.history.length - limit);
      this.minResumeRv = dropped[dropped.length - 1]!.rv;
    }
    for (const w of this.watchers) this.send(w, ev);
  }

  /**
   * Answer a watch request: replay the history after `?resourceVersion` (or synthetic ADDED
   * events for `current` without one), then stream live events until `?timeoutSeconds`.
   */
  open(
    typeKey: string,
    ns: string | undefined,
    selector: Selector,
    q: URLSearchParams,
    res: ServerResponse,
    current: Iterable<Obj>,
  ): void {
    const rvText = q.get('resourceVersion');
    const from = rvText === null || rvText === '' ? 0 : Number(rvText);
    if (from !== 0 && from < this.minResumeRv) {
      const msg = `too old resource version: ${from} (${this.minResumeRv})`;
      this.expiredCount++;
      if (this.opts.expired === 'http') {
        res.writeHead(410, { 'content-type': 'application/json' });
        res.end(JSON.stringify(status(410, 'Gone', msg)));
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(`${JSON.stringify({ type: 'ERROR', object: status(410, 'Expired', msg) })}\n`);
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    // Send the headers now: the client's watch call resolves on them, before any event exists.
    res.flushHeaders();
    const w: Watcher = { typeKey, ...(ns !== undefined ? { namespace: ns } : {}), selector, res };
    if (from === 0) {
      for (const o of current) {
        if ((ns === undefined || o.metadata.namespace === ns) && selector(o.metadata.labels))
          res.write(`${JSON.stringify({ type: 'ADDED', object: o })}\n`);
      }
    } else {
      for (const ev of this.history) if (ev.rv > from) this.send(w, ev);
    }
    this.watchers.add(w);
    const timeout = Number(q.get('timeoutSeconds') ?? '0');
    const timer = timeout > 0 ? setTimeout(() => res.end(), timeout * 1000) : undefined;
    res.on('close', () => {
      if (timer) clearTimeout(timer);
      this.watchers.delete(w);
    });
  }

  /** Forget the history at revision `rv`: resuming from anything older gets 410. */
  compact(rv: number): void {
    this.history = [];
    this.minResumeRv = rv;
  }

  /** Stop delivering to the streams open now, without closing them. */
  mute(): void {
    for (const w of this.watchers) w.muted = true;
  }

  /** End every open stream. */
  drop(): void {
    for (const w of this.watchers) w.res.end();
    this.watchers.clear();
  }

  /** Write one event to a watcher, translating label-selector transitions like the API server. */
  private send(w: Watcher, ev: StoredEvent): void {
    if (ev.typeKey !== w.typeKey || w.muted === true) return;
    if (w.namespace !== undefined && ev.obj.metadata.namespace !== w.namespace) return;
    const now = w.selector(ev.obj.metadata.labels);
    let type: StoredEvent['type'] | undefined = ev.type;
    if (ev.type === 'MODIFIED' && ev.old !== undefined) {
      const before = w.selector(ev.old.metadata.labels);
      type = before && now ? 'MODIFIED' : !before && now ? 'ADDED' : before && !now ? 'DELETED' : undefined;
    } else if (!now) type = undefined;
    if (type === undefined) return;
    w.res.write(`${JSON.stringify({ type, object: ev.obj })}\n`);
  }
}
