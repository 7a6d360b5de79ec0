// The Files page and the chat's attachments in Chromium against the real server: upload with progress,
// kind, status and token estimate, expiry, delete; a refused file explained on the spot, and a message the
// server refuses left out of the conversation. Screenshots land in test/.artifacts/screenshots.
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { textPng } from "../support/file-fixtures.js";
import { startUiHarness, uiSkipReason, type UiHarness } from "./harness.js";

const skip = uiSkipReason();

describe.skipIf(skip !== null)("files in the window", () => {
  let ui: UiHarness;
  let png: Buffer;

  beforeAll(async () => {
    ui = await startUiHarness(inject("tinyModelPath"));
    png = await textPng(["Invoice 4711", "Total due 123.45 EUR"]);
  });
  afterAll(async () => {
    await ui?.close();
  });

  async function drop(testId: string, files: Array<{ name: string; type: string; base64: string }>) {
    const dataTransfer = await ui.page.evaluateHandle((list) => {
      const dt = new DataTransfer();
      for (const f of list) dt.items.add(new File([Uint8Array.from(atob(f.base64), (c) => c.charCodeAt(0))], f.name, { type: f.type }));
      return dt;
    }, files);
    await ui.page.getByTestId(testId).dispatchEvent("drop", { dataTransfer });
  }

  const b64 = (s: string | Buffer) => Buffer.from(s).toString("base64");

  /** Opens a page afresh with the event stream held (the window as it opens), runs `act`, then lets the stream go. */
  async function asTheWindowOpens(page: string, act: () => Promise<void>) {
    await ui.page.goto("about:blank");
    const release = ui.holdFeed();
    try {
      await ui.open(page);
      await act();
    } finally {
      release();
    }
  }

  it("highlights the drop zone while files are over it, without flickering over its own text", async () => {
    await ui.open("files");
    const zone = ui.page.getByTestId("files-dropzone");
    const highlighted = async () => (await zone.getAttribute("class"))?.split(/\s+/).includes("dragging") ?? false;
    expect(await highlighted()).toBe(false);
    await zone.dispatchEvent("dragover");
    expect(await highlighted()).toBe(true);
    // The pointer crosses from the zone onto its own paragraph: the browser fires dragleave on the zone.
    const inside = await zone.getByText("Drop files here").elementHandle();
    await zone.dispatchEvent("dragleave", { relatedTarget: inside });
    expect(await highlighted()).toBe(true);
    // Out of the zone (here: out of the window, no related target): the highlight goes.
    await zone.dispatchEvent("dragleave");
    expect(await highlighted()).toBe(false);
  });

  it("a file dropped as the window opens, before it has heard from the main process, is uploaded once it has", async () => {
    // CI met this: the Files page is up before the stream's first news (the server's address), and a drop
    // then was dropped.
    await asTheWindowOpens("files", async () => {
      await drop("files-dropzone", [{ name: "early.txt", type: "text/plain", base64: b64("Step zero: find the herons.") }]);
      const waiting = ui.page.getByTestId("files-upload").filter({ hasText: "early.txt" });
      await waiting.waitFor({ timeout: 10_000 });
      expect(await ui.page.getByTestId("files-row").count()).toBe(0);
    });
    const row = ui.page.getByTestId("files-row").filter({ hasText: "early.txt" });
    await expect.poll(() => row.getByTestId("files-status").textContent().catch(() => null), { timeout: 30_000 }).toBe("ready");
    expect(await ui.page.getByTestId("files-upload").count()).toBe(0);
    const id = await row.getAttribute("data-file-id");
    await row.getByTestId("files-delete").click();
    await row.getByTestId("files-delete-confirm").click();
    await expect.poll(() => ui.page.getByTestId("files-row").count(), { timeout: 10_000 }).toBe(0);
    expect(ui.server.store.files.findAny(id!)).toBeUndefined();
  });

  it("uploads dropped and picked files, shows kind, status, tokens and expiry; a refused one is explained in place", async () => {
    await ui.open("files");
    await expect.poll(() => ui.page.getByTestId("files-page").textContent(), { timeout: 10_000 }).toContain("No files yet.");
    await drop("files-dropzone", [
      { name: "notes.md", type: "text/markdown", base64: b64("# Heron\nThe blue heron protocol ships in March.\n") },
      { name: "invoice.png", type: "image/png", base64: b64(png) },
      { name: "prod.env", type: "text/plain", base64: b64("API_KEY=secret") },
    ]);
    await ui.page.getByTestId("files-pick").setInputFiles({ name: "plan.txt", mimeType: "text/plain", buffer: Buffer.from("Step one: count the herons.") });
    const rows = ui.page.getByTestId("files-row");
    await expect.poll(() => rows.count(), { timeout: 30_000 }).toBe(3);
    await expect.poll(() => ui.page.getByTestId("files-status").allTextContents(), { timeout: 30_000 }).toEqual(["ready", "ready", "ready"]);
    const byName = async (name: string) => ui.page.getByTestId("files-row").filter({ hasText: name });
    expect(await (await byName("invoice.png")).getByTestId("files-kind").textContent()).toBe("Image");
    expect(await (await byName("notes.md")).getByTestId("files-kind").textContent()).toBe("Text");
    expect(await (await byName("invoice.png")).getByTestId("files-tokens").textContent()).toMatch(/^≈ \d+$/);
    expect(await (await byName("plan.txt")).textContent()).toContain("in 29 days");
    const refused = ui.page.getByTestId("files-upload-error");
    expect(await refused.textContent()).toBe("Not uploaded: Credential files are not accepted (prod.env has a credential file's name); keep keys and secrets out of files you send to a model.");
    await ui.screenshot("files");
    const stored = ui.server.store.db.prepare("SELECT filename, token_estimate FROM files ORDER BY filename").all();
    expect(stored).toEqual([
      { filename: "invoice.png", token_estimate: expect.any(Number) },
      { filename: "notes.md", token_estimate: expect.any(Number) },
      { filename: "plan.txt", token_estimate: expect.any(Number) },
    ]);
  });

  it("deletes a file: gone from the list and from the server", async () => {
    const row = ui.page.getByTestId("files-row").filter({ hasText: "plan.txt" });
    const id = await row.getAttribute("data-file-id");
    await row.getByTestId("files-delete").click();
    await row.getByTestId("files-delete-confirm").click();
    await expect.poll(() => ui.page.getByTestId("files-row").count(), { timeout: 10_000 }).toBe(2);
    expect(ui.server.store.db.prepare("SELECT id FROM files WHERE id = ?").get(id)).toBeUndefined();
  });

  it("chat: an image chip with a preview; a refused file is explained on its chip and never sent", async () => {
    await ui.open("chat");
    await ui.page.getByTestId("chat-effort").selectOption("none");
    await drop("chat-page", [
      { name: "invoice.png", type: "image/png", base64: b64(png) },
      { name: "server.pem", type: "application/x-pem-file", base64: b64("-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n") },
    ]);
    const chips = ui.page.getByTestId("chat-attachment");
    await expect.poll(() => chips.evaluateAll((els) => els.map((e) => e.getAttribute("data-state"))), { timeout: 30_000 }).toEqual(["ready", "refused"]);
    expect(await chips.first().locator("img").count()).toBe(1);
    expect(await chips.first().textContent()).toMatch(/Image · ≈ \d+ tokens/);
    expect(await chips.nth(1).textContent()).toContain("Not attached: Credential files are not accepted");
    await ui.screenshot("chat-attachments");
    await ui.page.getByTestId("chat-input").fill("What is the total?");
    await ui.page.getByTestId("chat-send").click();
    const answer = ui.page.getByTestId("turn-assistant").last();
    await expect.poll(() => answer.getAttribute("data-status"), { timeout: 30_000 }).toBe("done");
    const bodies = ui.proxy.requests.filter((r) => r.method === "POST" && r.path === "/v1/chat/completions");
    const sent = JSON.parse(bodies.at(-1)!.body) as { messages: Array<{ content: Array<Record<string, unknown>> }> };
    expect(sent.messages[0]!.content).toHaveLength(2);
    expect(sent.messages[0]!.content[1]).toMatchObject({ type: "file", file: { file_id: expect.stringMatching(/^file-/) } });
  });

  it("a message the server refuses (its file was deleted meanwhile) is marked and left out of later requests", async () => {
    await ui.page.getByTestId("chat-new").click();
    await ui.page.getByTestId("chat-page").dispatchEvent("drop", {
      dataTransfer: await ui.page.evaluateHandle(() => {
        const dt = new DataTransfer();
        dt.items.add(new File(["short lived"], "gone.txt", { type: "text/plain" }));
        return dt;
      }),
    });
    await expect.poll(() => ui.page.getByTestId("chat-attachment").getAttribute("data-state"), { timeout: 30_000 }).toBe("ready");
    const gone = ui.server.store.db.prepare("SELECT id FROM files WHERE filename = 'gone.txt'").get() as { id: string };
    await ui.server.app.inject({ method: "DELETE", url: `/v1/files/${gone.id}`, headers: { authorization: `Bearer ${await ui.service.windowKey()}` } });
    await ui.page.getByTestId("chat-input").fill("Read this");
    await ui.page.getByTestId("chat-send").click();
    await expect.poll(() => ui.page.getByTestId("turn-assistant").last().getAttribute("data-status"), { timeout: 30_000 }).toBe("error");
    expect(await ui.page.getByTestId("turn-error").last().locator(".problem-title").textContent()).toBe("gone.txt is no longer on the server.");
    expect(await ui.page.getByTestId("turn-refused").count()).toBe(1);
    await ui.page.getByTestId("chat-input").fill("Hello again");
    await ui.page.getByTestId("chat-send").click();
    await expect.poll(() => ui.page.getByTestId("turn-assistant").last().getAttribute("data-status"), { timeout: 30_000 }).toBe("done");
    const bodies = ui.proxy.requests.filter((r) => r.method === "POST" && r.path === "/v1/chat/completions");
    const sent = JSON.parse(bodies.at(-1)!.body) as { messages: Array<{ role: string; content: unknown }> };
    expect(sent.messages).toEqual([{ role: "user", content: "Hello again" }]);
    await ui.screenshot("chat-refused");
  });

  it("Edit the message puts its text and files back: one still stored is ready again, a deleted one says so", async () => {
    await ui.page.getByTestId("chat-new").click();
    await drop("chat-page", [
      { name: "keep.txt", type: "text/plain", base64: b64("The herons nest by the lake.") },
      { name: "gone-too.txt", type: "text/plain", base64: b64("Deleted before the message goes.") },
    ]);
    const chips = ui.page.getByTestId("chat-attachment");
    await expect.poll(() => chips.evaluateAll((els) => els.map((e) => e.getAttribute("data-state"))), { timeout: 30_000 }).toEqual(["ready", "ready"]);
    const id = (name: string) => (ui.server.store.db.prepare("SELECT id FROM files WHERE filename = ?").get(name) as { id: string }).id;
    const keep = id("keep.txt");
    const gone = id("gone-too.txt");
    await ui.server.app.inject({ method: "DELETE", url: `/v1/files/${gone}`, headers: { authorization: `Bearer ${await ui.service.windowKey()}` } });
    await ui.page.getByTestId("chat-input").fill("Compare them");
    await ui.page.getByTestId("chat-send").click();
    const failed = ui.page.getByTestId("turn-assistant").last();
    await expect.poll(() => failed.getAttribute("data-status"), { timeout: 30_000 }).toBe("error");
    expect(await failed.locator(".problem-title").textContent()).toBe("gone-too.txt is no longer on the server.");
    await failed.getByTestId("problem-edit").click();
    expect(await ui.page.getByTestId("chat-input").inputValue()).toBe("Compare them");
    await expect.poll(() => chips.evaluateAll((els) => els.map((e) => e.getAttribute("data-state"))), { timeout: 10_000 }).toEqual(["ready", "refused"]);
    expect(await chips.nth(0).textContent()).toMatch(/keep\.txt.*Text · ≈ \d+ tokens/);
    expect(await chips.nth(1).textContent()).toContain("Not attached: It is no longer on the server");
    await ui.page.getByTestId("chat-send").click();
    await expect.poll(() => ui.page.getByTestId("turn-assistant").last().getAttribute("data-status"), { timeout: 30_000 }).toBe("done");
    const bodies = ui.proxy.requests.filter((r) => r.method === "POST" && r.path === "/v1/chat/completions");
    const sent = JSON.parse(bodies.at(-1)!.body) as { messages: unknown[] };
    expect(sent.messages).toEqual([
      {
        role: "user",
        content: [
          { type: "text", text: "Compare them" },
          { type: "file", file: { file_id: keep } },
        ],
      },
    ]);
  });

  it("chat: a file attached as the window opens, before it has heard from the main process, is uploaded once it has", async () => {
    await asTheWindowOpens("chat", async () => {
      await drop("chat-page", [{ name: "early-note.txt", type: "text/plain", base64: b64("Step zero: find the herons.") }]);
      const chip = ui.page.getByTestId("chat-attachment").filter({ hasText: "early-note.txt" });
      await chip.waitFor({ timeout: 10_000 });
      expect(await chip.getAttribute("data-state")).toBe("uploading");
    });
    const chip = ui.page.getByTestId("chat-attachment").filter({ hasText: "early-note.txt" });
    await expect.poll(() => chip.getAttribute("data-state"), { timeout: 30_000 }).toBe("ready");
  });
});
