// --speculation / SVC_SPECULATION: what the server asks the engine for, and a clear error for anything else.
import { describe, expect, it } from "vitest";
import { ConfigError, resolveServeConfig } from "../../server/config.js";
import { tokenPathsFromEnvironment } from "../../server/engine/slot-loop.js";

describe("--speculation", () => {
  it("takes prompt-lookup (or on) and off, from the flag over the variable; unset leaves the engine's default, on", () => {
    expect(resolveServeConfig({}, {}).speculation).toBeUndefined();
    expect(resolveServeConfig({ speculation: "off" }, {}).speculation).toBe("off");
    expect(resolveServeConfig({ speculation: "Prompt-Lookup" }, {}).speculation).toBe("prompt-lookup");
    expect(resolveServeConfig({}, { SVC_SPECULATION: "on" }).speculation).toBe("prompt-lookup");
    expect(resolveServeConfig({ speculation: "off" }, { SVC_SPECULATION: "prompt-lookup" }).speculation).toBe("off");
    expect(tokenPathsFromEnvironment({}).speculation).toBe(true);
    expect(tokenPathsFromEnvironment({ SVC_SPECULATION: "off" }).speculation).toBe(false);
  });

  it("refuses anything else, naming the flag and the values it takes", () => {
    expect(() => resolveServeConfig({ speculation: "draft" }, {})).toThrow(ConfigError);
    expect(() => resolveServeConfig({}, { SVC_SPECULATION: "yes please" })).toThrow("--speculation must be prompt-lookup or off (got 'yes please').");
  });
});
