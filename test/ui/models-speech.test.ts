// The Models page's speech section in Chromium against the real server: a newcomer's voice memo gets "no
// transcript", the Files page links to the speech section, a speech model already in the data dir is listed
// and Used (the next WAV upload then has whisper.cpp's transcript), the recommended model and a typed-in one
// are pulled from loopback file servers (HF_ENDPOINT points the recommended hf: source at one) with progress,
// Stop and Resume, and models are removed with the page's confirmation. Screenshots at both sizes and themes,
// and axe. The speech models are the generated tiny whisper.cpp model (resources/test-model/tiny-whisper.ts).
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { buildTinyWhisperModel } from "../../resources/test-model/tiny-whisper.js";
import { formatBytes } from "../../server/core/format.js";
import { toneWav } from "../support/file-fixtures.js";
import { startModelServer, type ModelServer } from "../support/model-server.js";
import { startUiHarness, uiSkipReason, type UiHarness } from "./harness.js";

const skip = uiSkipReason();

const SIZES = [
  { width: 1280, height: 860 },
  { width: 800, height: 600 },
] as const;
const THEMES = ["light", "dark"] as const;

describe.skipIf(skip !== null)("speech models on the Models page", () => {
  let ui: UiHarness;
  let models: ModelServer;
  /** Hugging Face's stand-in: node-llama-cpp treats every URL on the HF endpoint as a repository's. */
  let hub: ModelServer;
  const previousEndpoint = process.env.HF_ENDPOINT;
  const present = buildTinyWhisperModel();
  const recommended = buildTinyWhisperModel({ seed: 11 });
  const other = buildTinyWhisperModel({ seed: 12 });
  let wav: Buffer;

  beforeAll(async () => {
    models = await startModelServer();
    hub = await startModelServer();
    // The recommended source, hf:ggerganov/whisper.cpp/ggml-base.bin, as Hugging Face would serve it.
    hub.files.set("/ggerganov/whisper.cpp/resolve/main/ggml-base.bin", recommended);
    models.files.set("/whisper/ggml-other.bin", other);
    ui = await startUiHarness(inject("tinyModelPath"));
    mkdirSync(join(ui.dataDir, "models", "speech"), { recursive: true });
    writeFileSync(join(ui.dataDir, "models", "speech", "ggml-tiny-test.bin"), present);
    wav = toneWav(2);
  });

  afterAll(async () => {
    await ui?.close();
    await models?.close();
    await hub?.close();
    if (previousEndpoint === undefined) delete process.env.HF_ENDPOINT;
    else process.env.HF_ENDPOINT = previousEndpoint;
  });

  const section = () => ui.page.getByTestId("speech-models");
  const row = (file: string) => ui.page.locator(`[data-testid="speech-row"][data-file="${file}"]`);
  const speechSetting = () => ui.server.store.settings.get("speech_model")?.value ?? null;

  /** Drops a WAV on the Files page and waits for its row to be read; its id. */
  async function dropVoiceMemo(name: string): Promise<string> {
    const dataTransfer = await ui.page.evaluateHandle(
      ({ name, base64 }) => {
        const dt = new DataTransfer();
        dt.items.add(new File([Uint8Array.from(atob(base64), (c) => c.charCodeAt(0))], name, { type: "audio/wav" }));
        return dt;
      },
      { name, base64: wav.toString("base64") },
    );
    await ui.page.getByTestId("files-dropzone").dispatchEvent("drop", { dataTransfer });
    const fileRow = ui.page.getByTestId("files-row").filter({ hasText: name });
    await expect.poll(() => fileRow.getByTestId("files-status").textContent().catch(() => null), { timeout: 60_000 }).toBe("ready");
    return (await fileRow.getAttribute("data-file-id"))!;
  }

  const contentOf = (id: string) => (JSON.parse(readFileSync(join(ui.dataDir, "files", id, "content.json"), "utf8")) as { text: string }).text;

  /** Waits for a download in the speech section to reach a phase; the row. */
  async function speechDownload(phase: string, timeout = 30_000) {
    const download = section().locator(`[data-testid="download"][data-phase="${phase}"]`);
    try {
      await download.waitFor({ timeout });
    } catch (err) {
      // Say where the downloads are instead (phase, figures, error), not only that none got there.
      const shown = await section()
        .getByTestId("download")
        .evaluateAll((rows) => rows.map((r) => `${r.getAttribute("data-phase")}: ${r.textContent}`))
        .catch(() => [] as string[]);
      throw new Error(`No speech download reached "${phase}" in ${timeout} ms; the section shows ${JSON.stringify(shown)}.`, { cause: err });
    }
    return download;
  }

  it("a voice memo without a speech model says so on the Files page, with a link to the Models page's speech section", async () => {
    await ui.open("files");
    const id = await dropVoiceMemo("memo.wav");
    expect(contentOf(id)).toContain("No transcript is available: this server has no speech recognition model");
    const note = ui.page.getByTestId("files-row").filter({ hasText: "memo.wav" }).getByTestId("files-no-transcript");
    expect(await note.textContent()).toBe("No speech model is in use: audio and video uploaded now get no transcript. Set one up");
    // Text files never need one: no note on them.
    await ui.page.getByTestId("files-pick").setInputFiles({ name: "plan.txt", mimeType: "text/plain", buffer: Buffer.from("Step one.") });
    await expect.poll(() => ui.page.getByTestId("files-row").count(), { timeout: 30_000 }).toBe(2);
    expect(await ui.page.getByTestId("files-no-transcript").count()).toBe(1);
    await ui.screenshot("files-no-transcript");

    await note.getByTestId("files-get-speech-model").click();
    await ui.page.getByTestId("models-page").waitFor();
    expect(new URL(ui.page.url()).hash).toBe("#/models/speech");
    // The page opens at the speech section: its heading has the focus and is on screen.
    await expect.poll(() => ui.page.evaluate(() => document.activeElement?.id)).toBe("speech-title");
    const { top, bottom, height } = await ui.page.evaluate(() => ({ ...document.getElementById("speech-title")!.getBoundingClientRect().toJSON(), height: innerHeight }));
    expect(top).toBeGreaterThanOrEqual(0);
    expect(bottom).toBeLessThanOrEqual(height);
  });

  it("lists the speech model in the data dir; Use makes it the one uploads are transcribed with", async () => {
    await row("ggml-tiny-test.bin").waitFor();
    expect(await row("ggml-tiny-test.bin").getAttribute("data-active")).toBe("false");
    expect(await row("ggml-tiny-test.bin").getByTestId("speech-size").textContent()).toBe(formatBytes(present.length));
    expect(await row("ggml-tiny-test.bin").textContent()).toContain("Whisper (F32)");
    expect(await ui.page.getByTestId("speech-none-in-use").textContent()).toContain("No speech model is in use, so uploads get no transcript");
    expect(await ui.page.getByTestId("speech-empty").count()).toBe(0);

    await row("ggml-tiny-test.bin").getByTestId("speech-use").click();
    await expect.poll(() => row("ggml-tiny-test.bin").getAttribute("data-active")).toBe("true");
    expect(await row("ggml-tiny-test.bin").locator(".badge").textContent()).toBe("in use");
    expect(await row("ggml-tiny-test.bin").getByTestId("speech-use").count()).toBe(0);
    expect(await ui.page.getByTestId("speech-none-in-use").count()).toBe(0);
    expect(speechSetting()).toBe("ggml-tiny-test.bin");

    await ui.open("files");
    const id = await dropVoiceMemo("memo-again.wav");
    const content = contentOf(id);
    expect(content).toMatch(/^Audio: 2\.0 seconds, audio pcm_s16le\.\n\nTranscript \(speech recognition by whisper model \(English\), language en; it can mishear\):\n\[0:0\d–0:0\d\] [a-z]+/);
    expect(content).not.toContain("No transcript");
    expect(await ui.page.getByTestId("files-no-transcript").count()).toBe(0);
  });

  it("refuses a source that is no speech model, in the speech section", async () => {
    await ui.open("models");
    await ui.page.getByTestId("speech-source").fill("hf:someone/llama/model-q4.gguf");
    await ui.page.getByTestId("speech-download-start").click();
    await ui.page.getByTestId("speech-error").waitFor({ timeout: 5_000 });
    expect(await ui.page.getByTestId("speech-error").textContent()).toContain("is not a speech model source: a .gguf file is a language model");
    expect(await ui.page.getByTestId("models-error").count()).toBe(0);
  });

  it("pulls a typed-in speech model with progress, stops it and resumes it", async () => {
    models.bytesPerSecond = 250_000;
    await ui.page.getByTestId("speech-source").fill(`${models.url}/whisper/ggml-other.bin`);
    await ui.page.getByTestId("speech-download-start").click();
    const running = await speechDownload("downloading").catch(async (err) => {
      throw new Error(`${(err as Error).message}\n${await section().textContent()}`);
    });
    await expect.poll(() => running.getByTestId("download-figures").textContent(), { timeout: 20_000 }).toMatch(/^[1-9]\d?% · .* of 4\.29 MB · /);
    // The language models' Downloads card is not where a speech model's download goes.
    expect(await ui.page.getByTestId("downloads").count()).toBe(0);
    await running.getByTestId("download-cancel").click();
    const stopped = await speechDownload("cancelled");
    expect(await stopped.getByTestId("download-retry").textContent()).toBe("Resume");
    models.bytesPerSecond = null;
    await stopped.getByTestId("download-retry").click();
    await speechDownload("done", 60_000);
    await row("ggml-other.bin").waitFor();
    expect(readFileSync(join(ui.dataDir, "models", "speech", "ggml-other.bin")).equals(other)).toBe(true);
    // Pulled while another is in use: listed, not made the speech model.
    expect(await row("ggml-other.bin").getAttribute("data-active")).toBe("false");
    expect(speechSetting()).toBe("ggml-tiny-test.bin");
    await section().getByTestId("download-dismiss").click();
    await expect.poll(() => section().getByTestId("download").count()).toBe(0);
  });

  it("pulls the recommended speech model with one press", async () => {
    hub.bytesPerSecond = 1_500_000;
    // Only for this pull: with HF_ENDPOINT set, node-llama-cpp's downloader takes every URL for a Hugging Face one.
    process.env.HF_ENDPOINT = hub.url;
    expect(await ui.page.getByTestId("speech-recommended").textContent()).toBe("Whisper base (multilingual) recommended · about 148 MB Download");
    await ui.page.getByTestId("speech-recommended-download").click();
    const running = await speechDownload("downloading");
    expect(await running.locator(".download-title").textContent()).toContain("ggml-base.bin");
    expect(await ui.page.getByTestId("speech-recommended-download").isDisabled()).toBe(true);
    // (Within the test's own 60 s, so that a download that never ends says where it stopped.)
    await speechDownload("done", 45_000);
    await row("ggml-base.bin").waitFor();
    expect(readFileSync(join(ui.dataDir, "models", "speech", "ggml-base.bin")).equals(recommended)).toBe(true);
    expect(hub.requests.some((r) => r.path === "/ggerganov/whisper.cpp/resolve/main/ggml-base.bin")).toBe(true);
    // Downloaded, not in use: the recommended line offers Use now.
    await ui.page.getByTestId("speech-recommended-use").waitFor();
    delete process.env.HF_ENDPOINT;
  });

  for (const theme of THEMES)
    for (const size of SIZES)
      it(`${theme}, ${size.width}x${size.height}: the speech section, screenshots and no serious or critical axe violation`, async () => {
        await ui.page.setViewportSize(size);
        await ui.page.getByTestId("theme-switch").selectOption(theme);
        await ui.open("models");
        await row("ggml-base.bin").waitFor();
        // The window scrolls inside its content pane: bring the whole section (its end) on screen.
        await section().evaluate((el) => el.scrollIntoView({ block: "end" }));
        await ui.page.screenshot({ path: `${ui.screenshotsDir}/models-speech-${size.width}x${size.height}-${theme}.png` });
        expect(await ui.axe()).toEqual([]);
        expect(ui.pageErrors).toEqual([]);
      });

  it("removes speech models with the page's confirmation, the one in use too; then explains what one is for", async () => {
    await ui.page.setViewportSize(SIZES[0]);
    await ui.page.getByTestId("theme-switch").selectOption("light");
    await ui.open("models");
    await row("ggml-base.bin").getByTestId("speech-remove").click();
    expect(await row("ggml-base.bin").locator(".actions").textContent()).toContain("Delete the file?");
    await row("ggml-base.bin").getByRole("button", { name: "Keep" }).click();
    expect(existsSync(join(ui.dataDir, "models", "speech", "ggml-base.bin"))).toBe(true);
    await row("ggml-base.bin").getByTestId("speech-remove").click();
    await row("ggml-base.bin").getByTestId("speech-remove-confirm").click();
    await expect.poll(() => row("ggml-base.bin").count()).toBe(0);
    expect(existsSync(join(ui.dataDir, "models", "speech", "ggml-base.bin"))).toBe(false);

    // The one in use: the confirmation says what removing it means.
    await row("ggml-tiny-test.bin").getByTestId("speech-remove").click();
    expect(await row("ggml-tiny-test.bin").locator(".actions").textContent()).toContain("Delete the file? Uploads get no transcript until another is chosen.");
    await row("ggml-tiny-test.bin").getByTestId("speech-remove-confirm").click();
    await expect.poll(() => row("ggml-tiny-test.bin").count()).toBe(0);
    expect(existsSync(join(ui.dataDir, "models", "speech", "ggml-tiny-test.bin"))).toBe(false);
    expect(speechSetting()).toBeNull();
    await ui.page.getByTestId("speech-none-in-use").waitFor();

    await row("ggml-other.bin").getByTestId("speech-remove").click();
    await row("ggml-other.bin").getByTestId("speech-remove-confirm").click();
    const empty = ui.page.getByTestId("speech-empty");
    await empty.waitFor();
    expect(await empty.textContent()).toBe(
      "No speech model yet, so audio and video uploads get no transcript: the model is told that what is said in them is unknown, and invents nothing." +
        "Get one below: Whisper base (multilingual) is about 148 MB and hears many languages. Text, PDFs, images and code never need one.",
    );
    await section().getByTestId("download-dismiss").click();
    await expect.poll(() => section().getByTestId("download").count()).toBe(0);
    await section().evaluate((el) => el.scrollIntoView({ block: "end" }));
    await ui.page.screenshot({ path: `${ui.screenshotsDir}/models-speech-empty-1280x860-light.png` });
    for (const theme of THEMES) {
      await ui.page.getByTestId("theme-switch").selectOption(theme);
      expect(await ui.axe()).toEqual([]);
    }
    expect(ui.pageErrors).toEqual([]);
  });
});
