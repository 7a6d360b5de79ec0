// Failed console logins, counted per account name and per client address in a sliding window. Once either
// count reaches its limit, further attempts are refused without checking the password (so a blocked
// guesser learns nothing) until the oldest failure in the window ages out. Kept in memory: a restart
// forgets it, which costs a guesser a restart of the server it cannot cause.
export interface ThrottleLimits {
  /** Failures allowed per account name within the window. */
  perAccount: number;
  /** Failures allowed per client address within the window. */
  perAddress: number;
  windowSeconds: number;
}

export const DEFAULT_THROTTLE: ThrottleLimits = { perAccount: 5, perAddress: 20, windowSeconds: 15 * 60 };

export class LoginThrottle {
  private readonly failures = new Map<string, number[]>();

  constructor(
    private readonly limits: ThrottleLimits = DEFAULT_THROTTLE,
    private readonly now: () => number = Date.now,
  ) {}

  private recent(key: string): number[] {
    const cutoff = this.now() - this.limits.windowSeconds * 1000;
    const times = (this.failures.get(key) ?? []).filter((t) => t > cutoff);
    if (times.length === 0) this.failures.delete(key);
    else this.failures.set(key, times);
    return times;
  }

  private waitFor(key: string, limit: number): number {
    const times = this.recent(key);
    if (times.length < limit) return 0;
    const oldest = times[times.length - limit]!;
    return Math.max(1, Math.ceil((oldest + this.limits.windowSeconds * 1000 - this.now()) / 1000));
  }

  /** Seconds until an attempt for this account from this address is allowed; 0 when it is. */
  retryAfter(account: string, address: string): number {
    return Math.max(this.waitFor(`a:${account.toLowerCase()}`, this.limits.perAccount), this.waitFor(`ip:${address}`, this.limits.perAddress));
  }

  fail(account: string, address: string): void {
    const at = this.now();
    for (const key of [`a:${account.toLowerCase()}`, `ip:${address}`]) this.failures.set(key, [...this.recent(key), at]);
    if (this.failures.size > 10_000) for (const key of [...this.failures.keys()]) this.recent(key);
  }

  /** A successful login clears its account's count (not the address's: one good account does not vouch for others). */
  succeed(account: string): void {
    this.failures.delete(`a:${account.toLowerCase()}`);
  }
}
