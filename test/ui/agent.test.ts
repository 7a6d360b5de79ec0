// The chat's Agent mode in Chromium against the real server and model: pick a file, run a task whose first
// step searches the files, watch the steps and the passages found appear, and cancel a running agent.
// Screenshots land in test/.artifacts/screenshots (agent-completed.png, agent-cancelled.png).
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startUiHarness, uiSkipReason, type UiHarness } from "./harness.js";

const skip = uiSkipReason();

// The random test model's search queries are brackets (its grammar-constrained strings prefer them); sampled
// greedily its query is "]", so the notes hold some for it to find, and the first run is made greedy.
const NOTES = "# Backups\nBackups run nightly at 02:00 and are kept for 14 days.\n\nRetention: {\"days\": [7, 14], \"targets\": [\"disk\", \"tape\"]}\n";

describe.skipIf(skip !== null)("agent mode in the window", () => {
  let ui: UiHarness;

  beforeAll(async () => {
    ui = await startUiHarness(inject("tinyModelPath"));
  });
  afterAll(async () => {
    await ui?.close();
  });

  it("runs a task over a picked file: the search step, its passages and the answer appear live", async () => {
    await ui.open("files");
    await ui.page.getByTestId("files-pick").setInputFiles({ name: "backups.md", mimeType: "text/markdown", buffer: Buffer.from(NOTES) });
    await expect.poll(() => ui.page.getByTestId("files-status").allTextContents(), { timeout: 30_000 }).toEqual(["ready"]);
    await ui.open("chat");
    await ui.page.getByTestId("chat-agent-mode").click();
    expect(await ui.page.getByTestId("chat-agent-mode").getAttribute("aria-pressed")).toBe("true");
    const file = ui.page.getByTestId("agent-file");
    await expect.poll(() => file.count(), { timeout: 10_000 }).toBe(1);
    await file.check();
    await ui.page.getByTestId("agent-first-step").selectOption("file_search");
    await ui.page.getByTestId("agent-input").fill("When do the backups run?");
    await ui.page.route("**/v1/agent/run", async (route) => {
      if (route.request().method() !== "POST") return route.continue();
      await route.continue({ postData: JSON.stringify({ ...JSON.parse(route.request().postData() ?? "{}"), temperature: 0 }) });
    });
    await ui.page.getByTestId("agent-run").click();

    await expect.poll(() => ui.page.getByTestId("agent-status").getAttribute("data-status"), { timeout: 30_000 }).toBe("completed");
    const steps = ui.page.getByTestId("agent-step");
    expect(await steps.evaluateAll((els) => els.map((e) => `${e.getAttribute("data-type")}:${e.getAttribute("data-status")}`))).toEqual([
      "model_call:completed",
      "tool_call:completed",
      "model_call:completed",
    ]);
    expect(await steps.nth(0).textContent()).toContain("Calls file_search with");
    expect(await steps.nth(1).getAttribute("data-tool")).toBe("file_search");
    expect(await ui.page.getByTestId("agent-tool-summary").textContent()).toMatch(/^\d+ passages? found$/);
    const passages = await ui.page.getByTestId("agent-passage").locator("blockquote").allTextContents();
    expect(passages.length).toBeGreaterThan(0);
    for (const text of passages) expect(NOTES).toContain(text);
    expect((await steps.nth(2).locator("p").first().textContent())!.length).toBeGreaterThan(0);
    expect(await ui.page.getByTestId("agent-status").textContent()).toMatch(/^Done · 3 steps · \d+ tokens$/);

    // The window sent what a client sends: the picked file, the forced first step, a stream, its time zone.
    const sent = ui.proxy.requests.find((r) => r.method === "POST" && r.path === "/v1/agent/run")!;
    const fileId = await file.getAttribute("data-file-id");
    expect(JSON.parse(sent.body)).toMatchObject({ input: "When do the backups run?", stream: true, file_ids: [fileId], tool_choice: { type: "file_search" }, reasoning: { effort: "none" } });
    // The run is part of the chat: its title is the task's.
    expect(await ui.page.getByRole("heading", { level: 1 }).textContent()).toBe("When do the backups run?");
    await ui.screenshot("agent-completed");
    expect(await ui.axe()).toEqual([]);
    await ui.page.unroute("**/v1/agent/run");
  });

  it("Cancel stops a running agent: the server ends the run and the window says so", async () => {
    // A chat of its own, so the steps counted are this run's.
    await ui.page.getByTestId("chat-new").click();
    // The random model ends a normal run in a fraction of a second; this one is made to call a tool at
    // every step so that it is still running when Cancel is pressed.
    await ui.page.route("**/v1/agent/run", async (route) => {
      if (route.request().method() !== "POST") return route.continue();
      const body = JSON.parse(route.request().postData() ?? "{}");
      await route.continue({
        postData: JSON.stringify({ ...body, tools: [{ type: "calculator" }], tool_choice: "required", reset_tool_choice: false, max_steps: 64, timeout_seconds: 60 }),
      });
    });
    await ui.page.getByTestId("agent-input").fill("Count to a thousand");
    await ui.page.getByTestId("agent-run").click();
    await expect.poll(() => ui.page.getByTestId("agent-step").count(), { timeout: 30_000 }).toBeGreaterThan(1);
    await ui.page.getByTestId("agent-cancel").click();
    await expect.poll(() => ui.page.getByTestId("agent-status").getAttribute("data-status"), { timeout: 5_000 }).toBe("cancelled");
    await expect.poll(() => ui.page.getByTestId("agent-run").isVisible(), { timeout: 5_000 }).toBe(true);
    const cancel = ui.proxy.requests.find((r) => r.method === "POST" && /^\/v1\/agent\/run\/run_[A-Za-z0-9]+\/cancel$/.test(r.path));
    expect(cancel).toBeDefined();
    // Nothing more happens after the cancel.
    const count = await ui.page.getByTestId("agent-step").count();
    await new Promise((r) => setTimeout(r, 500));
    expect(await ui.page.getByTestId("agent-step").count()).toBe(count);
    expect(await ui.page.getByTestId("agent-step").evaluateAll((els) => els.filter((e) => e.getAttribute("data-status") === "in_progress").length)).toBe(0);
    await ui.screenshot("agent-cancelled");
    await ui.page.unroute("**/v1/agent/run");
  });
});
