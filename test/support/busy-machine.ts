// A machine for thread-policy.ts's CoreContention in tests: other processes keep `busy` cores busy all the
// time, and each reading comes a window later (300 ms, against the 250 ms windows of busyContention).
import { CoreContention, type CpuClock } from "../../server/engine/thread-policy.js";

export function busyMachine(busy: number): CpuClock {
  let at = 0;
  return { now: () => (at += 300), machineBusyMs: () => at * busy, ownMs: () => 0 };
}

/** A CoreContention on busyMachine(busy): its first reading starts a window (0 busy), each next one says `busy`. */
export const busyContention = (busy: number) => new CoreContention(busyMachine(busy), 250);
