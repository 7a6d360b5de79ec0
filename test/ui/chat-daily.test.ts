// Issue 41, items 2, 3 and 9: the chat as a daily tool, in Chromium against the real server and model.
// 2: a file the context cannot hold is flagged on its chip and by the context meter before sending, Send
//    waits, and the fix fits the cause (a longer context, set in one click, while the model was trained on
//    enough; else a shorter message or another model); a stopped answer has Continue.
// 3: live tokens and tokens per second while an answer streams; a stopped answer keeps its count.
// 9: a model picker in the chat, a system prompt per chat, the last chat reopened after a restart, and a
//    long title that never wraps the toolbar.
// Screenshots: daily-*.png.
import { copyFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import type { StatusView } from "../../server/features/console/contract.js";
import { startUiHarness, uiSkipReason, type UiHarness } from "./harness.js";

const skip = uiSkipReason();

const AUTOMATIC = { contextSize: null, sequences: null, gpuLayers: null, threads: null };

describe.skipIf(skip !== null)("the chat as a daily tool", () => {
  let ui: UiHarness;

  beforeAll(async () => {
    ui = await startUiHarness(inject("tinyModelPath"));
    await ui.open("chat");
    await ui.page.getByTestId("chat-effort").selectOption("none");
  });
  afterAll(async () => {
    await ui?.close();
  });

  const page = () => ui.page;
  const chatBodies = () => ui.proxy.requests.filter((r) => r.method === "POST" && r.path === "/v1/chat/completions").map((r) => JSON.parse(r.body) as Record<string, unknown>);

  async function ask(text: string) {
    await page().getByTestId("chat-input").fill(text);
    await page().getByTestId("chat-send").click();
    const answer = page().getByTestId("turn-assistant").last();
    await expect.poll(() => answer.getAttribute("data-status"), { timeout: 60_000 }).not.toBe("streaming");
    return answer;
  }

  async function attachText(name: string, text: string) {
    await page().getByTestId("chat-attach").setInputFiles({ name, mimeType: "text/plain", buffer: Buffer.from(text) });
  }

  describe("item 2: files that cannot fit", () => {
    it("a file 12 times the context: its chip and the meter say so before sending, Send waits, and one click sets a context that takes it", async () => {
      await page().getByTestId("chat-new").click();
      // 200,000 characters: about 50,000 tokens by the server's estimate, against the harness's 4,096.
      await attachText("report.txt", "The quarterly numbers went up again. ".repeat(5400).slice(0, 200_000));
      const chip = page().getByTestId("chat-attachment").getByTestId("attachment-chip");
      await expect.poll(() => chip.getAttribute("data-state"), { timeout: 60_000 }).toBe("ready");
      expect(await chip.getAttribute("data-too-big")).toBe("true");
      expect(await chip.getByTestId("attachment-detail").textContent()).toMatch(/^Text · ≈ [\d,]+ tokens, more than the 4,096 this model reads at once$/);
      await page().getByTestId("chat-input").fill("Summarise the report.");
      const meter = page().getByTestId("context-meter");
      await expect.poll(() => meter.getAttribute("data-fill")).toBe("over");
      expect(await page().getByTestId("context-figures").textContent()).toMatch(/^≈ [\d,]+ of 4,096 tokens/);
      expect(await page().getByTestId("chat-send").isDisabled()).toBe(true);
      const advice = page().getByTestId("context-advice");
      expect(await advice.textContent()).toMatch(/report\.txt alone is about [\d,]+ tokens, more than the 4,096 this model reads at once/);
      // The file alone is over: a new chat cannot help, so it is not offered.
      expect(await advice.getByTestId("context-new-chat").count()).toBe(0);
      const set = advice.getByTestId("context-set");
      expect(await set.textContent()).toMatch(/^Set the context to [\d,]+ tokens$/);
      const figure = Number((await set.textContent())!.replace(/\D/g, ""));
      expect(figure).toBeGreaterThan(50_000);
      expect(figure).toBeLessThanOrEqual(65_536);
      await ui.screenshot("daily-file-too-big");
      expect(await ui.axe()).toEqual([]);

      await set.click();
      await expect.poll(async () => ((await ui.service.status()) as StatusView).model.contextSize, { timeout: 90_000 }).toBe(figure);
      await expect.poll(() => meter.getAttribute("data-fill"), { timeout: 10_000 }).toBe("ok");
      expect(await page().getByTestId("chat-send").isDisabled()).toBe(false);
      expect(await chip.getAttribute("data-too-big")).toBeNull();
      await ui.screenshot("daily-file-fits");
      await page().getByTestId("chat-attachment").getByRole("button", { name: "Remove report.txt" }).click();
      await ui.service.setModelSettings(null, AUTOMATIC);
      await expect.poll(async () => ((await ui.service.status()) as StatusView).model.contextSize, { timeout: 90_000 }).toBe(4096);
    });

    it("more than the model was trained on: no setting is offered, the fix is a shorter message or another model", async () => {
      await page().getByTestId("chat-new").click();
      // Two files of about 50,000 tokens each: over the test model's 65,536 training length together.
      await attachText("part-1.txt", "a".repeat(200_000));
      await attachText("part-2.txt", "b".repeat(200_000));
      await expect.poll(() => page().locator('[data-testid="chat-attachment"][data-state="ready"]').count(), { timeout: 60_000 }).toBe(2);
      await page().getByTestId("chat-input").fill("Compare them.");
      const advice = page().getByTestId("context-advice");
      await expect.poll(() => advice.textContent()).toContain("This model was trained on 65,536 tokens, so no setting lets it read more");
      expect(await advice.getByTestId("context-set").count()).toBe(0);
      expect(await advice.getByTestId("context-open-models").count()).toBe(1);
      expect(await page().getByTestId("chat-send").isDisabled()).toBe(true);
      await ui.screenshot("daily-over-training");
      for (const name of ["part-1.txt", "part-2.txt"]) await page().getByRole("button", { name: `Remove ${name}` }).click();
      await page().getByTestId("chat-input").fill("");
    });
  });

  describe("item 3: live progress", () => {
    it("shows tokens so far and tokens per second while the answer streams, and keeps the count when stopped; Continue writes on", async () => {
      await page().getByTestId("chat-new").click();
      // A length limit, so the continued answer ends soon on a CPU.
      await page().getByTestId("chat-settings").click();
      await page().getByTestId("settings-max-tokens").fill("400");
      await page().getByTestId("chat-settings").click();
      ui.proxy.delayMs = 120;
      try {
        // Thinking first makes enough tokens that the answer is surely still being written when they are read;
        // greedy sampling makes the random test model's answer the same each run (and long).
        await page().getByTestId("chat-effort").selectOption("low");
        await page().route("**/v1/chat/completions", async (route) => {
          if (route.request().method() !== "POST") return route.continue();
          await route.continue({ postData: JSON.stringify({ ...JSON.parse(route.request().postData() ?? "{}"), temperature: 0 }) });
        });
        await page().getByTestId("chat-input").fill("Write a long story.");
        await page().getByTestId("chat-send").click();
        // Read without waiting: the live figures are there only while the answer is being written.
        const live = () => page().evaluate(() => document.querySelector('[data-testid="turn-live-stats"]')?.textContent ?? null);
        await expect.poll(live, { timeout: 30_000 }).toMatch(/^\d+ tokens · [\d.]+ tokens\/s$/);
        const count = async () => Number(/^(\d+)/.exec((await live()) ?? "")?.[1] ?? 0);
        const first = await count();
        await expect.poll(count, { timeout: 10_000 }).toBeGreaterThan(first);
        expect(await page().getByTestId("turn-assistant").last().getAttribute("data-status")).toBe("streaming");
        // Stopped once the answer itself has begun (after the thought), so there is something to continue.
        const writing = () =>
          page().evaluate(() => {
            const turns = document.querySelectorAll('[data-testid="turn-assistant"]');
            const last = turns[turns.length - 1];
            return last?.getAttribute("data-status") === "streaming" && (last.querySelector('[data-testid="turn-content"]')?.textContent ?? "").trim().length > 0;
          });
        await expect.poll(writing, { timeout: 60_000 }).toBe(true);
        await ui.screenshot("daily-live-progress");
        await page().getByTestId("chat-stop").click();
        const answer = page().getByTestId("turn-assistant").last();
        await expect.poll(() => answer.getAttribute("data-status")).toBe("stopped");
        // The stopped answer keeps what it had: its tokens and their rate (the window's own count).
        expect(await answer.getByTestId("turn-stats").textContent()).toMatch(/≈ \d+ tokens · [\d.]+ tokens\/s/);
        const stoppedText = (await answer.getByTestId("turn-content").textContent())!;
        await ui.screenshot("daily-stopped");

        // Continue: the stopped answer is sent as the start of the answer, and the model writes on after it.
        ui.proxy.delayMs = 0;
        await page().getByTestId("chat-effort").selectOption("none");
        await answer.getByTestId("turn-continue").click();
        await expect.poll(() => page().getByTestId("turn-assistant").last().getAttribute("data-status"), { timeout: 60_000 }).toBe("done");
        const messages = chatBodies().at(-1)!.messages as Array<{ role: string; content: string }>;
        expect(messages.at(-1)).toMatchObject({ role: "assistant" });
        const words = (text: string) => text.replace(/\s+/g, " ").trim();
        expect(messages.at(-1)!.content.length).toBeGreaterThan(0);
        expect(words(stoppedText)).toContain(words(messages.at(-1)!.content).slice(0, 12));
        // The same answer, longer: not a second one.
        expect(await page().getByTestId("turn-assistant").count()).toBe(1);
        const continued = words((await page().getByTestId("turn-assistant").last().getByTestId("turn-content").textContent())!);
        expect(continued.startsWith(words(stoppedText).slice(0, 12))).toBe(true);
      } finally {
        ui.proxy.delayMs = 0;
        await page().unroute("**/v1/chat/completions");
        await page().getByTestId("chat-settings").click();
        await page().getByTestId("settings-max-tokens").fill("");
        await page().getByTestId("chat-settings").click();
      }
    });
  });

  describe("item 9: what LM Studio and Ollama users expect", () => {
    it("a model picker in the chat switches the model that answers", async () => {
      copyFileSync(inject("tinyModelPath"), join(ui.dataDir, "models", "second.gguf"));
      const picker = page().getByTestId("chat-model");
      await expect.poll(() => picker.locator("option").allTextContents(), { timeout: 10_000 }).toHaveLength(2);
      await picker.selectOption("second.gguf");
      await expect.poll(async () => ((await ui.service.status()) as StatusView).model.file, { timeout: 60_000 }).toBe("second.gguf");
      await expect.poll(() => picker.inputValue()).toBe("second.gguf");
      await expect.poll(() => page().getByTestId("status-line").textContent()).toContain("svc tiny test model");
      const answer = await ask("Which model is this?");
      expect(await answer.getAttribute("data-status")).toBe("done");
      await ui.screenshot("daily-model-picker");
    });

    it("each chat keeps its own system prompt", async () => {
      await page().getByTestId("chat-new").click();
      await page().getByTestId("chat-settings").click();
      await page().getByTestId("settings-system-prompt").fill("You are the pirate chat.");
      await ask("Ahoy?");
      expect(chatBodies().at(-1)!.messages).toEqual([
        { role: "system", content: "You are the pirate chat." },
        { role: "user", content: "Ahoy?" },
      ]);
      // A new chat starts with the default (none), not the last chat's.
      await page().getByTestId("chat-new").click();
      expect(await page().getByTestId("settings-system-prompt").inputValue()).toBe("");
      await ask("Plain question?");
      expect(chatBodies().at(-1)!.messages).toEqual([{ role: "user", content: "Plain question?" }]);
      // Back in the first chat, its prompt is back and goes with the next message.
      await page().getByTestId("chat-item").filter({ hasText: "Ahoy?" }).getByTestId("chat-open").click();
      expect(await page().getByTestId("settings-system-prompt").inputValue()).toBe("You are the pirate chat.");
      await ask("Still there?");
      expect((chatBodies().at(-1)!.messages as Array<{ role: string }>)[0]).toEqual({ role: "system", content: "You are the pirate chat." });
      await ui.screenshot("daily-system-prompt");
      await page().getByTestId("chat-settings").click();
    });

    it("reopens the last chat after a restart", async () => {
      const title = await page().locator("#chat-title").textContent();
      expect(title).toBe("Ahoy?");
      await page().reload();
      await page().getByTestId("chat-page").waitFor();
      await expect.poll(() => page().locator("#chat-title").textContent(), { timeout: 10_000 }).toBe("Ahoy?");
      expect(await page().getByTestId("turn-user").count()).toBe(2);
      expect(await page().getByTestId("settings-system-prompt").count()).toBe(0);
    });

    it("a long title is cut short on one line and never wraps the toolbar", async () => {
      await page().getByTestId("chat-new").click();
      await ask("Please compare the three quarterly reports from the northern, southern and western regional offices in detail");
      const title = page().locator("#chat-title");
      const toolbar = page().locator('[data-testid="chat-page"] header.page-header .toolbar');
      for (const size of [
        { width: 1280, height: 860 },
        { width: 800, height: 600 },
      ]) {
        await page().setViewportSize(size);
        const box = (await title.boundingBox())!;
        const bar = (await toolbar.boundingBox())!;
        // Wide, the toolbar leaves the title less room than it takes: cut short with an ellipsis.
        if (size.width === 1280) expect(await title.evaluate((el) => el.scrollWidth > el.clientWidth)).toBe(true);
        // One line, however long the title.
        expect(box.height).toBeLessThan(32);
        // Wide: the toolbar on the title's row; narrow: on its own row under it, never pushed by the title.
        if (size.width === 1280) expect(Math.abs(bar.y + bar.height / 2 - (box.y + box.height / 2))).toBeLessThan(12);
        else expect(bar.y).toBeGreaterThanOrEqual(box.y + box.height - 1);
        expect(bar.x + bar.width).toBeLessThanOrEqual(size.width);
        await ui.screenshot(`daily-long-title-${size.width}`);
      }
      await page().setViewportSize({ width: 1280, height: 860 });
    });
  });
});
