// A failed chat request, in a window user's words: what happened and the button that fixes it. The API's own
// messages speak to developers and name command-line flags; the window never shows them: it reads the
// error's code and facts (svc_context for a context too short) and says what to press.
import OpenAI from "openai";
import type { ContextErrorFacts } from "../../../server/features/console/wire";
import { ApiError, isWindowAccountDisabled } from "../api/http";
import { contextFigure, formatTokens } from "./context-fit";
import type { Attachment, ChatProblem } from "./types";

interface ErrorFacts {
  status: number | null;
  code: string | null;
  param: string | null;
  message: string;
  connection: boolean;
  context: ContextErrorFacts | null;
  requestId: string | null;
}

function factsOf(err: unknown): ErrorFacts {
  if (err instanceof OpenAI.APIConnectionError) return { status: null, code: null, param: null, message: err.message, connection: true, context: null, requestId: null };
  if (err instanceof OpenAI.APIError) {
    const body = (err.error ?? {}) as { code?: unknown; param?: unknown; message?: unknown; svc_context?: ContextErrorFacts };
    return {
      status: err.status ?? null,
      code: typeof err.code === "string" ? err.code : typeof body.code === "string" ? body.code : null,
      param: typeof err.param === "string" ? err.param : typeof body.param === "string" ? body.param : null,
      message: typeof body.message === "string" ? body.message : err.message,
      connection: false,
      context: body.svc_context ?? null,
      requestId: err.requestID ?? null,
    };
  }
  if (err instanceof ApiError)
    return { status: err.status || null, code: err.code, param: null, message: err.message, connection: err.status === 0, context: err.context, requestId: err.requestId };
  const message = err instanceof Error ? err.message : String(err);
  return { status: null, code: null, param: null, message, connection: /fetch|network|ECONNREFUSED/i.test(message), context: null, requestId: null };
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

function referenceOf(f: ErrorFacts): string | undefined {
  const parts = [f.status ? `HTTP ${f.status}` : null, f.code, f.requestId ? `request ${f.requestId}` : null].filter(Boolean);
  return parts.length ? parts.join(" · ") : undefined;
}

/** The loaded model's context facts, for an error that came without them. */
export interface ModelContext {
  contextSize: number | null;
  trainContextSize: number | null;
}

/** A prompt longer than the context: whether a file or the conversation is why, and the fix that fits. */
function contextProblem(f: ErrorFacts, sent: { attachments: Attachment[] }, model: ModelContext): ChatProblem {
  const facts = f.context;
  const contextSize = facts?.context_size ?? model.contextSize ?? 0;
  const train = facts?.train_context_size || model.trainContextSize || 0;
  const biggest = [...sent.attachments].sort((a, b) => (b.tokens ?? 0) - (a.tokens ?? 0))[0];
  const fileAlone = biggest?.tokens !== undefined && biggest.tokens >= contextSize;
  const prompt = facts?.prompt_tokens ?? null;
  const title = fileAlone
    ? `${biggest.name} alone is about ${formatTokens(biggest.tokens!)} tokens, more than the ${formatTokens(contextSize)} this model reads at once.`
    : prompt !== null
      ? `This conversation is ${formatTokens(prompt)} tokens, more than the ${formatTokens(contextSize)} this model reads at once.`
      : `This conversation is longer than the ${formatTokens(contextSize)} tokens this model reads at once.`;
  const shorten = fileAlone ? "Send the message without the file, or attach a shorter part of it." : "Start a new chat, or edit an earlier message to shorten it.";
  const reshape = fileAlone ? (["send_without_attachments", "edit"] as const) : (["new_chat", "edit"] as const);
  const remedy = facts?.remedy ?? null;
  const figure = remedy?.figure ?? contextFigure(Math.max(prompt ?? 0, fileAlone ? biggest.tokens! : 0, contextSize + 1), train);
  const reason = remedy?.reason ?? (figure === null ? "training" : "setting");
  const base = { title, reference: referenceOf(f) };
  switch (reason) {
    case "training":
      return {
        ...base,
        detail: `This model was trained on ${formatTokens(train)} tokens, so no setting lets it read more. ${shorten} A model trained on longer texts can take it (Model page).`,
        actions: [...reshape, "open_models"],
      };
    case "memory":
      return {
        ...base,
        detail: `The free memory holds a context of at most ${formatTokens(remedy?.reason === "memory" ? remedy.room : contextSize)} tokens with this model. ${shorten} Closing other programs, or a smaller model (Model page), leaves room for more.`,
        actions: [...reshape, "open_models"],
      };
    case "sequences":
      return {
        ...base,
        detail: `The free memory holds a context of ${formatTokens(figure!)} tokens only for fewer answers at once than the server runs. ${shorten} The model's settings (Model page) set its context.`,
        actions: [...reshape, "open_model_settings"],
      };
    default:
      return {
        ...base,
        detail: `A context of ${formatTokens(figure!)} tokens takes it: "Set the context" reloads the model with it (this model's settings, Model page). ${shorten}`,
        actions: ["set_context", ...reshape],
        contextFigure: figure!,
      };
  }
}

/**
 * `sent`: the message that failed (its text and files) and the files of the messages before it, which went
 * with the request too. `model`: the loaded model's context, for an error that does not carry it.
 */
export function describeChatError(
  err: unknown,
  sent: { text: string; attachments: Attachment[]; earlier?: Attachment[] },
  model: ModelContext = { contextSize: null, trainContextSize: null },
): ChatProblem {
  if (isWindowAccountDisabled(err))
    return {
      title: "The window's account is disabled.",
      detail: "The 'local' account holds the window's key, so the server refuses it. Enable the account on the Keys page (Accounts, 'local', Enable), then send again.",
      actions: ["open_keys", "retry"],
      reference: "window_account_disabled",
    };
  const f = factsOf(err);
  const reference = referenceOf(f);
  if (f.connection)
    return {
      title: "The window cannot reach its server.",
      detail: "The server inside the app did not answer. If the app was just restarted, wait a moment and try again.",
      actions: ["retry"],
      reference,
    };
  if (f.code === "model_not_loaded" || (f.status === 503 && /no model/i.test(f.message)))
    return {
      title: "No model is loaded yet.",
      detail: "The chat needs a language model on this computer. Download one on the Model page (one click for the recommended one).",
      actions: ["open_models"],
      reference,
    };
  if (f.code === "model_loading" || f.code === "model_load_failed")
    return {
      title: f.code === "model_loading" ? "The model is still loading." : "The model could not be loaded.",
      detail: f.code === "model_loading" ? "It is usually ready within a few seconds: then send the message again." : "The Model page says why and lets you pick another model.",
      actions: f.code === "model_loading" ? ["retry"] : ["open_models", "retry"],
      reference,
    };
  if (f.status === 429) return { title: "The server is busy with other requests.", detail: "Try again in a moment.", actions: ["retry"], reference };
  if (f.code === "context_length_exceeded") return contextProblem(f, sent, model);
  const gone = missingFileId(err);
  if (gone !== null || f.code === "file_not_found") {
    const here = attachmentOf(f, sent.text, sent.attachments);
    const before = gone ? (sent.earlier ?? []).find((a) => a.fileId === gone) : undefined;
    if (!here && before)
      return {
        title: `${before.name}, attached earlier in this chat, is no longer on the server.`,
        detail: "It was deleted, or it expired (uploaded files are kept 30 days). It is left out from now on: send your message again.",
        actions: ["retry", "edit"],
        reference,
      };
    return {
      title: `${here?.name ?? "An attached file"} is no longer on the server.`,
      detail: "It was deleted, or it expired (uploaded files are kept 30 days). Send the message without it, or edit the message and attach the file again.",
      actions: ["send_without_attachments", "edit"],
      reference,
    };
  }
  const attachment = attachmentOf(f, sent.text, sent.attachments);
  if (sent.attachments.length > 0 && (attachment || f.status === 413 || f.status === 422 || /file|pdf|image|content\[/i.test(`${f.code} ${f.param} ${f.message}`)))
    return {
      title: attachment ? `The model cannot read ${attachment.name}.` : "The model cannot read an attached file.",
      detail:
        f.status === 422
          ? "Files holding credentials (.env, .pem, keys and certificates) are never accepted."
          : f.status === 413
            ? "The attachments are too large to send together."
            : "The server could not read what is in it, so the model would get nothing from it. Send the message without it, or attach another copy.",
      actions: ["send_without_attachments", "edit"],
      reference,
    };
  if (f.status === 401)
    return {
      title: "The server refused the window's key.",
      detail: "The window made a new key and was refused again. On the Keys page, check that the 'local' account is enabled, then try again.",
      actions: ["open_keys", "retry"],
      reference,
    };
  return {
    title: f.status !== null && f.status < 500 ? "The server refused this message." : "Something went wrong while answering.",
    detail: "You can send it again, or edit it first.",
    actions: ["retry", "edit"],
    reference,
  };
}

/** A refused key: the window asks its main process for a fresh one and sends again, once. */
export function isKeyRefused(err: unknown): boolean {
  return err instanceof OpenAI.APIError && err.status === 401;
}
