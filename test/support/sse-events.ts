// Splits an SSE body into its events as a client sees them: the `event:` name and the parsed `data:` JSON.
// Comment lines (": keepalive") are skipped, as SSE parsers do.
export interface SseEvent {
  event: string | null;
  data: any;
}

export function sseEvents(body: string): SseEvent[] {
  return body
    .split("\n\n")
    .filter((block) => block.trim() !== "")
    .map((block) => block.split("\n").filter((l) => !l.startsWith(":")))
    .filter((lines) => lines.length > 0)
    .map((lines) => {
      const event = lines.find((l) => l.startsWith("event:"))?.slice(6).trim() ?? null;
      const data = lines
        .filter((l) => l.startsWith("data:"))
        .map((l) => l.slice(5).trimStart())
        .join("\n");
      return { event, data: data === "" ? null : JSON.parse(data) };
    });
}
