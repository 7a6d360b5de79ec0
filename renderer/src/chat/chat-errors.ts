// A failed chat request, in a window user's words: what happened and the button that fixes it. The API's
// own messages speak to developers (`svc models pull`, `--model PATH.gguf`); the window never shows those
// as the explanation, only as a small "server said" line.
import OpenAI from "openai";
import type { Attachment, ChatProblem } from "./types";

interface ErrorFacts {
  status: number | null;
  code: string | null;
  param: string | null;
  message: string;
  connection: boolean;
}

function factsOf(err: unknown): ErrorFacts {
  if (err instanceof OpenAI.APIConnectionError) return { status: null, code: null, param: null, message: err.message, connection: true };
  if (err instanceof OpenAI.APIError) {
    const body = (err.error ?? {}) as { code?: unknown; param?: unknown; message?: unknown };
    const message = typeof body.message === "string" ? body.message : err.message;
    return {
      status: err.status ?? null,
      code: typeof err.code === "string" ? err.code : typeof body.code === "string" ? body.code : null,
      param: typeof err.param === "string" ? err.param : typeof body.param === "string" ? body.param : null,
      message,
      connection: false,
    };
  }
  const message = err instanceof Error ? err.message : String(err);
  return { status: null, code: null, param: null, message, connection: /fetch|network|ECONNREFUSED/i.test(message) };
}

/** The file id a Files API error names (`No such file: 'file-…'`, `The file 'file-…' could not be read`). */
function fileIdIn(message: string): string | null {
  return /'(file-[^']+)'/.exec(message)?.[1] ?? null;
}

/** The attachment an error points at: by the file id it names, else by its `messages[i].content[j]` parameter. */
function attachmentOf(f: ErrorFacts, text: string, attachments: Attachment[]): Attachment | null {
  const id = fileIdIn(f.message);
  if (id) return attachments.find((a) => a.fileId === id) ?? null;
  const m = f.param ? /content\[(\d+)\]/.exec(f.param) : null;
  if (!m || attachments.length === 0) return null;
  const index = Number(m[1]) - (text ? 1 : 0);
  return attachments[index] ?? null;
}

/** The uploaded file the server no longer has (deleted, expired), when that is why a message was refused. */
export function missingFileId(err: unknown): string | null {
  const f = factsOf(err);
  return f.code === "file_not_found" || (f.status === 404 && /no such file/i.test(f.message)) ? fileIdIn(f.message) : null;
}

/**
 * `sent`: the message that failed (its text and files) and the files of the messages before it, which went
 * with the request too.
 */
export function describeChatError(err: unknown, sent: { text: string; attachments: Attachment[]; earlier?: Attachment[] }): ChatProblem {
  const f = factsOf(err);
  const server = f.message;
  if (f.connection)
    return {
      title: "The window cannot reach its server.",
      detail: "The server inside the app did not answer. If the app was just restarted, wait a moment.",
      actions: ["retry"],
      serverMessage: server,
    };
  if (f.code === "model_not_loaded" || (f.status === 503 && /no model/i.test(server)))
    return {
      title: "No model is loaded yet.",
      detail: "The chat needs a language model on this computer. Download one on the Model page (one click for the recommended one).",
      actions: ["open_models"],
      serverMessage: server,
    };
  if (f.code === "model_loading" || f.code === "model_load_failed")
    return {
      title: f.code === "model_loading" ? "The model is still loading." : "The model could not be loaded.",
      detail: f.code === "model_loading" ? "It is usually ready within a few seconds: then send the message again." : "The Model page says why and lets you pick another model.",
      actions: f.code === "model_loading" ? ["retry"] : ["open_models", "retry"],
      serverMessage: server,
    };
  if (f.status === 429)
    return { title: "The server is busy with other requests.", detail: "Try again in a moment.", actions: ["retry"], serverMessage: server };
  if (f.code === "context_length_exceeded")
    return {
      title: "This conversation is too long for the model.",
      detail: "The model reads a limited amount of text at once. Start a new chat, or edit an earlier message to shorten it.",
      actions: ["new_chat", "edit"],
      serverMessage: server,
    };
  const gone = missingFileId(err);
  if (gone !== null || f.code === "file_not_found") {
    const here = attachmentOf(f, sent.text, sent.attachments);
    const before = gone ? (sent.earlier ?? []).find((a) => a.fileId === gone) : undefined;
    if (!here && before)
      return {
        title: `${before.name}, attached earlier in this chat, is no longer on the server.`,
        detail: "It was deleted, or it expired (uploaded files are kept 30 days). It is left out from now on: send your message again.",
        actions: ["retry", "edit"],
        serverMessage: server,
      };
    return {
      title: `${here?.name ?? "An attached file"} is no longer on the server.`,
      detail: "It was deleted, or it expired (uploaded files are kept 30 days). Send the message without it, or edit the message and attach the file again.",
      actions: ["send_without_attachments", "edit"],
      serverMessage: server,
    };
  }
  const attachment = attachmentOf(f, sent.text, sent.attachments);
  if (sent.attachments.length > 0 && (attachment || f.status === 413 || f.status === 422 || /file|pdf|image|content\[/i.test(`${f.code} ${f.param} ${server}`)))
    return {
      title: attachment ? `The model cannot read ${attachment.name}.` : "The model cannot read an attached file.",
      detail:
        f.status === 422
          ? "Files holding credentials (.env, .pem, keys and certificates) are never accepted."
          : f.status === 413
            ? "The attachments are too large to send together."
            : "The server could not read what is in it, so the model would get nothing from it. Send the message without it, or attach another copy.",
      actions: ["send_without_attachments", "edit"],
      serverMessage: server,
    };
  if (f.status === 401)
    return {
      title: "The window could not sign in to its own server.",
      detail: "Its key was refused even after it made a new one. Restarting the app makes a fresh key.",
      actions: ["retry"],
      serverMessage: server,
    };
  return {
    title: f.status !== null && f.status < 500 ? "The server refused this message." : "Something went wrong while answering.",
    detail: "You can send it again, or edit it first.",
    actions: ["retry", "edit"],
    serverMessage: server,
  };
}

/** A refused key: the window asks its main process for a fresh one and sends again, once. */
export function isKeyRefused(err: unknown): boolean {
  return err instanceof OpenAI.APIError && err.status === 401;
}
