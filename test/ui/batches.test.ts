// The window's Batches page in Chromium against the real server and engine: a JSONL file dropped on the
// page becomes a batch, each batch shows its progress and counts, a batch can be canceled, its results
// downloaded (the file holds one line per request) and deleted; a file with bad lines says which. Each step's
// screenshot lands in test/.artifacts/screenshots (batches-*.png).
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startUiHarness, uiSkipReason, type UiHarness } from "./harness.js";

const skip = uiSkipReason();

const hello = (i: number) => ({ model: "claude-haiku-4-5", max_tokens: 32, messages: [{ role: "user", content: `Hello ${i}` }] });
/** Exactly `tokens` tokens of work: a forced tool call cut by max_tokens. */
const busy = (i: number, tokens: number) => ({
  model: "claude-haiku-4-5",
  max_tokens: tokens,
  messages: [{ role: "user", content: `Numbers ${i}` }],
  tools: [{ name: "numbers", input_schema: { type: "object", properties: { xs: { type: "array", items: { type: "integer" }, minItems: 200, maxItems: 200 } }, required: ["xs"] } }],
  tool_choice: { type: "tool", name: "numbers" },
});
const jsonl = (rows: unknown[]) => rows.map((r) => JSON.stringify(r)).join("\n") + "\n";

