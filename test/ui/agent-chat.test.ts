// Issue 41, item 6: Agent mode keeps things. A run is part of the chat: a finished run stays when Agent is
// toggled, is saved with the chat and comes back with it, a saved chat clicked in Agent mode opens, files can
// be attached to a task, and Export exports the chat on screen (with its runs). In Chromium against the real
// server and model. Screenshots: agent-chat-*.png.
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startUiHarness, uiSkipReason, type UiHarness } from "./harness.js";

const skip = uiSkipReason();

describe.skipIf(skip !== null)("agent runs in the chat", () => {
  let ui: UiHarness;

  beforeAll(async () => {
    ui = await startUiHarness(inject("tinyModelPath"));
  });
  afterAll(async () => {
    await ui?.close();
  });

  const page = () => ui.page;
  const runEnded = async () => {
    const run = page().getByTestId("turn-agent").last();
    await expect.poll(() => run.getAttribute("data-status"), { timeout: 60_000 }).toMatch(/^(completed|incomplete|failed|cancelled)$/);
    return run;
  };

  it("a task with an attached file: the file goes with the run, and the finished run stays when Agent is toggled", async () => {
    await ui.open("chat");
    await page().getByTestId("chat-effort").selectOption("none");
    await page().getByTestId("chat-agent-mode").click();
    // Attach in Agent mode: the file is uploaded and given to the run.
    await page().getByTestId("chat-attach").setInputFiles({ name: "backups.md", mimeType: "text/markdown", buffer: Buffer.from("# Backups\nBackups run nightly at 02:00.\n") });
    await expect.poll(() => page().getByTestId("chat-attachment").getAttribute("data-state"), { timeout: 30_000 }).toBe("ready");
    await page().getByTestId("agent-max-steps").fill("3");
    await page().getByTestId("agent-input").fill("When do the backups run?");
    await page().getByTestId("agent-run").click();
    const run = await runEnded();
    const fileId = (ui.server.store.db.prepare("SELECT id FROM files WHERE filename = 'backups.md'").get() as { id: string }).id;
    const sent = JSON.parse(ui.proxy.requests.find((r) => r.method === "POST" && r.path === "/v1/agent/run")!.body) as { file_ids?: string[] };
    expect(sent.file_ids).toEqual([fileId]);
    expect(await run.getByTestId("agent-step").count()).toBeGreaterThan(0);
    await ui.screenshot("agent-chat-run");

    // Agent off: the run is still in the conversation; on again: still there.
    await page().getByTestId("chat-agent-mode").click();
    expect(await page().getByTestId("chat-agent-mode").getAttribute("aria-pressed")).toBe("false");
    expect(await page().getByTestId("turn-agent").count()).toBe(1);
    expect(await page().getByTestId("turn-user").first().textContent()).toContain("When do the backups run?");
    await page().getByTestId("chat-agent-mode").click();
    expect(await page().getByTestId("turn-agent").count()).toBe(1);
  });

  it("the run is saved with the chat; a saved chat clicked in Agent mode opens, run and all", async () => {
    await expect.poll(() => page().getByTestId("chat-item").filter({ hasText: "When do the backups run?" }).count()).toBe(1);
    const saved = (await page().evaluate(
      () =>
        new Promise<unknown[]>((resolve, reject) => {
          const open = indexedDB.open("svc-chats");
          open.onerror = () => reject(open.error);
          open.onsuccess = () => {
            const all = open.result.transaction("chats").objectStore("chats").getAll();
            all.onsuccess = () => {
              open.result.close();
              resolve(all.result as unknown[]);
            };
          };
        }),
    )) as Array<{ turns: Array<{ role: string; agent?: { status: string; steps: unknown[]; fileIds: string[] } }> }>;
    const agentTurn = saved.flatMap((c) => c.turns).find((t) => t.role === "agent");
    expect(agentTurn?.agent?.steps.length).toBeGreaterThan(0);
    expect(agentTurn?.agent?.fileIds).toHaveLength(1);

    // Still in Agent mode: a new chat, then the saved one from the list.
    await page().getByTestId("chat-new").click();
    expect(await page().getByTestId("turn-agent").count()).toBe(0);
    await page().getByTestId("chat-item").filter({ hasText: "When do the backups run?" }).getByTestId("chat-open").click();
    await expect.poll(() => page().getByTestId("turn-agent").count()).toBe(1);
    expect(await page().getByTestId("chat-title").textContent()).toBe("When do the backups run?");
    expect(await page().getByTestId("chat-agent-mode").getAttribute("aria-pressed")).toBe("true");
    await ui.screenshot("agent-chat-reopened");
    expect(await ui.axe()).toEqual([]);
  });

  it("Export exports the chat on screen, with its runs", async () => {
    const [download] = await Promise.all([page().waitForEvent("download"), page().getByTestId("chat-export").click()]);
    const data = JSON.parse(readFileSync((await download.path())!, "utf8")) as { title: string; messages: Array<{ role: string; content: string; agent_run?: { steps: unknown[] } }> };
    expect(data.title).toBe("When do the backups run?");
    expect(data.messages.map((m) => m.role)).toEqual(["user", "agent"]);
    expect(data.messages[0]!.content).toBe("When do the backups run?");
    expect(data.messages[1]!.agent_run?.steps.length).toBeGreaterThan(0);
  });
});
