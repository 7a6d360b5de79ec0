// The window's wire types (server/features/console/wire.ts) against the server's own, at compile time: `tsc -p
// test/tsconfig.json` fails when a field is added, removed or changed on one side only. The one runtime check
// is that no renderer module declares a wire type of its own again (they had drifted: AuditRecord had lost
// account_id, stop_reason, queued_ms, run_status and run_steps).
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { ContextErrorFacts, ContextRemedy } from "../../server/engine/context-advice.js";
import type { AuditList, AuditRecord, AuditStats } from "../../server/features/audit/audit-service.js";
import type { RunEvent, RunObject, RunStep } from "../../server/features/agent/agent-run.js";
import type { MessageBatchObject } from "../../server/features/batches/batch-object.js";
import type * as Wire from "../../server/features/console/wire.js";
import type { FileOut } from "../../server/features/files/files-service.js";
import { ROOT } from "../support/svc-process.js";

/** true when A and B are the same type (not merely assignable one way). */
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
type Expect<T extends true> = T;

export type WireChecks = [
  Expect<Equal<Wire.FileOut, FileOut>>,
  Expect<Equal<Wire.AuditRecord, AuditRecord>>,
  Expect<Equal<Wire.AuditList, AuditList>>,
  Expect<Equal<Wire.AuditStats, AuditStats>>,
  Expect<Equal<Wire.MessageBatch, MessageBatchObject>>,
  Expect<Equal<Wire.RunStep, RunStep>>,
  // The window reads a part of the run object: those fields exactly as the server has them.
  Expect<Equal<Wire.RunObject, Pick<RunObject, keyof Wire.RunObject>>>,
  Expect<Equal<Wire.ContextRemedy, ContextRemedy>>,
  Expect<Equal<Wire.ContextErrorFacts, ContextErrorFacts>>,
  // Every event the server streams is one the window's type describes (with the run in the window's shape).
  Expect<Equal<Exclude<RunEvent, { run: RunObject }>, Exclude<Wire.RunEvent, { run: Wire.RunObject }>>>,
];

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? sources(path) : /\.tsx?$/.test(name) ? [path] : [];
  });
}

describe("the window's wire types", () => {
  it("come from one module: no renderer file declares a wire type of its own", () => {
    const names = ["FileOut", "AuditRecord", "AuditList", "AuditStats", "AuditDay", "MessageBatch", "RunObject", "RunStep", "RunUsage", "BatchResultLine"];
    const found: string[] = [];
    for (const file of sources(join(ROOT, "renderer", "src"))) {
      const text = readFileSync(file, "utf8");
      for (const name of names) if (new RegExp(`(interface|type)\\s+${name}\\b`).test(text)) found.push(`${file.slice(ROOT.length + 1)}: ${name}`);
    }
    expect(found).toEqual([]);
  });
});
