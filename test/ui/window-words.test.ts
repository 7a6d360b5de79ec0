// Issue 41, item 1: the window speaks to window users. Every message names the button or setting that fixes
// it, never a command or a flag: a disabled account's key (Keys page, Enable), a conversation too long for the
// context (Set the context, this model's setting), the Model page's note on coding agents, the Keys page's own
// account. And a scan: no page, in the states these tests leave it in, and no user-facing string of the built
// bundle names a command-line command or flag. Screenshots: words-*.png.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import type { StatusView } from "../../server/features/console/contract.js";
import { CLI_WORDS } from "./cli-words.js";
import { RENDERER_DIR, startUiHarness, uiSkipReason, type UiHarness } from "./harness.js";

const skip = uiSkipReason();

/** What the page says: its text (not the code of the Server page's examples, nor the server's log) and its labels. */
export async function pageWords(page: UiHarness["page"]): Promise<string> {
  return page.evaluate(() => {
    const root = document.body.cloneNode(true) as HTMLElement;
    // The examples are code to copy and the log is the server's own output, shown as it is.
    for (const el of root.querySelectorAll("pre, [role=log]")) el.remove();
    const labels = [...document.querySelectorAll("[placeholder], [title], [aria-label]")].flatMap((el) =>
      ["placeholder", "title", "aria-label"].map((a) => el.getAttribute(a) ?? ""),
    );
    document.body.append(root);
    root.style.position = "absolute";
    const text = root.innerText;
    root.remove();
    return `${text}\n${labels.join("\n")}`;
  });
}

