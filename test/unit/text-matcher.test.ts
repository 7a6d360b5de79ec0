import { describe, expect, it } from "vitest";
import { TextTriggerMatcher } from "../../server/engine/text-matcher.js";

function feed(matcher: TextTriggerMatcher<string>, chunks: string[]) {
  let emitted = "";
  for (const chunk of chunks) {
    const r = matcher.push(chunk);
    emitted += r.emit;
    if (r.hit) return { emitted, hit: r.hit, rest: r.rest };
  }
  return { emitted: emitted + matcher.flush(), hit: null, rest: "" };
}

describe("TextTriggerMatcher", () => {
  it("finds a trigger inside one chunk and splits around it", () => {
    const m = new TextTriggerMatcher([{ kind: "stop", text: "END" }]);
    expect(feed(m, ["abcENDdef"])).toEqual({ emitted: "abc", hit: { kind: "stop", trigger: "END" }, rest: "def" });
  });

  it("finds a trigger split over many chunks and never emits its start", () => {
    const m = new TextTriggerMatcher([{ kind: "stop", text: "short answer" }]);
    const chunks = ["Sure here is a", " sh", "ort", " ans", "wer and more"];
    const seen: string[] = [];
    let hit = null;
    for (const c of chunks) {
      const r = m.push(c);
      seen.push(r.emit);
      if (r.hit) {
        hit = r.hit;
        break;
      }
    }
    expect(seen.join("")).toBe("Sure here is a ");
    expect(seen.join("")).not.toContain("sh");
    expect(hit).toEqual({ kind: "stop", trigger: "short answer" });
  });

  it("releases held text when the candidate turns out not to match", () => {
    const m = new TextTriggerMatcher([{ kind: "stop", text: "STOP" }]);
    expect(m.push("go ST").emit).toBe("go ");
    expect(m.holding).toBe("ST");
    expect(m.push("ART").emit).toBe("START");
    expect(m.flush()).toBe("");
  });

  it("flushes a held partial match at the end of the stream", () => {
    const m = new TextTriggerMatcher([{ kind: "stop", text: "STOP" }]);
    expect(feed(m, ["the end ST"])).toEqual({ emitted: "the end ST", hit: null, rest: "" });
  });

  it("reports the earliest of several triggers", () => {
    const m = new TextTriggerMatcher([
      { kind: "stop", text: "world" },
      { kind: "tool", text: "<tool_call>" },
    ]);
    const r = m.push("hello <tool_call> world");
    expect(r.hit).toEqual({ kind: "tool", trigger: "<tool_call>" });
    expect(r.emit).toBe("hello ");
  });

  it("handles a trigger that starts inside a repeated prefix", () => {
    const m = new TextTriggerMatcher([{ kind: "stop", text: "aab" }]);
    expect(feed(m, ["a", "a", "a", "b"])).toEqual({ emitted: "a", hit: { kind: "stop", trigger: "aab" }, rest: "" });
  });
});
