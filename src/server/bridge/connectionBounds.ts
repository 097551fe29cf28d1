import type * as net from 'node:net';
import type { Clock } from '../../core/clock';
import type { Disposable } from '../../core/events';

/** Bounds on the bridge's connections nobody has authenticated yet (README "Limits", "Security model"). */
export interface BridgeConnectionLimits {
  /** A connection on which no request has passed authentication within this is closed (covers the header timeout). */
  readonly unauthenticatedMs: number;
  /** Request headers not complete within this after the connection (or its last answer) are closed. */
  readonly headersMs: number;
  /** At most this many unauthenticated connections per remote address; one more evicts that address's oldest. */
  readonly maxUnauthenticatedPerAddress: number;
  /**
   * At most this many unauthenticated connections from all addresses together; one more evicts the oldest of all. A
   * local process may connect from any address of 127.0.0.0/8, so the per-address bound alone would let eight
   * addresses fill the server's 1,024 connections; this keeps half of them for authenticated ones.
   */
  readonly maxUnauthenticated: number;
  /** Drops are logged at most once per this, with counts. */
  readonly dropLogIntervalMs: number;
}

export const DEFAULT_BRIDGE_CONNECTION_LIMITS: BridgeConnectionLimits = {
  unauthenticatedMs: 10_000,
  headersMs: 10_000,
  maxUnauthenticatedPerAddress: 128,
  maxUnauthenticated: 512,
  dropLogIntervalMs: 10_000,
};

export type DropReason = 'unauthenticated_timeout' | 'headers_timeout' | 'evicted_for_bound';

interface Tracked {
  readonly socket: net.Socket;
  readonly address: string;
  timer?: Disposable;
  headerTimer?: Disposable;
}

/**
 * Tracks every accepted socket on the injected Clock. Unauthenticated sockets are closed after `unauthenticatedMs`
 * and are bounded per remote address and in all (the oldest is evicted); a socket on which a request authenticated is never
 * closed by these bounds (only by the header timeout of a later request that never completes its headers).
 */
export class ConnectionBounds {
  private readonly unauthenticated = new Map<string, Set<Tracked>>();
  /** Every unauthenticated socket, oldest first. */
  private readonly oldestFirst = new Set<Tracked>();
  private readonly tracked = new WeakMap<net.Socket, Tracked>();
  private readonly authenticated = new WeakSet<net.Socket>();
  private drops: Record<DropReason, number> = { unauthenticated_timeout: 0, headers_timeout: 0, evicted_for_bound: 0 };
  private logTimer: Disposable | undefined;
  private disposed = false;

  constructor(
    private readonly limits: BridgeConnectionLimits,
    private readonly clock: Clock,
    private readonly logDrops: (counts: Record<DropReason, number>) => void,
  ) {}

  /** A socket was accepted: it is unauthenticated until `markAuthenticated`. */
  accept(socket: net.Socket): void {
    if (this.disposed) return;
    const address = socket.remoteAddress ?? '?';
    const entry: Tracked = { socket, address };
    this.tracked.set(socket, entry);
    let set = this.unauthenticated.get(address);
    if (set === undefined) this.unauthenticated.set(address, (set = new Set()));
    set.add(entry);
    this.oldestFirst.add(entry);
    entry.timer = this.clock.setTimer(this.limits.unauthenticatedMs, () => this.drop(entry, 'unauthenticated_timeout'));
    this.armHeaders(entry);
    socket.once('close', () => this.forget(entry));
    if (set.size > this.limits.maxUnauthenticatedPerAddress) {
      const oldest = set.values().next().value as Tracked;
      this.drop(oldest, 'evicted_for_bound');
    } else if (this.oldestFirst.size > this.limits.maxUnauthenticated) {
      const oldest = this.oldestFirst.values().next().value as Tracked;
      this.drop(oldest, 'evicted_for_bound');
    }
  }

  /** A request's headers arrived on this socket. */
  headersComplete(socket: net.Socket): void {
    const entry = this.tracked.get(socket);
    entry?.headerTimer?.dispose();
    if (entry) entry.headerTimer = undefined;
  }

  /** An answer finished on this socket: the next request's headers must arrive within `headersMs` (keep-alive). */
  answered(socket: net.Socket): void {
    const entry = this.tracked.get(socket);
    if (entry !== undefined && !socket.destroyed) this.armHeaders(entry);
  }

  /** A request on this socket passed authentication: never closed for the unauthenticated timeout or bound again. */
  markAuthenticated(socket: net.Socket): void {
    this.authenticated.add(socket);
    const entry = this.tracked.get(socket);
    if (entry === undefined) return;
    entry.timer?.dispose();
    entry.timer = undefined;
    this.oldestFirst.delete(entry);
    const set = this.unauthenticated.get(entry.address);
    if (set?.delete(entry) && set.size === 0) this.unauthenticated.delete(entry.address);
  }

  /** Unauthenticated sockets open now (all addresses). */
  get unauthenticatedCount(): number {
    return this.oldestFirst.size;
  }

  dispose(): void {
    this.disposed = true;
    this.logTimer?.dispose();
    this.flushLog();
  }

  private armHeaders(entry: Tracked): void {
    entry.headerTimer?.dispose();
    entry.headerTimer = this.clock.setTimer(this.limits.headersMs, () => this.drop(entry, 'headers_timeout'));
  }

  private drop(entry: Tracked, reason: DropReason): void {
    this.forget(entry);
    if (entry.socket.destroyed) return;
    entry.socket.destroy();
    this.drops[reason] += 1;
    if (this.logTimer === undefined && !this.disposed) {
      // The first drop of a quiet period is logged at once; later ones wait for the interval, summed.
      this.flushLog();
      this.armLog();
    }
  }

  /**
   * The next line at the end of the interval; an interval that logged something starts another, so that a drop right
   * after a flush waits too (at most one line per interval); an interval without drops ends the period.
   */
  private armLog(): void {
    this.logTimer = this.clock.setTimer(this.limits.dropLogIntervalMs, () => {
      this.logTimer = undefined;
      if (this.flushLog() && !this.disposed) this.armLog();
    });
  }

  /** Logs the drops counted since the last line: whether there were any. */
  private flushLog(): boolean {
    const counts = this.drops;
    if (counts.unauthenticated_timeout + counts.headers_timeout + counts.evicted_for_bound === 0) return false;
    this.drops = { unauthenticated_timeout: 0, headers_timeout: 0, evicted_for_bound: 0 };
    this.logDrops(counts);
    return true;
  }

  private forget(entry: Tracked): void {
    entry.timer?.dispose();
    entry.headerTimer?.dispose();
    entry.timer = undefined;
    entry.headerTimer = undefined;
    this.oldestFirst.delete(entry);
    const set = this.unauthenticated.get(entry.address);
    if (set?.delete(entry) && set.size === 0) this.unauthenticated.delete(entry.address);
  }
}