describe.skipIf(skip !== null)("the window's words", () => {
  let ui: UiHarness;
  const seen: string[] = [];

  beforeAll(async () => {
    ui = await startUiHarness(inject("tinyModelPath"));
  });
  afterAll(async () => {
    await ui?.close();
  });

  async function remember(name: string) {
    seen.push(`${name}: ${await pageWords(ui.page)}`);
  }

  async function ask(text: string) {
    await ui.page.getByTestId("chat-input").fill(text);
    await ui.page.getByTestId("chat-send").click();
    const answer = ui.page.getByTestId("turn-assistant").last();
    await expect.poll(() => answer.getAttribute("data-status"), { timeout: 60_000 }).not.toBe("streaming");
    return answer;
  }

  it("a disabled account's key: the alert names the Keys page's Enable (never a command), and Enable fixes it", async () => {
    await ui.open("chat");
    await ui.page.getByTestId("chat-effort").selectOption("none");
    ui.server.accounts.disable("local");
    const failed = await ask("Hello?");
    expect(await failed.getAttribute("data-status")).toBe("error");
    const problem = failed.getByTestId("turn-error");
    expect(await problem.locator(".problem-title").textContent()).toBe("The window's account is disabled.");
    expect(await problem.textContent()).toContain("Enable the account on the Keys page");
    expect(await problem.textContent()).not.toMatch(CLI_WORDS);
    expect(await problem.textContent()).not.toMatch(/restart/i);
    await remember("chat, disabled account");
    await ui.screenshot("words-disabled-account");

    await problem.getByTestId("problem-open_keys").click();
    await ui.page.getByTestId("keys-page").waitFor();
    const local = ui.page.locator('[data-testid="account-row"][data-account="local"]');
    await expect.poll(() => local.getAttribute("data-status")).toBe("disabled");
    await remember("keys, account disabled");
    await local.getByTestId("account-enable").click();
    await expect.poll(() => local.getAttribute("data-status")).toBe("active");
    await ui.page.getByTestId("nav-chat").click();
    await ui.page.getByTestId("turn-assistant").last().getByTestId("problem-retry").click();
    await expect.poll(() => ui.page.getByTestId("turn-assistant").last().getAttribute("data-status"), { timeout: 60_000 }).toBe("done");
  });

  it("the Keys page does not offer Disable on the window's own account", async () => {
    await ui.open("keys");
    const local = ui.page.locator('[data-testid="account-row"][data-account="local"]');
    await local.waitFor();
    expect(await local.getByTestId("account-disable").count()).toBe(0);
    expect(await local.getByTestId("account-window-note").textContent()).toBe("Holds the window's key");
    await remember("keys");
  });

  it("a conversation too long for the context: its size and the context that takes it, with the button that sets it", async () => {
    await ui.open("chat");
    await ui.page.getByTestId("chat-new").click();
    // The test model's tokenizer makes about a token per character: 9,000 characters are over 4,096 tokens, though
    // the window's estimate (a token per four characters) lets them go.
    const failed = await ask(`Summarise: ${"lorem ipsum ".repeat(750)}`);
    expect(await failed.getAttribute("data-status")).toBe("error");
    const problem = failed.getByTestId("turn-error");
    expect(await problem.locator(".problem-title").textContent()).toMatch(/^This conversation is [\d,]+ tokens, more than the 4,096 this model reads at once\.$/);
    expect(await problem.textContent()).toContain("Set the context");
    expect(await problem.textContent()).not.toMatch(CLI_WORDS);
    const fix = problem.getByTestId("problem-set_context");
    expect(await fix.textContent()).toMatch(/^Set the context to [\d,]+ tokens$/);
    const figure = Number((await fix.textContent())!.replace(/\D/g, ""));
    await remember("chat, context too long");
    await ui.screenshot("words-context-too-long");

    // The button sets this model's context, the model loads again with it, and the message goes.
    await fix.click();
    await expect.poll(() => ui.page.getByTestId("turn-assistant").last().getAttribute("data-status"), { timeout: 90_000 }).toBe("done");
    const status = (await ui.service.status()) as StatusView;
    expect(status.model).toMatchObject({ contextSize: figure, settings: { contextSize: figure } });
    await ui.service.setModelSettings(null, { contextSize: null, sequences: null, gpuLayers: null, threads: null });
  });

  it("the Model page's note on coding agents: the context they need and the button that sets it", async () => {
    await ui.open("models");
    const note = ui.page.getByTestId("model-context-note");
    await expect.poll(() => note.textContent()).toMatch(/Coding agents such as Claude Code and Codex send about [\d,]+ tokens/);
    expect(await note.textContent()).not.toMatch(CLI_WORDS);
    expect(await ui.page.getByTestId("engine-build-hint").count()).toBe(0);
    await remember("models");
    await ui.screenshot("words-models");
  });

  it("the Server page's log tells the window's user the page or setting, where the server's own log names a command or flag", async () => {
    await ui.open("server");
    const log = ui.page.getByTestId("server-log");
    // The load's lines are there (the prebuilt CPU binaries, memory, coding agents' context), in window words.
    await expect.poll(() => log.textContent()).toContain("Model read into memory");
    const text = (await log.textContent())!;
    expect(text).toContain("coding agents such as Claude Code and Codex send up to about");
    expect(text).toContain("The Model page says what makes room for them.");
    expect(text.split("\n").filter((line) => CLI_WORDS.test(line))).toEqual([]);
  });

  it("no page names a command or a flag, and neither does any string of the bundle", async () => {
    for (const name of ["chat", "files", "batches", "keys", "audit", "models", "server"]) {
      await ui.open(name);
      await ui.page.waitForTimeout(300);
      await remember(name);
    }
    const offending = () => seen.flatMap((entry) => entry.split("\n").filter((line) => CLI_WORDS.test(line)).map((line) => `${entry.split(":")[0]}: ${line.trim()}`));
    expect(offending()).toEqual([]);

    // The bundle: every string the window could show, whatever state it is in.
    const assets = join(RENDERER_DIR, "assets");
    const found: string[] = [];
    for (const file of readdirSync(assets).filter((f) => f.endsWith(".js"))) {
      const code = readFileSync(join(assets, file), "utf8");
      for (const match of code.matchAll(/"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`(?:[^`\\]|\\.)*`/g))
        if (CLI_WORDS.test(match[0])) found.push(`${file}: ${match[0].slice(0, 160)}`);
    }
    expect(found).toEqual([]);

    // The Model page with a model's settings open, and the chat's settings drawer.
    await ui.open("models");
    await ui.page.getByTestId("loaded-model-settings").locator("summary").click();
    await remember("models, settings");
    await ui.open("chat");
    await ui.page.getByTestId("chat-settings").click();
    await remember("chat, settings drawer");
    await ui.page.getByTestId("chat-settings").click();
    expect(offending()).toEqual([]);
  });
});