describe.skipIf(skip !== null)("the Batches page", () => {
  let ui: UiHarness;

  beforeAll(async () => {
    ui = await startUiHarness(inject("tinyModelPath"));
  });
  afterAll(async () => {
    await ui?.close();
  });

  /** Drops a file on the page as a user drags it from the file manager. */
  async function drop(name: string, text: string): Promise<void> {
    const dataTransfer = await ui.page.evaluateHandle(
      ({ name, text }) => {
        const transfer = new DataTransfer();
        transfer.items.add(new File([text], name, { type: "application/x-ndjson" }));
        return transfer;
      },
      { name, text },
    );
    await ui.page.getByTestId("batches-page").dispatchEvent("dragover", { dataTransfer });
    await ui.page.getByTestId("batches-page").dispatchEvent("drop", { dataTransfer });
  }

  const rows = () => ui.page.getByTestId("batch-row");
  const row = (id: string) => ui.page.locator(`[data-testid="batch-row"][data-batch-id="${id}"]`);

  it("creates a batch from a dropped JSONL file, shows its progress to the end, and downloads its results", async () => {
    await ui.open("batches");
    await expect.poll(() => ui.page.getByText("No batches yet.").count()).toBe(1);
    await ui.screenshot("batches-empty");

    await drop("questions.jsonl", jsonl([1, 2, 3].map((i) => ({ custom_id: `q${i}`, params: hello(i) }))));
    const draft = ui.page.getByTestId("batch-draft");
    await expect.poll(() => draft.textContent()).toMatch(/questions\.jsonl.*3 requests/);
    await ui.screenshot("batches-dropped");
    await ui.page.getByTestId("batch-create").click();

    await expect.poll(() => rows().count(), { timeout: 10_000 }).toBe(1);
    expect(await draft.count()).toBe(0);
    const id = (await rows().first().getAttribute("data-batch-id"))!;
    expect(id).toMatch(/^msgbatch_/);
    await expect.poll(() => row(id).getAttribute("data-status"), { timeout: 30_000 }).toBe("ended");
    expect(await row(id).getByTestId("batch-counts").textContent()).toBe("3 of 3 done · 3 succeeded · 0 errored · 0 canceled · 0 expired");
    expect(await row(id).getByTestId("batch-progress").evaluate((el) => [(el as HTMLProgressElement).value, (el as HTMLProgressElement).max])).toEqual([3, 3]);
    await ui.screenshot("batches-ended");

    const [download] = await Promise.all([ui.page.waitForEvent("download"), row(id).getByTestId("batch-download").click()]);
    expect(download.suggestedFilename()).toBe(`${id}_results.jsonl`);
    const lines = readFileSync((await download.path())!, "utf8").trimEnd().split("\n").map((l) => JSON.parse(l) as { custom_id: string; result: { type: string } });
    expect(lines.map((l) => [l.custom_id, l.result.type])).toEqual([["q1", "succeeded"], ["q2", "succeeded"], ["q3", "succeeded"]]);
    // What the window sent: the file's lines as the batch's requests.
    const posted = ui.proxy.requests.filter((r) => r.method === "POST" && r.path === "/v1/messages/batches");
    expect((JSON.parse(posted.at(-1)!.body) as { requests: Array<{ custom_id: string }> }).requests.map((r) => r.custom_id)).toEqual(["q1", "q2", "q3"]);
  });

  it("says which lines of a file are wrong, and creates nothing", async () => {
    const before = await rows().count();
    await drop("broken.jsonl", "this is not json\n" + jsonl([{ custom_id: "a", params: hello(1) }]));
    await expect.poll(() => ui.page.getByTestId("batch-draft-problems").textContent()).toContain("line 1: not valid JSON");
    expect(await ui.page.getByTestId("batch-create").isDisabled()).toBe(true);

    await drop("duplicates.jsonl", jsonl([{ custom_id: "a", params: hello(1) }, { custom_id: "a", params: hello(2) }, { custom_id: "b", params: { model: "svc", messages: [] } }]));
    await expect.poll(() => ui.page.getByTestId("batch-draft").textContent()).toMatch(/duplicates\.jsonl.*3 requests/);
    await ui.page.getByTestId("batch-create").click();
    const problems = ui.page.getByTestId("batch-problems");
    await expect.poll(() => problems.textContent()).toContain("line 2: custom_id 'a' is used twice (first by line 1)");
    expect(await problems.textContent()).toContain("line 3: Missing required parameter: 'params.max_tokens'.");
    expect(await ui.page.getByTestId("batches-error").locator("p").textContent()).toBe("2 of 3 requests are invalid, so no batch was created.");
    await ui.screenshot("batches-invalid-file");
    expect(await rows().count()).toBe(before);
  });

  it("shows a running batch's counts as they move, cancels it, and deletes it", async () => {
    // Enough requests that an engine build on a quiet machine cannot end them all between the first progress
    // and the cancel (120 did, 2 runs in 3); the cancel ends the rest, so more cost nothing.
    const n = 480;
    const before = await rows().count();
    const file = ui.page.getByTestId("batch-file");
    await file.setInputFiles({ name: "long.jsonl", mimeType: "application/x-ndjson", buffer: Buffer.from(jsonl(Array.from({ length: n }, (_, i) => ({ custom_id: `n${i}`, params: busy(i, 48) })))) });
    await expect.poll(() => ui.page.getByTestId("batch-draft").textContent()).toMatch(new RegExp(`${n} requests`));
    await ui.page.getByTestId("batch-create").click();
    await expect.poll(() => rows().count(), { timeout: 10_000 }).toBe(before + 1);
    const id = (await rows().first().getAttribute("data-batch-id"))!;
    // Progress while it runs: some done, not all.
    await expect
      .poll(async () => Number(new RegExp(`^(\\d+) of ${n} done`).exec((await row(id).getByTestId("batch-counts").textContent()) ?? "")?.[1] ?? 0), { timeout: 30_000 })
      .toBeGreaterThan(0);
    expect(await row(id).getAttribute("data-status")).toBe("in_progress");
    await ui.screenshot("batches-running");

    await row(id).getByTestId("batch-cancel").click();
    await expect.poll(() => row(id).getAttribute("data-status"), { timeout: 30_000 }).toBe("ended");
    const counts = (await row(id).getByTestId("batch-counts").textContent())!;
    const canceled = Number(/(\d+) canceled/.exec(counts)![1]);
    const succeeded = Number(/(\d+) succeeded/.exec(counts)![1]);
    expect(canceled).toBeGreaterThan(0);
    expect(succeeded + canceled).toBe(n);
    await ui.screenshot("batches-canceled");

    await row(id).getByTestId("batch-delete").click();
    await row(id).getByTestId("batch-delete-confirm").click();
    await expect.poll(() => row(id).count()).toBe(0);
    const key = await ui.service.windowKey();
    const gone = await fetch(`${ui.server.url}/v1/messages/batches/${id}`, { headers: { "x-api-key": key } });
    expect(gone.status).toBe(404);
    await ui.screenshot("batches-after-delete");
  });
});
