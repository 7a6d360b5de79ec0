// Issue 41, items 4, 5, 7 and 8, in Chromium against the real server and model.
// 4: the window does not poll: ten minutes (on a fake clock) on the Files and Batches pages add no audit record
//    the user did not cause, and a change made elsewhere still shows at once (pushed).
// 5: at 800×600 the chat list leaves the button that opened it reachable and closes on Esc or a click outside;
//    the sidebar shows the theme and the port whole; the Keys and Audit tables stay inside their cards.
// 7: batches from the keyboard (Choose a file… is a button), written in the window (no JSONL by hand), and
//    their results read on the page.
// 8: Files → Delete asks first, and names the saved chats that sent the file.
// Screenshots: pages-*.png, at both sizes and in both themes where the layout is the point.
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startUiHarness, uiSkipReason, type UiHarness } from "./harness.js";

const skip = uiSkipReason();

describe.skipIf(skip !== null)("the pages as daily tools", () => {
  let ui: UiHarness;

  beforeAll(async () => {
    ui = await startUiHarness(inject("tinyModelPath"));
  });
  afterAll(async () => {
    await ui?.close();
  });

  const auditCount = () => (ui.server.store.db.prepare("SELECT COUNT(*) AS n FROM audit_records").get() as { n: number }).n;
  const settle = () => new Promise((r) => setTimeout(r, 300));

  async function upload(key: string, name: string, text: string): Promise<string> {
    const form = new FormData();
    form.append("purpose", "user_data");
    form.append("file", new Blob([text], { type: "text/plain" }), name);
    const res = await fetch(`${ui.server.url}/v1/files`, { method: "POST", headers: { authorization: `Bearer ${key}` }, body: form });
    expect(res.status).toBe(200);
    return ((await res.json()) as { id: string }).id;
  }

  describe("item 4: pushed, not polled", () => {
    it("ten minutes on the Files and Batches pages add no audit record the user did not cause; changes made elsewhere still show", async () => {
      // Something on each page: a file, and a batch that ended.
      const key = await ui.service.windowKey();
      await upload(key, "kept.txt", "A file to look at.");
      const batch = await fetch(`${ui.server.url}/v1/messages/batches`, {
        method: "POST",
        headers: { "x-api-key": key, "content-type": "application/json" },
        body: JSON.stringify({ requests: [{ custom_id: "one", params: { model: "claude-haiku-4-5", max_tokens: 8, messages: [{ role: "user", content: "Hi" }] } }] }),
      });
      expect(batch.status).toBe(200);

      // A window whose clock runs ten minutes in no time: every timer it sets fires as it would.
      const page = await ui.context.newPage();
      await page.clock.install();
      await page.goto(`${ui.pageUrl}/index.html#/files`);
      await page.getByTestId("files-row").first().waitFor();
      await settle();
      const before = auditCount();
      await page.clock.runFor(5 * 60_000);
      await page.getByTestId("nav-batches").click();
      await page.getByTestId("batch-row").first().waitFor();
      await page.clock.runFor(5 * 60_000);
      await settle();
      expect(auditCount()).toBe(before);

      // Another client uploads a file (a key of the window's account): it shows without the page asking.
      const other = (await ui.service.createKey({ name: "another client" })).key;
      await upload(other, "from-elsewhere.txt", "Made by another client.");
      await page.getByTestId("nav-files").click();
      await expect.poll(() => page.getByTestId("files-row").filter({ hasText: "from-elsewhere.txt" }).count(), { timeout: 10_000 }).toBe(1);
      await page.clock.runFor(60_000);
      await settle();
      // One record: the other client's upload. None of the window's.
      expect(auditCount()).toBe(before + 1);
      await page.close();
    });
  });

  describe("item 5: 800×600", () => {
    for (const theme of ["light", "dark"] as const)
      it(`${theme}: the chat list overlay, the sidebar, and the Keys and Audit tables fit`, async () => {
        const page = ui.page;
        await page.setViewportSize({ width: 800, height: 600 });
        try {
        await ui.open("chat");
        await page.getByTestId("theme-switch").selectOption(theme);
        await ui.service.createKey({ name: "a key with a rather long descriptive name for my editor" });

        // The chat list opens over the conversation without covering the button that opened it.
        const toggle = page.locator(".chats-toggle");
        await toggle.click();
        const list = page.getByTestId("chat-list");
        expect(await list.isVisible()).toBe(true);
        const covered = await toggle.evaluate((el) => {
          const r = el.getBoundingClientRect();
          const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
          return !(hit && el.contains(hit));
        });
        expect(covered).toBe(false);
        await ui.screenshot(`pages-chat-list-800-${theme}`);
        // Esc closes it; so does a click outside it.
        await page.keyboard.press("Escape");
        await expect.poll(() => list.isVisible()).toBe(false);
        await toggle.click();
        expect(await list.isVisible()).toBe(true);
        await page.getByTestId("chat-turns").click({ position: { x: 500, y: 200 } });
        await expect.poll(() => list.isVisible()).toBe(false);

        // The sidebar: the theme's name whole, the address on one line and whole.
        await page.getByTestId("theme-switch").selectOption("system");
        const theme_ = await page.getByTestId("theme-switch").evaluate((el) => {
          const select = el as HTMLSelectElement;
          const style = getComputedStyle(select);
          const context = document.createElement("canvas").getContext("2d")!;
          context.font = `${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
          const text = context.measureText(select.selectedOptions[0]!.text).width;
          // The room for the text: the box less its padding and the arrow (about 16 px).
          return { text, room: select.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight) - 16 };
        });
        expect(theme_.text).toBeLessThanOrEqual(theme_.room);
        const address = page.getByTestId("status-line").locator(".small");
        const lines = await address.evaluate((el) => ({ height: el.getBoundingClientRect().height, line: parseFloat(getComputedStyle(el).lineHeight) || 16, cut: el.scrollWidth > el.clientWidth }));
        expect(lines.height).toBeLessThan(lines.line * 1.5);
        expect(lines.cut).toBe(false);
        await page.getByTestId("theme-switch").selectOption(theme);

        // Keys and Audit: the tables inside their cards, and no page scrolls sideways.
        for (const [name, table] of [
          ["keys", "keys-table"],
          ["audit", "audit-table"],
        ] as const) {
          await ui.open(name);
          await page.getByTestId(table).locator("tbody tr").first().waitFor();
          await settle();
          const fit = await page.getByTestId(table).evaluate((el) => {
            const card = el.closest(".card")!;
            const inner = card.getBoundingClientRect();
            const box = el.getBoundingClientRect();
            const content = document.querySelector("main.content")!;
            return { right: box.right, cardRight: inner.right, width: box.width, pageScrolls: content.scrollWidth > content.clientWidth };
          });
          expect(fit.right, `${name}: the table's right edge`).toBeLessThanOrEqual(fit.cardRight + 0.5);
          expect(fit.pageScrolls, `${name}: the page scrolls sideways`).toBe(false);
          await page.getByTestId(table).scrollIntoViewIfNeeded();
          await page.screenshot({ path: `${ui.screenshotsDir}/pages-${name}-800-${theme}.png` });
        }
        expect(await ui.axe()).toEqual([]);
        } finally {
          await page.setViewportSize({ width: 1280, height: 860 });
        }
      });
  });

  describe("item 7: batches from the keyboard, without JSONL, results read on the page", () => {
    it("Choose a file… is reached with Tab and opens the picker", async () => {
      await ui.open("batches");
      await ui.page.getByTestId("nav-batches").focus();
      let reached = false;
      for (let i = 0; i < 30 && !reached; i++) {
        await ui.page.keyboard.press("Tab");
        reached = await ui.page.evaluate(() => document.activeElement?.textContent?.trim() === "Choose a file…");
      }
      expect(reached).toBe(true);
      // Enter on it opens the file picker: the hidden file input is clicked.
      await ui.page.getByTestId("batch-file").evaluate((input) => input.addEventListener("click", (event) => {
        event.preventDefault();
        (window as unknown as { __picked?: boolean }).__picked = true;
      }));
      await ui.page.keyboard.press("Enter");
      await expect.poll(() => ui.page.evaluate(() => (window as unknown as { __picked?: boolean }).__picked === true)).toBe(true);
    });

    it("prompts written in the window become a batch, and its results are read on the page", async () => {
      const before = await ui.page.getByTestId("batch-row").count();
      await ui.page.getByTestId("batch-write").click();
      await ui.page.getByTestId("batch-prompts").fill("Say hello.\n\nName a colour.\n");
      await ui.page.getByTestId("batch-system").fill("Answer in three words.");
      await ui.page.getByTestId("batch-max-tokens").fill("16");
      await ui.page.getByTestId("batch-prepare").click();
      await expect.poll(() => ui.page.getByTestId("batch-draft").textContent()).toMatch(/2 requests/);
      await ui.screenshot("pages-batch-written");
      await ui.page.getByTestId("batch-create").click();
      const sent = () => ui.proxy.requests.filter((r) => r.method === "POST" && r.path === "/v1/messages/batches");
      await expect.poll(() => sent().length).toBe(1);
      const posted = sent()[0]!;
      expect(JSON.parse(posted.body)).toEqual({
        requests: [
          { custom_id: "prompt-1", params: { model: "svc", max_tokens: 16, thinking: { type: "disabled" }, system: "Answer in three words.", messages: [{ role: "user", content: "Say hello." }] } },
          { custom_id: "prompt-2", params: { model: "svc", max_tokens: 16, thinking: { type: "disabled" }, system: "Answer in three words.", messages: [{ role: "user", content: "Name a colour." }] } },
        ],
      });
      await expect.poll(() => ui.page.getByTestId("batch-row").count(), { timeout: 10_000 }).toBe(before + 1);
      const id = (ui.server.store.db.prepare("SELECT id FROM message_batches ORDER BY seq DESC LIMIT 1").get() as { id: string }).id;
      const row = ui.page.locator(`[data-testid="batch-row"][data-batch-id="${id}"]`);
      await expect.poll(() => row.getAttribute("data-status"), { timeout: 60_000 }).toBe("ended");
      await row.getByTestId("batch-view").click();
      const results = ui.page.getByTestId("batch-result");
      await expect.poll(() => results.count()).toBe(2);
      expect(await results.evaluateAll((rows) => rows.map((r) => [r.getAttribute("data-custom-id"), r.getAttribute("data-result")]))).toEqual([
        ["prompt-1", "succeeded"],
        ["prompt-2", "succeeded"],
      ]);
      for (const text of await ui.page.getByTestId("batch-result-text").allTextContents()) expect(text.trim().length).toBeGreaterThan(0);
      await ui.screenshot("pages-batch-results");
      expect(await ui.axe()).toEqual([]);
    });
  });

  describe("item 8: Files → Delete asks first", () => {
    it("names the saved chats that sent the file; Keep keeps it, Delete now deletes it", async () => {
      await ui.open("chat");
      await ui.page.getByTestId("chat-new").click();
      await ui.page.getByTestId("chat-effort").selectOption("none");
      await ui.page.getByTestId("chat-attach").setInputFiles({ name: "shared-notes.txt", mimeType: "text/plain", buffer: Buffer.from("The herons nest by the lake.") });
      await expect.poll(() => ui.page.getByTestId("chat-attachment").getAttribute("data-state"), { timeout: 30_000 }).toBe("ready");
      await ui.page.getByTestId("chat-input").fill("Where do the herons nest?");
      await ui.page.getByTestId("chat-send").click();
      await expect.poll(() => ui.page.getByTestId("turn-assistant").last().getAttribute("data-status"), { timeout: 60_000 }).toBe("done");
      await expect.poll(() => ui.page.getByTestId("chat-item").filter({ hasText: "Where do the herons nest?" }).count()).toBe(1);

      await ui.open("files");
      const row = ui.page.getByTestId("files-row").filter({ hasText: "shared-notes.txt" });
      await row.getByTestId("files-delete").click();
      const question = row.getByTestId("files-delete-question");
      await expect.poll(() => question.textContent()).toContain("The saved chat “Where do the herons nest?” sent it: it will show it as deleted");
      await ui.screenshot("pages-files-delete-question");
      await row.getByRole("button", { name: "Keep" }).click();
      expect(await row.count()).toBe(1);
      await row.getByTestId("files-delete").click();
      await row.getByTestId("files-delete-confirm").click();
      await expect.poll(() => row.count()).toBe(0);
      expect(ui.server.store.db.prepare("SELECT id FROM files WHERE filename = 'shared-notes.txt'").get()).toBeUndefined();
      // The chat that sent it shows it as gone at once (and no longer sends it), as the question said.
      await ui.page.getByTestId("nav-chat").click();
      const chip = ui.page.getByTestId("turn-user").filter({ hasText: "Where do the herons nest?" }).getByTestId("attachment-chip");
      await expect.poll(() => chip.getAttribute("data-state")).toBe("gone");
      await ui.screenshot("pages-files-deleted-in-chat");
    });
  });
});
