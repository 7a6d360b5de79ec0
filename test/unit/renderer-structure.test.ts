// The window's structure as issue 41 left it, kept: the two pages that had grown past reading are under 300
// lines (the work is in hooks and components), and nothing in the window repeats a timer that could poll the
// API (what it shows comes pushed: state/window-state.ts); the one interval is the elapsed-seconds counter.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "../support/svc-process.js";

const SRC = join(ROOT, "renderer", "src");

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? sources(path) : /\.tsx?$/.test(name) ? [path] : [];
  });
}

describe("the window's structure", () => {
  it("chat-page.tsx and models-page.tsx are under 300 lines", () => {
    for (const page of ["chat-page.tsx", "models-page.tsx"]) {
      const lines = readFileSync(join(SRC, "pages", page), "utf8").split("\n").length;
      expect(lines, page).toBeLessThan(300);
    }
  });

  it("no repeating timer but the elapsed-seconds counter (nothing polls)", () => {
    const found = sources(SRC).flatMap((file) =>
      readFileSync(file, "utf8")
        .split("\n")
        .filter((line) => /setInterval\(|usePoll\(/.test(line))
        .map((line) => `${file.slice(SRC.length + 1)}: ${line.trim()}`),
    );
    expect(found).toEqual(["chat/turn-view.tsx: const timer = setInterval(() => setNow(Date.now()), 500);"]);
  });
});
