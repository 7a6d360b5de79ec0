// The agent's built-in tools without a server: passages and their ranking, the calculator's language and
// its refusals, the time in a zone, and the tool box over a caller's files.
import { describe, expect, it } from "vitest";
import { AppError } from "../../server/core/errors.js";
import { calculate } from "../../server/features/agent/calculator.js";
import { PassageIndex, splitPassages } from "../../server/features/agent/file-search.js";
import { currentTime, ToolBox, type AgentFiles } from "../../server/features/agent/tools.js";
import type { FileOut } from "../../server/features/files/files-service.js";

describe("passages", () => {
  it("joins short paragraphs, keeps line numbers, and never exceeds the passage size", () => {
    const text = ["Alpha line.", "", "Beta line.", "", "x".repeat(500), "", "y ".repeat(900)].join("\n");
    const passages = splitPassages(text, 300);
    expect(passages[0]).toEqual({ line: 1, text: "Alpha line.\n\nBeta line." });
    for (const p of passages) expect(p.text.length).toBeLessThanOrEqual(300);
    expect(passages.map((p) => p.text).join("").replace(/\s/g, "")).toBe(text.replace(/\s/g, ""));
    expect(passages.find((p) => p.text.startsWith("x"))!.line).toBe(5);
  });

  it("finds the query verbatim first (any case), then passages sharing its words, best first", () => {
    const index = new PassageIndex();
    index.add("file-a", "a.md", ["The heron gateway listens on port 8080.", "", "x".repeat(250), "", "Herons nest by the river; the gateway is elsewhere."].join("\n"));
    index.add("file-b", "b.md", "Unrelated text about stones.");
    const hits = index.search("HERON GATEWAY", 5);
    expect(hits[0]).toMatchObject({ fileId: "file-a", filename: "a.md", line: 1, match: "phrase" });
    expect(hits[0]!.text).toContain("heron gateway listens");
    expect(hits.slice(1).every((h) => h.match === "terms")).toBe(true);
    expect(hits.some((h) => h.text.startsWith("Herons nest"))).toBe(true);
    expect(hits.some((h) => h.fileId === "file-b")).toBe(false);
    // Punctuation is searched literally; nothing matches nothing.
    expect(index.search("]", 5)).toEqual([]);
    expect(index.search("   ", 5)).toEqual([]);
    expect(index.search("zzzqqq", 5)).toEqual([]);
  });
});

describe("calculator", () => {
  it("evaluates arithmetic, functions and units", () => {
    expect(calculate("2 + 3 * 4").result).toBe("14");
    expect(calculate("sqrt(2)").result).toBe("1.4142135623731");
    expect(calculate("10 km to mi").result).toBe("6.2137119223733 mi");
    expect(calculate(" 2^10 ")).toEqual({ expression: "2^10", result: "1024" });
  });

  it("refuses code, huge values and nonsense with a reason, never running JavaScript", () => {
    for (const expression of ["import({}, {})", 'evaluate("1+1")', "parse(\"1\")", "range(1, 1e9)", "ones(1e5, 1e5)", "createUnit(\"foo\")", "}}", "", "process.exit(1)", "x".repeat(501)]) {
      expect(() => calculate(expression), expression).toThrow(AppError);
    }
    expect(() => calculate("f(x) = x^2")).toThrow(/does not evaluate to a value/);
  });
});

describe("current time", () => {
  it("is given in the zone with its offset, DST included", () => {
    const summer = new Date("2026-07-01T12:00:00Z");
    expect(currentTime("Europe/Berlin", summer)).toMatchObject({ timezone: "Europe/Berlin", iso: "2026-07-01T14:00:00+02:00", unix: 1782907200 });
    expect(currentTime("Europe/Berlin", new Date("2026-01-01T12:00:00Z")).iso).toBe("2026-01-01T13:00:00+01:00");
    expect(currentTime("UTC", summer).iso).toBe("2026-07-01T12:00:00Z");
    expect(currentTime("America/St_Johns", summer).iso).toBe("2026-07-01T09:30:00-02:30");
  });
});

describe("the tool box", () => {
  const fileOf = (id: string, filename: string, account: string): FileOut & { account: string } => ({
    id,
    object: "file",
    filename,
    purpose: "user_data",
    mime_type: "text/plain",
    size: 10,
    bytes: 10,
    status: "processed",
    status_details: null,
    content_kind: "text",
    token_estimate: 3,
    created_at: 0,
    expires_at: 0,
    account,
  });
  const all = [fileOf("file-1", "one.txt", "me"), fileOf("file-2", "two.txt", "me"), fileOf("file-3", "theirs.txt", "them")];
  const texts: Record<string, string> = { "file-1": "The first file mentions the heron.", "file-2": "z".repeat(5000), "file-3": "Secret heron plans." };
  const files: AgentFiles = {
    list: (accountId) => ({ data: all.filter((f) => f.account === accountId) }),
    get: (accountId, id) => {
      const found = all.find((f) => f.id === id && f.account === accountId);
      if (!found) throw new AppError("not_found", `No such file: '${id}'.`, { code: "file_not_found" });
      return found;
    },
    contentOf: async (id, accountId) => {
      files.get(accountId!, id);
      return { extracted: { kind: "text", mediaType: "text/plain", method: "text", text: texts[id]!, truncated: false }, filename: id };
    },
  };

  it("lists, reads in chunks and searches only the caller's files (and only those picked for the run)", async () => {
    const box = new ToolBox({ files, accountId: "me", fileIds: null, timezone: "UTC" });
    const listed = await box.run("list_files", "{}");
    expect((listed.result as any).files.map((f: any) => f.file_id)).toEqual(["file-1", "file-2"]);
    const search = await box.run("file_search", '{"query": "heron"}');
    expect((search.result as any).results).toEqual([expect.objectContaining({ file_id: "file-1", text: texts["file-1"], match: "phrase" })]);
    const read = await box.run("read_file", '{"file_id": "file-2", "offset": 4000}');
    expect(read.result).toMatchObject({ file_id: "file-2", offset: 4000, total_chars: 5000, next_offset: null, text: "z".repeat(1000) });
    expect((await box.run("read_file", '{"file_id": "file-2"}')).result).toMatchObject({ next_offset: 4000 });
    const foreign = await box.run("read_file", '{"file_id": "file-3"}');
    expect(foreign.error).toMatchObject({ code: "file_not_found" });
    expect(JSON.parse(foreign.output)).toEqual({ error: expect.stringContaining("file-3") });

    const picked = new ToolBox({ files, accountId: "me", fileIds: ["file-2"], timezone: "UTC" });
    expect((await picked.run("file_search", '{"query": "heron"}')).result).toEqual({ query: "heron", results: [] });
    expect((await picked.run("read_file", '{"file_id": "file-1"}')).error).toMatchObject({ code: "file_not_found" });
  });

  it("answers bad arguments with an error for the model instead of failing", async () => {
    const box = new ToolBox({ files, accountId: "me", fileIds: null, timezone: "UTC" });
    expect((await box.run("calculator", "not json")).error).toMatchObject({ message: "The arguments are not valid JSON." });
    expect((await box.run("calculator", '{"expression": 5}')).error).toMatchObject({ message: "The argument 'expression' must be a string." });
    expect((await box.run("calculator", '{"expression": "6*7"}')).result).toEqual({ expression: "6*7", result: "42" });
    expect((await box.run("current_time", "")).result).toMatchObject({ timezone: "UTC" });
  });
});
