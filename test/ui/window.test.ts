// The window in Chromium against the real server and engine: chat (streaming text and reasoning, stop, fast
// against thinking), keys (shown once, revoked → 401), the model page (loaded model, GPU, a download's
// progress from a loopback file server) and the server page (its snippets run as shown). Each page's
// screenshot lands in test/.artifacts/screenshots.
import { execFile } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { buildTinyModel } from "../../resources/test-model/tiny-model.js";
import { localBuildKind } from "../../server/engine/engine-build.js";
import { loadLlamaRuntime } from "../../server/engine/llama-runtime.js";
import { startModelServer, type ModelServer } from "../support/model-server.js";
import { ROOT } from "../support/svc-process.js";
import { startUiHarness, uiSkipReason, type UiHarness } from "./harness.js";

const run = promisify(execFile);
const skip = uiSkipReason();

describe.skipIf(skip !== null)("the desktop window", () => {
  let ui: UiHarness;
  let files: ModelServer;

  beforeAll(async () => {
    ui = await startUiHarness(inject("tinyModelPath"));
    files = await startModelServer();
  });

  afterAll(async () => {
    await files?.close();
    await ui?.close();
  });

  async function ask(text: string): Promise<void> {
    await ui.page.getByTestId("chat-input").fill(text);
    await ui.page.getByTestId("chat-send").click();
  }

  async function lastAnswerSettled() {
    const answer = ui.page.getByTestId("turn-assistant").last();
    await expect.poll(() => answer.getAttribute("data-status"), { timeout: 30_000 }).not.toBe("streaming");
    return answer;
  }

  function chatBodies(): Array<Record<string, unknown>> {
    return ui.proxy.requests.filter((r) => r.method === "POST" && r.path === "/v1/chat/completions").map((r) => JSON.parse(r.body) as Record<string, unknown>);
  }

  describe("chat", () => {
    it("streams an answer with its reasoning shown apart in thinking mode", async () => {
      await ui.open("chat");
      await ui.page.getByTestId("chat-effort").selectOption("low");
      await ask("Tell me about the weather.");
      const answer = await lastAnswerSettled();
      expect(await answer.getAttribute("data-status")).toBe("done");
      const reasoning = answer.getByTestId("turn-reasoning-text");
      expect((await reasoning.textContent())!.trim().length).toBeGreaterThan(0);
      expect((await answer.getByTestId("turn-content").textContent())!.trim().length).toBeGreaterThan(0);
      // Collapsible: closed once the answer is done, opens on a click.
      const details = answer.getByTestId("turn-reasoning");
      expect(await details.evaluate((el) => (el as HTMLDetailsElement).open)).toBe(false);
      await details.locator("summary").click();
      expect(await details.evaluate((el) => (el as HTMLDetailsElement).open)).toBe(true);
      const body = chatBodies().at(-1)!;
      expect(body).toMatchObject({ model: "svc", stream: true, reasoning_effort: "low" });
      expect(body.messages).toEqual([{ role: "user", content: "Tell me about the weather." }]);
      await ui.screenshot("chat-thinking");
    });

    it("answers without reasoning in fast mode, and sends the conversation so far", async () => {
      await ui.page.getByTestId("chat-effort").selectOption("none");
      await ask("And tomorrow?");
      const answer = await lastAnswerSettled();
      expect(await answer.getAttribute("data-status")).toBe("done");
      expect(await answer.getByTestId("turn-reasoning").count()).toBe(0);
      expect((await answer.getByTestId("turn-content").textContent())!.trim().length).toBeGreaterThan(0);
      const body = chatBodies().at(-1)!;
      expect(body.reasoning_effort).toBe("none");
      const messages = body.messages as Array<{ role: string }>;
      expect(messages.map((m) => m.role)).toEqual(["user", "assistant", "user"]);
      await ui.screenshot("chat-fast");
    });

    it("stops a stream with the stop button", async () => {
      await ui.page.getByTestId("chat-new").click();
      // Thinking mode: the thought and then the answer make enough events that the stream is surely still
      // running when the first of them shows.
      await ui.page.getByTestId("chat-effort").selectOption("medium");
      ui.proxy.delayMs = 100;
      try {
        await ask("Write a long story.");
        const answer = ui.page.getByTestId("turn-assistant").last();
        await expect.poll(async () => ((await answer.textContent()) ?? "").trim().length, { timeout: 20_000 }).toBeGreaterThan(0);
        expect(await answer.getAttribute("data-status")).toBe("streaming");
        // The request streaming this answer, taken before the stop (a later request cannot stand in for it).
        const request = ui.proxy.requests.filter((r) => r.method === "POST" && r.path === "/v1/chat/completions").at(-1)!;
        expect(request.ended).toBe(false);
        await ui.page.getByTestId("chat-stop").click();
        await expect.poll(() => answer.getAttribute("data-status")).toBe("stopped");
        await ui.page.getByTestId("turn-stopped").waitFor();
        // The browser closes the connection; under a loaded machine that can take more than a second.
        await expect.poll(() => request.clientAborted, { timeout: 10_000 }).toBe(true);
        expect(request.ended).toBe(false);
        const textAtStop = await answer.textContent();
        await new Promise((r) => setTimeout(r, 600));
        expect(await answer.textContent()).toBe(textAtStop);
        // The server ended the generation when the client went away.
        await expect.poll(async () => ((await (await fetch(`${ui.server.url}/health`)).json()) as { requests: { active: number } }).requests.active).toBe(0);
        await expect(ui.page.getByTestId("chat-send")).toBeTruthy();
        await ui.screenshot("chat-stopped");
      } finally {
        ui.proxy.delayMs = 0;
      }
    });

    it("renders markdown and code, and never runs HTML from the model", async () => {
      ui.proxy.cannedAnswer = [
        "# Plan",
        "",
        "Some **bold** text and `inline code`.",
        "",
        "```js",
        "const answer = 42;",
        "```",
        "",
        '<img src="x" onerror="window.__pwned = 1"><script>window.__pwned = 2</script><a href="javascript:window.__pwned=3">link</a>',
      ].join("\n");
      await ask("Show me markdown.");
      const answer = await lastAnswerSettled();
      const content = answer.getByTestId("turn-content");
      expect(await content.locator("h1").textContent()).toBe("Plan");
      expect(await content.locator("strong").textContent()).toBe("bold");
      expect(await content.locator("pre code").textContent()).toContain("const answer = 42;");
      expect(await content.locator("script").count()).toBe(0);
      expect(await content.locator("img").evaluateAll((imgs) => imgs.map((i) => i.getAttribute("onerror")))).toEqual([null]);
      expect(await content.locator("a").evaluateAll((links) => links.map((a) => a.getAttribute("href")))).toEqual([null]);
      await content.locator("a").click().catch(() => undefined);
      expect(await ui.page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned)).toBeUndefined();
    });

    it("attaches a dropped file and sends it with the message", async () => {
      await ui.page.getByTestId("chat-new").click();
      await ui.page.getByTestId("chat-effort").selectOption("none");
      const dataTransfer = await ui.page.evaluateHandle(() => {
        const dt = new DataTransfer();
        dt.items.add(new File(["The launch code is 4711."], "notes.txt", { type: "text/plain" }));
        return dt;
      });
      await ui.page.getByTestId("chat-page").dispatchEvent("drop", { dataTransfer });
      const chip = ui.page.getByTestId("chat-attachment");
      await expect.poll(() => chip.getAttribute("data-state"), { timeout: 30_000 }).toBe("ready");
      expect(await chip.textContent()).toMatch(/notes\.txt.*Text · ≈ \d+ tokens/);
      const stored = ui.server.store.db.prepare("SELECT id, filename FROM files").all() as Array<{ id: string; filename: string }>;
      expect(stored.map((f) => f.filename)).toContain("notes.txt");
      await ask("What is in the file?");
      const answer = await lastAnswerSettled();
      expect(await answer.getAttribute("data-status")).toBe("done");
      const content = (chatBodies().at(-1)!.messages as Array<{ content: unknown }>)[0]!.content as Array<Record<string, unknown>>;
      expect(content[0]).toEqual({ type: "text", text: "What is in the file?" });
      expect(content[1]).toEqual({ type: "file", file: { file_id: stored.find((f) => f.filename === "notes.txt")!.id } });
    });

    it("exports the conversation as JSON", async () => {
      const [download] = await Promise.all([ui.page.waitForEvent("download"), ui.page.getByTestId("chat-export").click()]);
      expect(download.suggestedFilename()).toMatch(/^svc-chat-.*\.json$/);
      const saved = JSON.parse(readFileSync((await download.path())!, "utf8")) as { messages: Array<Record<string, unknown>> };
      expect(saved.messages[0]).toMatchObject({ role: "user", content: "What is in the file?", attachments: [{ name: "notes.txt", type: "text/plain", file_id: expect.stringMatching(/^file-/) }] });
      expect(saved.messages[1]).toMatchObject({ role: "assistant" });
      expect(String(saved.messages[1]!.content).length).toBeGreaterThan(0);
    });

    it("saves an attachment's name, type, size and file id with the chat, never its content, and shows it again", async () => {
      const fileId = (ui.server.store.db.prepare("SELECT id FROM files WHERE filename = 'notes.txt'").get() as { id: string }).id;
      const readSaved = () =>
        ui.page.evaluate(
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
        );
      await expect.poll(async () => JSON.stringify(await readSaved())).toContain(fileId);
      const chats = (await readSaved()) as Array<{ turns: Array<{ content: string; attachments: unknown[] }> }>;
      const turn = chats.flatMap((c) => c.turns).find((t) => t.content === "What is in the file?")!;
      expect(turn.attachments).toEqual([{ name: "notes.txt", type: "text/plain", size: 24, fileId, kind: "text", tokens: expect.any(Number) }]);
      expect(JSON.stringify(chats)).not.toContain("launch code");
      expect(JSON.stringify(chats)).not.toContain("base64");

      await ui.page.reload();
      await ui.page.getByTestId("chat-page").waitFor();
      await ui.page.getByTestId("chat-item").filter({ hasText: "What is in the file?" }).locator(".chat-open").click();
      const chip = ui.page.getByTestId("turn-attachment").getByTestId("attachment-chip");
      await expect.poll(() => chip.getAttribute("data-state")).toBe("ready");
      expect(await chip.textContent()).toMatch(/notes\.txt.*Text · ≈ \d+ tokens/);
      await ui.page.getByTestId("chat-input").fill("And again?");
      await ui.page.getByTestId("chat-send").click();
      expect(await (await lastAnswerSettled()).getAttribute("data-status")).toBe("done");
      const first = (chatBodies().at(-1)!.messages as Array<{ content: unknown }>)[0]!.content;
      expect(first).toEqual([
        { type: "text", text: "What is in the file?" },
        { type: "file", file: { file_id: fileId } },
      ]);
    });
  });

  describe("keys", () => {
    it("creates a key shown once, and revokes it so the API refuses it", async () => {
      await ui.open("keys");
      await ui.page.getByTestId("key-name").fill("my editor");
      await ui.page.getByTestId("key-create").click();
      const key = (await ui.page.getByTestId("key-value").textContent())!.trim();
      expect(key).toMatch(/^sk-svc-[0-9a-f]{32}$/);
      await ui.screenshot("keys-created");

      const chat = async () =>
        (
          await fetch(`${ui.server.url}/v1/chat/completions`, {
            method: "POST",
            headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
            body: JSON.stringify({ model: "svc", messages: [{ role: "user", content: "hi" }], reasoning_effort: "none", max_tokens: 5 }),
          })
        ).status;
      expect(await chat()).toBe(200);

      await ui.page.getByTestId("key-done").click();
      expect(await ui.page.content()).not.toContain(key);
      const row = ui.page.getByTestId("key-row").filter({ hasText: "my editor" });
      await expect.poll(() => row.textContent()).toContain(`sk-svc-…${key.slice(-4)}`);
      // Leaving and coming back does not bring the key back.
      await ui.open("server");
      await ui.open("keys");
      expect(await ui.page.content()).not.toContain(key);

      // The reasoning-trace flag, switched from the table, is what the server reads for this key.
      await row.getByRole("checkbox", { name: "Reasoning trace" }).click();
      await expect.poll(async () => (await ui.service.listKeys()).find((k) => k.name === "my editor")?.reasoningTrace).toBe(true);
      await expect.poll(() => row.getByRole("checkbox", { name: "Reasoning trace" }).isChecked()).toBe(true);

      await row.getByTestId("key-revoke").click();
      await row.getByTestId("key-revoke-confirm").click();
      await expect.poll(() => ui.page.getByTestId("key-row").filter({ hasText: "my editor" }).count()).toBe(0);
      expect(await chat()).toBe(401);
      await ui.screenshot("keys");
    });
  });

  describe("model page", () => {
    it("shows the loaded model, the GPU choice, and a download's progress", async () => {
      await ui.open("models");
      const modelFile = basename(inject("tinyModelPath"));
      await expect.poll(() => ui.page.getByTestId("model-loaded").textContent()).toContain(modelFile);
      await expect.poll(() => ui.page.getByTestId("model-state").textContent()).toContain("Ready");
      await expect.poll(() => ui.page.getByTestId("gpu-backend").textContent()).toContain("CPU only");
      // Which llama.cpp binaries run: the prebuilt ones unless one was built on this machine.
      const runtime = await loadLlamaRuntime("cpu");
      expect(await ui.page.getByTestId("gpu-backend").textContent()).toContain(
        runtime.buildType !== "localBuild"
          ? "· prebuilt llama.cpp"
          : localBuildKind(runtime) === "addon"
            ? "· prebuilt llama.cpp with svc's addon built on this machine"
            : "· llama.cpp built on this machine",
      );
      // The engine-build advice is a command-line step: the log has it, the window does not.
      expect(await ui.page.getByTestId("engine-build-hint").count()).toBe(0);
      expect(await ui.page.getByTestId("gpu-choice").inputValue()).toBe("cpu");
      // The harness's 4096-token context is too short for coding agents: the page says so, and the button
      // that fixes it (no command-line flag).
      const note = await ui.page.getByTestId("model-context-note").textContent();
      expect(note).toMatch(/Coding agents/);
      expect(await ui.page.getByTestId("model-context-fix").textContent()).toMatch(/^Set the context to [\d,]+ tokens$/);
      expect(note).not.toMatch(/--|SVC_|svc /);

      const model = buildTinyModel({ seed: 11 });
      files.files.set("/models/downloaded.gguf", model);
      files.bytesPerSecond = Math.ceil(model.length / 4); // about four seconds
      await ui.page.getByTestId("download-source").fill(`${files.url}/models/downloaded.gguf`);
      await ui.page.getByTestId("download-start").click();
      const download = ui.page.getByTestId("download").first();
      await expect
        .poll(async () => Number(/(\d+)%/.exec((await download.getByTestId("download-figures").textContent()) ?? "")?.[1] ?? -1), { timeout: 20_000 })
        .toBeGreaterThan(0);
      const midway = Number(/(\d+)%/.exec((await download.getByTestId("download-figures").textContent())!)![1]);
      expect(midway).toBeLessThan(100);
      expect(await download.getAttribute("data-phase")).toBe("downloading");
      await ui.screenshot("models-downloading");
      await expect.poll(() => download.getAttribute("data-phase"), { timeout: 30_000 }).toBe("done");
      await expect.poll(() => ui.page.getByTestId("model-row").filter({ hasText: "downloaded.gguf" }).count()).toBe(1);
      expect(await download.getByTestId("download-progress").evaluate((el) => (el as HTMLProgressElement).value)).toBe(100);
      await ui.screenshot("models");
    });
  });

  describe("server page", () => {
    it("shows the base URLs and snippets that run as shown", async () => {
      await ui.open("server");
      expect(await ui.page.getByTestId("openai-base-url").textContent()).toBe(`${ui.apiUrl}/v1`);
      expect(await ui.page.getByTestId("anthropic-base-url").textContent()).toBe(ui.apiUrl);
      expect(await ui.page.getByTestId("lan-switch").isChecked()).toBe(false);
      await expect.poll(() => ui.page.getByTestId("server-log").textContent()).toContain("Downloaded downloaded.gguf");
      await ui.screenshot("server");

      const key = (await ui.service.createKey({ name: "snippets" })).key;
      const env = { ...process.env, SVC_API_KEY: key };
      const dir = join(ROOT, "test", ".artifacts", "snippets");
      mkdirSync(dir, { recursive: true });
      const tabs: Record<string, string> = {
        "curl-chat": "bash",
        "curl-messages": "bash",
        "openai-node": "javascript",
        "anthropic-node": "javascript",
        "python-stdlib": "python",
        "openai-python": "python",
        "anthropic-python": "python",
      };
      for (const [id, tab] of Object.entries(tabs)) {
        await ui.page.getByTestId(`snippet-tab-${tab}`).click();
        const code = (await ui.page.getByTestId(`snippet-${id}`).textContent())!;
        const language = await ui.page.getByTestId(`snippet-${id}`).getAttribute("data-language");
        let stdout: string;
        if (language === "python") {
          const file = join(dir, `${id}.py`);
          writeFileSync(file, code);
          // The SDK snippets need `pip install openai` / `anthropic`, which this machine cannot fetch (no PyPI):
          // they are compiled, and run where the package is importable; the no-package one always runs.
          const sdk = id === "python-stdlib" ? null : id.startsWith("openai") ? "openai" : "anthropic";
          const importable = sdk === null || (await run("python3", ["-c", `import ${sdk}`]).then(() => true, () => false));
          if (!importable) {
            await run("python3", ["-m", "py_compile", file]);
            console.warn(`${id}: compiled only (python3 cannot import ${sdk} here).`);
            continue;
          }
          ({ stdout } = await run("python3", [file], { env, timeout: 60_000 }));
          expect(stdout.trim().length, id).toBeGreaterThan(0);
        } else if (language === "bash") {
          ({ stdout } = await run("bash", ["-c", code], { env, timeout: 60_000 }));
          const body = JSON.parse(stdout) as { type?: string; object?: string; error?: unknown };
          expect(body.error, `${id}: ${stdout}`).toBeUndefined();
          expect(body.object ?? body.type, id).toBe(id === "curl-chat" ? "chat.completion" : "message");
        } else {
          // Saved under the project, so `import "openai"` resolves as it does after `npm install openai`.
          const file = join(dir, `${id}.mjs`);
          writeFileSync(file, code);
          ({ stdout } = await run(process.execPath, [file], { env, timeout: 60_000 }));
          expect(stdout.trim().length, id).toBeGreaterThan(0);
        }
      }
    });

    it("keeps the LAN switch off by default and saves it for the next start", async () => {
      await ui.page.getByTestId("lan-switch").click();
      await expect.poll(() => ui.page.getByTestId("lan-switch").isChecked()).toBe(true);
      await expect.poll(() => ui.page.getByTestId("lan-state").textContent()).toContain("applies when the app restarts");
      expect(ui.server.store.settings.get("lan_exposure")?.value).toBe("on");
      await ui.page.getByTestId("lan-switch").click();
      await expect.poll(() => ui.page.getByTestId("lan-switch").isChecked()).toBe(false);
      await expect.poll(() => ui.server.store.settings.get("lan_exposure")?.value).toBe("off");
    });
  });

  it("has a place for batches, and a screenshot of each page", async () => {
    for (const name of ["files", "batches", "chat"]) {
      await ui.open(name);
      await ui.screenshot(name);
    }
  });
});
