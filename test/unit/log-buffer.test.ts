// The window's log (LogBuffer, what the Server page shows) takes a line's window words where the server gives
// them; the server's own log (the terminal, `next`) keeps the line that names the command or flag.
import { describe, expect, it } from "vitest";
import { LogBuffer } from "../../server/features/console/log-buffer.js";

describe("LogBuffer", () => {
  it("keeps a line's window words, and passes the server's own line on", () => {
    const terminal: string[] = [];
    const buffer = new LogBuffer((level, message) => terminal.push(`${level}: ${message}`));
    buffer.log("warn", "--draft-model is not used while --speculation is off.", "The draft model is not used while speculative decoding is off.");
    buffer.log("info", "Model loaded.");
    expect(buffer.since().map((l) => l.message)).toEqual(["The draft model is not used while speculative decoding is off.", "Model loaded."]);
    expect(terminal).toEqual(["warn: --draft-model is not used while --speculation is off.", "info: Model loaded."]);
  });
});
